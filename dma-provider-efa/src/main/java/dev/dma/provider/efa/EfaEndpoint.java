package dev.dma.provider.efa;

import dev.dma.api.DmaException;
import dev.dma.api.MemoryKind;
import dev.dma.api.RemoteAccess;
import dev.dma.spi.CompletionSink;
import dev.dma.spi.EndpointInfo;
import dev.dma.spi.ExposedRegion;
import dev.dma.spi.FabricEndpoint;
import java.lang.foreign.MemorySegment;
import java.util.Arrays;
import java.util.Collections;
import java.util.EnumSet;
import java.util.Set;
import org.jspecify.annotations.Nullable;

/**
 * An EFA endpoint: a {@link FabricEndpoint} that delegates to the generic libfabric endpoint (or,
 * in tests, to the fake configured like EFA) and adds EFA's rules.
 *
 * <ul>
 *   <li><b>Addresses</b>: {@link #peerIdentity} and {@link #insertPeer} refuse any length but 32
 *       ({@code efa address is {n} bytes, not 32}) before {@code fi_av_insert} can read past the
 *       caller's bytes; the identity is the first 18 bytes (GID + QPN), so the peer table evicts a
 *       recycled QPN's stale incarnation.
 *   <li><b>Errors</b>: a failed completion's message gets the advice of {@link EfaErrors} appended.
 *       Registration failures that EFA explains (no RDMA write, locked-memory limit) get advice
 *       too.
 *   <li><b>Local registration</b>: where it is required, a post without a descriptor is refused
 *       with {@code -FI_EINVAL} here, as efa-direct would, without a native call.
 *   <li><b>Handshake first</b> (the {@code efa} fabric): the first operation to a newly inserted
 *       peer is posted alone; further ones answer {@link #AGAIN} until it completes, so they wait
 *       under the worker's progress deadline instead of in the provider's pre-handshake queue,
 *       where a peer that never answers would hold them (and removing it loses them).
 * </ul>
 *
 * <p>Every other SPI method is forwarded to the delegate, but {@link #peerText} (EFA addresses are
 * GID and QPN bytes, shown in hex, whatever the delegate would read into them); {@code
 * EfaEndpointForwardingTest} holds that list.
 *
 * <p>Threads and ownership: as the SPI says, one owner thread; {@link #deregister(long)} from any
 * thread. This endpoint owns its delegate and closes it. Posting and reaping allocate nothing (a
 * failure's message is built on the failure path only).
 */
public final class EfaEndpoint implements FabricEndpoint {
  private static final int FI_EINVAL = -EfaAbi.FI_EINVAL;
  private static final int FI_EOPNOTSUPP = EfaAbi.FI_EOPNOTSUPP;
  private static final int FI_ENOMEM = EfaAbi.FI_ENOMEM;

  // Handshake state of a peer handle.
  private static final byte PEER_NEW = 0;
  private static final byte PEER_HANDSHAKING = 1;
  private static final byte PEER_READY = 2;

  /** Handles at or above this are not gated (FI_AV_TABLE handles are small indexes). */
  private static final long MAX_GATED_HANDLE = 1 << 24;

  private final FabricEndpoint delegate;
  private final EfaFabric fabric;
  private final EfaDecisions decisions;
  private final boolean gate;
  private final AdvisingSink sink = new AdvisingSink();

  private byte[] peerState = new byte[64];
  private long[] slotPeer = new long[0];
  private boolean[] slotProbe = new boolean[0];

  private EfaEndpoint(FabricEndpoint delegate, EfaFabric fabric, EfaDecisions decisions) {
    this.delegate = delegate;
    this.fabric = fabric;
    this.decisions = decisions;
    this.gate = decisions.handshakeFirst();
  }

  /**
   * Wraps an open endpoint whose decisions were taken ({@link EfaDecisions#decide}).
   *
   * @param delegate the open endpoint, owned from now on by the returned one
   * @param decisions what was decided for it
   * @return the EFA endpoint
   */
  public static EfaEndpoint over(FabricEndpoint delegate, EfaDecisions decisions) {
    return new EfaEndpoint(delegate, decisions.fabric(), decisions);
  }

  /**
   * The fabric whose rules apply.
   *
   * @return the fabric
   */
  public EfaFabric fabric() {
    return fabric;
  }

  /**
   * What was decided from the returned entry.
   *
   * @return the decisions
   */
  public EfaDecisions decisions() {
    return decisions;
  }

  /**
   * The endpoint this one delegates to.
   *
   * @return the delegate
   */
  public FabricEndpoint delegate() {
    return delegate;
  }

  // ---------------------------------------------------------------------------------------------
  // Addresses

  /** {@inheritDoc} */
  @Override
  public byte[] localAddress() {
    return delegate.localAddress();
  }

  /**
   * {@inheritDoc}
   *
   * @return the first 18 bytes (GID + QPN)
   * @throws DmaException {@code efa address is {n} bytes, not 32} for any other length
   */
  @Override
  public byte[] peerIdentity(byte[] address) {
    return EfaAddresses.identity(address);
  }

  /**
   * {@inheritDoc}
   *
   * @throws DmaException {@code efa address is {n} bytes, not 32} before anything reaches {@code
   *     fi_av_insert}, or the delegate's insert failure
   */
  @Override
  public long insertPeer(byte[] address) {
    EfaAddresses.check(address);
    long handle = delegate.insertPeer(address);
    if (gate && handle >= 0 && handle < MAX_GATED_HANDLE) {
      if (handle >= peerState.length) {
        peerState = Arrays.copyOf(peerState, (int) Math.max(handle + 1, 2L * peerState.length));
      }
      // A new peer (or a reused handle naming another one) handshakes again.
      peerState[(int) handle] = PEER_NEW;
    }
    return handle;
  }

  /** {@inheritDoc} */
  @Override
  public int removePeer(long handle) {
    if (gate && handle >= 0 && handle < peerState.length) {
      peerState[(int) handle] = PEER_NEW;
    }
    return delegate.removePeer(handle);
  }

  /**
   * {@inheritDoc}
   *
   * <p>The delegate's, but never {@link Capability#REMOVAL_FLUSHES} on either EFA fabric (EFA.md,
   * pitfalls): on {@code efa}, {@code fi_av_remove} with operations outstanding releases the peer's
   * tx/rx entries so those operations never complete; on efa-direct the address handle is destroyed
   * with work requests still posted, with undefined results. The worker resets the endpoint
   * instead.
   */
  @Override
  public Set<Capability> capabilities() {
    Set<Capability> delegated = delegate.capabilities();
    if (!delegated.contains(Capability.REMOVAL_FLUSHES)) {
      return delegated;
    }
    EnumSet<Capability> declared = EnumSet.copyOf(delegated);
    declared.remove(Capability.REMOVAL_FLUSHES);
    return Collections.unmodifiableSet(declared);
  }

  /** {@inheritDoc} */
  @Override
  public boolean wantsQuietReset() {
    return delegate.wantsQuietReset();
  }

  /** {@inheritDoc} */
  @Override
  public @Nullable String peerGone(byte[] address) {
    return delegate.peerGone(address);
  }

  /**
   * {@inheritDoc}
   *
   * <p>Every peer handshakes again after a reset. On efa-direct the new queue pair has a new QPN,
   * so the address changes: targets must insert the new one before they can be reached.
   */
  @Override
  public void reset() {
    delegate.reset();
    Arrays.fill(peerState, PEER_NEW);
  }

  // ---------------------------------------------------------------------------------------------
  // Registrations

  /**
   * {@inheritDoc}
   *
   * @return the decided depth ({@link EfaDecisions#maxTx()}), which may be below the provider's
   */
  @Override
  public int maxTx() {
    return decisions.maxTx();
  }

  /** {@inheritDoc} */
  @Override
  public boolean requiresLocalRegistration() {
    return delegate.requiresLocalRegistration();
  }

  /**
   * {@inheritDoc}
   *
   * @throws DmaException the delegate's failure; for {@code ENOMEM} with advice about the
   *     locked-memory limit
   */
  @Override
  public long register(long address, long lengthBytes, MemoryKind kind) {
    try {
      return delegate.register(address, lengthBytes, kind);
    } catch (DmaException failed) {
      throw advised(failed);
    }
  }

  /** {@inheritDoc} */
  @Override
  public long descriptor(long registration) {
    return delegate.descriptor(registration);
  }

  /** {@inheritDoc} */
  @Override
  public void deregister(long registration) {
    delegate.deregister(registration);
  }

  /**
   * {@inheritDoc}
   *
   * @throws DmaException the delegate's failure; for {@code EOPNOTSUPP} (a device without RDMA
   *     write, libfabric 2.5 and newer) and {@code ENOMEM} with advice
   */
  @Override
  public ExposedRegion expose(MemorySegment segment, RemoteAccess access) {
    try {
      return delegate.expose(segment, access);
    } catch (DmaException failed) {
      throw advised(failed);
    }
  }

  private DmaException advised(DmaException failed) {
    String advice =
        switch (failed.fabricErrno()) {
          case FI_EOPNOTSUPP ->
              "this EFA device has no RDMA write (p4d): expose the region read-only, or use"
                  + " provider efa, which emulates writes";
          case FI_ENOMEM ->
              "EFA pins registered memory: raise the locked-memory limit (ulimit -l unlimited), use"
                  + " huge pages, or set max_pinned_bytes lower";
          default -> null;
        };
    if (advice == null) {
      return failed;
    }
    return new DmaException(
        failed.kind(),
        failed.getMessage() + "; " + advice,
        failed.fabricErrno(),
        failed.providerErrno(),
        failed);
  }

  // ---------------------------------------------------------------------------------------------
  // Data path

  /** {@inheritDoc} */
  @Override
  public void openSlots(int count) {
    delegate.openSlots(count);
    if (gate) {
      slotPeer = new long[count];
      slotProbe = new boolean[count];
    }
  }

  /**
   * {@inheritDoc}
   *
   * <p>{@code -FI_EINVAL} without a native call for descriptor 0 where local registration is
   * required; {@link #AGAIN} while the peer's handshake is under way ({@code efa} fabric).
   */
  @Override
  public int postWrite(
      int slot,
      long peer,
      long localAddress,
      long lengthBytes,
      long descriptor,
      long remoteAddress,
      long remoteKey) {
    return post(true, slot, peer, localAddress, lengthBytes, descriptor, remoteAddress, remoteKey);
  }

  /**
   * {@inheritDoc}
   *
   * <p>Refuses as {@link #postWrite}.
   */
  @Override
  public int postRead(
      int slot,
      long peer,
      long localAddress,
      long lengthBytes,
      long descriptor,
      long remoteAddress,
      long remoteKey) {
    return post(false, slot, peer, localAddress, lengthBytes, descriptor, remoteAddress, remoteKey);
  }

  /** The checks and the handshake gate both directions share, then the delegate's post. */
  private int post(
      boolean write,
      int slot,
      long peer,
      long localAddress,
      long lengthBytes,
      long descriptor,
      long remoteAddress,
      long remoteKey) {
    if (descriptor == 0 && decisions.requiresLocalMr()) {
      return FI_EINVAL;
    }
    byte state = gate ? gateState(peer) : PEER_READY;
    if (state == PEER_HANDSHAKING) {
      return AGAIN;
    }
    int code =
        write
            ? delegate.postWrite(
                slot, peer, localAddress, lengthBytes, descriptor, remoteAddress, remoteKey)
            : delegate.postRead(
                slot, peer, localAddress, lengthBytes, descriptor, remoteAddress, remoteKey);
    if (state == PEER_NEW && code == POSTED) {
      startHandshake(slot, peer);
    }
    return code;
  }

  private byte gateState(long peer) {
    return peer >= 0 && peer < peerState.length ? peerState[(int) peer] : PEER_READY;
  }

  private void startHandshake(int slot, long peer) {
    if (slot >= 0 && slot < slotProbe.length) {
      peerState[(int) peer] = PEER_HANDSHAKING;
      slotPeer[slot] = peer;
      slotProbe[slot] = true;
    }
  }

  /** The first operation to a peer finished: on success the handshake is done, else retry it. */
  private void probeFinished(int slot, boolean succeeded) {
    if (slot >= 0 && slot < slotProbe.length && slotProbe[slot]) {
      slotProbe[slot] = false;
      long peer = slotPeer[slot];
      if (peer < peerState.length && peerState[(int) peer] == PEER_HANDSHAKING) {
        peerState[(int) peer] = succeeded ? PEER_READY : PEER_NEW;
      }
    }
  }

  /** {@inheritDoc} */
  @Override
  public String errorText(int code) {
    return delegate.errorText(code);
  }

  /** {@inheritDoc} */
  @Override
  public DmaException.Reason postFailureReason(int code) {
    return delegate.postFailureReason(code);
  }

  /**
   * {@inheritDoc}
   *
   * <p>Failures reach {@code sink} with {@link EfaErrors#describe} applied to their message.
   */
  @Override
  public int reap(CompletionSink sink, int max) {
    this.sink.target = sink;
    try {
      return delegate.reap(this.sink, max);
    } finally {
      this.sink.target = AdvisingSink.NOWHERE;
    }
  }

  /** {@inheritDoc} */
  @Override
  public void progress() {
    delegate.progress();
  }

  /** {@inheritDoc} */
  @Override
  public boolean awaitIncoming(long timeoutNanos) {
    return delegate.awaitIncoming(timeoutNanos);
  }

  /** {@inheritDoc} */
  @Override
  public boolean incomingPending() {
    return delegate.incomingPending();
  }

  /** {@inheritDoc} */
  @Override
  public @Nullable MemorySegment allocateExposable(long lengthBytes) {
    return delegate.allocateExposable(lengthBytes);
  }

  /** {@inheritDoc} */
  @Override
  public long incomingServed() {
    return delegate.incomingServed();
  }

  /** {@inheritDoc} */
  @Override
  public void wakeup() {
    delegate.wakeup();
  }

  /** {@inheritDoc} */
  @Override
  public EndpointInfo describe() {
    return delegate.describe();
  }

  /** Closes the delegate; idempotent as the delegate is. */
  @Override
  public void close() {
    delegate.close();
  }

  @Override
  public String toString() {
    return "EfaEndpoint[" + fabric.configuredName() + ", " + delegate + "]";
  }

  /** One preallocated sink per endpoint, so reaping allocates nothing. Owner thread only. */
  private final class AdvisingSink implements CompletionSink {
    /**
     * The target outside a reap, so a stray call fails loudly rather than reaching a stale sink.
     */
    static final CompletionSink NOWHERE =
        new CompletionSink() {
          @Override
          public void completed(int slot) {
            throw new IllegalStateException("completion outside reap");
          }

          @Override
          public void failed(int slot, int errno, int providerErrno, String message) {
            throw new IllegalStateException("completion outside reap");
          }
        };

    CompletionSink target = NOWHERE;

    @Override
    public void completed(int slot) {
      if (gate) {
        probeFinished(slot, true);
      }
      target.completed(slot);
    }

    @Override
    public void failed(int slot, int errno, int providerErrno, String message) {
      if (gate) {
        probeFinished(slot, false);
      }
      target.failed(slot, errno, providerErrno, EfaErrors.describe(message, errno, providerErrno));
    }
  }
}
