package dev.dma.fake;

import dev.dma.api.Advertisement;
import dev.dma.api.DmaException;
import dev.dma.api.MemoryKind;
import dev.dma.api.RemoteAccess;
import dev.dma.spi.CompletionSink;
import dev.dma.spi.EndpointInfo;
import dev.dma.spi.ExposedRegion;
import dev.dma.spi.FabricEndpoint;
import java.lang.foreign.MemorySegment;
import java.util.Collections;
import java.util.EnumSet;
import java.util.Objects;
import java.util.Set;
import org.jspecify.annotations.Nullable;

/**
 * One endpoint of a {@link FakeFabric}: a {@link FabricEndpoint} whose RMA copies real bytes
 * between native memory in this JVM, under the fabric's {@link FakeScript}.
 *
 * <h2>Threads and ownership</h2>
 *
 * As the SPI says, one thread owns an endpoint (the fabric worker, or a test driving it) and closes
 * it; any thread may {@link #deregister(long)}. Beyond the SPI, the fake is thread-safe throughout:
 * every method takes the fabric's lock, so a test thread may also read {@link #counters()}, {@link
 * #inFlight()} or {@link #heldCompletions()} while the owner posts, and another endpoint's owner (a
 * passive target) may {@link #progress()} or close concurrently. {@link #reap} calls the sink
 * outside the lock.
 *
 * <h2>What a post does</h2>
 *
 * <ol>
 *   <li><b>Validation</b>, where every failure is a <em>violation</em> of the SPI contract: the
 *       post returns {@code -FI_EINVAL} (-22) and {@link FakeCounters#violations()} counts it with
 *       a description ({@link FakeCounters#lastViolation()}), so a test asserts there were none.
 *       Violations: endpoint closed; {@link #openSlots} not called; slot out of range; slot still
 *       posted (not yet reaped); negative length or a null local address; a peer handle never
 *       inserted or already removed; and when {@link FakeScript#requireLocalRegistration local
 *       registration is required}, a descriptor that is 0, not from {@link #descriptor}, of a
 *       deregistered registration, of another endpoint, or not covering the local bytes.
 *   <li><b>Scripted refusals</b>: {@link FakeScript#failPostsTo} and {@link
 *       FakeScript#failNextPosts} make the post return {@code -errno} (not a violation).
 *   <li><b>{@code -FI_EAGAIN}</b> ({@link FabricEndpoint#AGAIN}) when the peer is unreachable
 *       (scripted, closed, or no endpoint has its address: for ever, like tcp;ofi_rxm to a dead
 *       process), when {@code maxTx} operations are unreaped on this endpoint, while {@link
 *       FakeScript#againWhile} holds, or for the next {@link FakeScript#againTimes} posts, checked
 *       in that order.
 *   <li><b>Acceptance</b> ({@link FabricEndpoint#POSTED}): the op gets its number ({@link
 *       FakeOp#index()}), then a scripted fault makes it an error completion without moving bytes;
 *       a hold rule, or a target that must progress, parks it; otherwise its bytes move now and its
 *       completion is queued.
 * </ol>
 *
 * <p>Moving the bytes checks, at the target, that the key names a live region the target exposed,
 * that {@code [remoteAddress, remoteAddress + length)} (an offset, or a virtual address when the
 * region was exposed with virtual addressing) lies inside it, and that it allows the access; a
 * failure completes the op with {@code FI_EACCES} (13), provider errno -13 (as the sockets provider
 * does) and a provider text saying which check failed. A target closed meanwhile gives {@code
 * FI_ECANCELED} (125), provider errno 107 (as tcp;ofi_rxm does; its reason is {@code
 * ACCESS_DENIED}, as dma reports tcp's); an uninserted initiator, when {@linkplain
 * FakeScript#rejectUninsertedInitiator rejected}, {@code FI_ENOTCONN} (107), provider errno 14.
 * Error completions carry the exact message of {@link FiErrno#completionMessage(int, int, String)}.
 *
 * <p>The local bytes of an op move by raw address, unless they lie in an operand a test {@linkplain
 * FakeFabric#watchOperand watches}: then they move through that segment, and touching it after its
 * arena closed (the test closes it when the completion is delivered) is recorded in {@link
 * FakeFabric#operandViolations()} instead of touching freed memory.
 *
 * <p>Completions come out of {@link #reap} in the order they were queued (or newest first, as
 * {@linkplain FakeScript#completionOrder scripted}); a slot is free again once its completion was
 * delivered.
 *
 * <p>Peer handles count from 0 and are never reused (unless {@linkplain
 * FakeScript#reuseAddressHandles scripted}), so a removed handle stays detectably stale.
 * Registration handles and descriptors are distinct non-zero values, so passing one for the other
 * is caught.
 *
 * <h2>Where the parts live</h2>
 *
 * This class keeps the endpoint's public face and the per-transfer path, post to reap, top to
 * bottom: validate, ask the script, accept, then move the bytes, park the op or fail it, and reap.
 * Each step's detail lives in a package-private collaborator this endpoint alone calls, with the
 * fabric's lock held (each says which threads reach it):
 *
 * <ul>
 *   <li>{@code SpiContract}: which calls violate the SPI, the text saying why, and what it does;
 *   <li>{@code ScriptedDecisions}: what the script answers a valid call (a failed insert, a refused
 *       post, {@code -FI_EAGAIN}, the hold, lose and fault rules, a failed CQ read);
 *   <li>{@code Rma}: the target-side checks of an accepted op and the copy of its bytes;
 *   <li>{@code ParkedOps}: how held ops, ops awaiting their target and flushed ops reach the queue;
 *   <li>{@code TargetProgress}: this endpoint as a passive target (waiting ops, the sleep and
 *       wake);
 *   <li>{@code ReapBatch}: what a reap takes off the queue, delivered to the sink outside the lock;
 *   <li>{@code OpAudit}: operands released and contexts written while the provider owned them;
 *   <li>{@code ExposedRegions} and {@code Region}: the exposed memory and the remote-access checks;
 *   <li>{@code FakePeers}: inserting, removing and probing peers under the script;
 *   <li>{@code AddressVector} (peer handles), {@code Registrations} and {@code Registration} (local
 *       registration), {@code OpSlots} (what each posted op is and how it ends), {@code
 *       CompletionQueue} (ready and held completions) and {@code OpContexts} (the slots' {@code
 *       fi_context2} memory).
 * </ul>
 */
public final class FakeEndpoint implements FabricEndpoint {
  /** Bytes of provider-owned context per op slot, as libfabric's {@code fi_context2}. */
  public static final int CONTEXT_BYTES = 64;

  /**
   * The address format {@link #describe()} reports for plain addresses ({@code FI_FORMAT_UNSPEC}).
   */
  public static final int ADDR_FORMAT_FAKE = 0;

  /**
   * The address format {@link #describe()} reports for EFA-shaped addresses ({@code FI_ADDR_EFA}).
   */
  public static final int ADDR_FORMAT_EFA = 12;

  private static final int MR_LOCAL = 1 << 2;
  private static final int MR_VIRT_ADDR = 1 << 4;
  private static final long CAPS =
      (1L << 2) | (1L << 8) | (1L << 9) | (1L << 12) | (1L << 13); // RMA, READ, WRITE, REMOTE_*

  private final FakeFabric fabric;
  private final Object lock;
  private final FakeScript script;
  private final byte[] address;
  private final boolean efa;
  private final int qpn;
  private final Counts counts;
  private boolean closed;

  /** Guarded by {@link #lock}. */
  private @Nullable MemoryKind lastRegisteredKind;

  private final AddressVector peers = new AddressVector();
  private final Registrations registrations;
  private final ExposedRegions exposed;
  private final TargetProgress incoming;

  // Op slots, sized by openSlots, so a post allocates nothing.
  private final OpSlots slots = new OpSlots();
  private final CompletionQueue completions = new CompletionQueue();
  private @Nullable OpContexts contexts;

  private final SpiContract contract;
  private final FakePeers peerTable;
  private final ScriptedDecisions decisions;
  private final Rma rma;
  private final ParkedOps parked;
  private final OpAudit audit;
  private final ReapBatch batch;

  FakeEndpoint(FakeFabric fabric, byte[] address, int qpn) {
    this.fabric = fabric;
    this.lock = fabric.lock;
    this.script = fabric.scriptUnlocked();
    this.address = address;
    this.efa = address.length == FakeAddresses.EFA_BYTES;
    this.qpn = qpn;
    this.counts = new Counts(fabric.counts);
    this.registrations = new Registrations(this, fabric, script, counts);
    this.exposed = new ExposedRegions(this, fabric, script, counts);
    this.incoming = new TargetProgress(lock);
    this.contract = new SpiContract(counts, slots, peers, registrations, script);
    this.decisions = new ScriptedDecisions(script, address);
    this.rma = new Rma(address, fabric, script, counts, slots, completions);
    this.parked = new ParkedOps(this, counts, slots, completions, rma);
    this.peerTable = new FakePeers(fabric, script, counts, efa, peers, slots, decisions, parked);
    this.audit = new OpAudit(fabric, counts, slots);
    this.batch = new ReapBatch(script, counts, slots, completions, audit);
  }

  /**
   * The fabric this endpoint belongs to.
   *
   * @return the fabric
   */
  public FakeFabric fabric() {
    return fabric;
  }

  /**
   * What this endpoint was asked to do; any thread.
   *
   * @return a snapshot
   */
  public FakeCounters counters() {
    synchronized (lock) {
      return counts.snapshot();
    }
  }

  /**
   * Operations accepted and not yet reaped (held ones included); any thread.
   *
   * @return the count
   */
  public int inFlight() {
    synchronized (lock) {
      return slots.inFlight;
    }
  }

  /**
   * Completions held by the script on this endpoint; any thread.
   *
   * @return the count
   */
  public int heldCompletions() {
    synchronized (lock) {
      return completions.heldCount();
    }
  }

  /**
   * Peers in this endpoint's address vector now; any thread.
   *
   * @return the count of live peer handles
   */
  public int livePeers() {
    synchronized (lock) {
      return peers.live();
    }
  }

  /**
   * Whether this endpoint's address vector holds a live entry for exactly this address; any thread.
   * For example, to assert that a server removed a departed client's peer.
   *
   * @param peerAddress the peer's address
   * @return whether a live handle names it
   */
  public boolean hasPeer(byte[] peerAddress) {
    synchronized (lock) {
      return peers.contains(peerAddress);
    }
  }

  /**
   * Whether this endpoint was closed (by its owner or by closing its fabric); any thread.
   *
   * @return whether closed
   */
  public boolean isClosed() {
    synchronized (lock) {
      return closed;
    }
  }

  /**
   * The provider-owned context of an op slot: {@value #CONTEXT_BYTES} bytes of native memory, as a
   * libfabric binding hands a provider for {@code FI_CONTEXT2}. While an op is posted with {@link
   * FakeScript#scribbleContexts} on, the fake writes into it and checks on completion that nobody
   * else did; a test writes into it to show that check working. Valid until the endpoint closes.
   *
   * @param slot an op slot
   * @return the slot's context
   * @throws IllegalStateException before {@link #openSlots} or after close
   */
  public MemorySegment opContext(int slot) {
    synchronized (lock) {
      if (closed || contexts == null) {
        throw new IllegalStateException("no op contexts: the endpoint is closed or has no slots");
      }
      return contexts.of(slot);
    }
  }

  @Override
  public byte[] localAddress() {
    return address.clone();
  }

  /**
   * The identity of a fake address: every byte for plain addresses, GID and QPN (the first 18
   * bytes) for EFA-shaped ones.
   *
   * @throws DmaException of kind FABRIC for bytes that are not an address of this endpoint's
   *     format, naming what is wrong (for example {@code fake address is 5 bytes, not 16})
   */
  @Override
  public byte[] peerIdentity(byte[] peerAddress) {
    String problem = FakeAddresses.problem(peerAddress, efa);
    if (problem != null) {
      throw DmaException.fabric(DmaException.Reason.BAD_REQUEST, problem);
    }
    return FakeAddresses.identity(peerAddress, efa);
  }

  /**
   * Inserts a peer. Any well-formed address is accepted, as real address vectors do; one that no
   * open endpoint has is unreachable when posted against.
   *
   * @throws DmaException of kind FABRIC for a malformed address, a scripted failure ({@code
   *     fi_av_insert: ... (-errno)}) or a closed endpoint
   */
  @Override
  public long insertPeer(byte[] peerAddress) {
    synchronized (lock) {
      if (closed) {
        throw DmaException.fabric("fi_av_insert: the endpoint is closed");
      }
      return peerTable.insert(peerAddress);
    }
  }

  /**
   * Removes a peer. With ops against it unreaped, counts {@link
   * FakeCounters#removesWithOpsOutstanding()} and, when {@link FakeScript#flushOnRemove} is on,
   * fails them. A handle never inserted or already removed is a violation.
   *
   * @return 0, or {@code -FI_EINVAL} for a violation
   */
  @Override
  public int removePeer(long handle) {
    synchronized (lock) {
      String problem = contract.removePeerProblem(closed, handle);
      if (problem != null) {
        return contract.violation(problem);
      }
      peerTable.remove(handle);
      return 0;
    }
  }

  /**
   * {@inheritDoc}
   *
   * <p>As dma's tcp and shm endpoints answer: gone when no open endpoint of this fabric has the
   * address (it closed, or never existed), with the text {@code "no open fake endpoint has the
   * address <hex> any more"}. A target made unreachable by {@link FakeScript#unreachable} (a
   * partition) is not gone. An EFA-shaped endpoint never answers, as efa cannot look.
   */
  @Override
  public @Nullable String peerGone(byte[] peerAddress) {
    if (efa) {
      return null;
    }
    synchronized (lock) {
      return peerTable.gone(peerAddress);
    }
  }

  /**
   * {@inheritDoc}
   *
   * <p>{@link Capability#AWAITS_INCOMING} always (the fake wakes a sleeping target when an
   * operation starts waiting for its progress); {@link Capability#REMOVAL_FLUSHES} when removal is
   * scripted to flush ({@link FakeScript#flushOnRemove}); {@link
   * Capability#COMPLETES_IN_POST_ORDER} as {@link FakeScript#completesInPostOrder} says. The script
   * as it stands when the owner reads the set, once, as it starts: script these before the service
   * or target starts.
   */
  @Override
  public Set<Capability> capabilities() {
    synchronized (lock) {
      EnumSet<Capability> declared = EnumSet.of(Capability.AWAITS_INCOMING);
      if (script.flushOnRemove) {
        declared.add(Capability.REMOVAL_FLUSHES);
      }
      if (script.completesInPostOrder) {
        declared.add(Capability.COMPLETES_IN_POST_ORDER);
      }
      return Collections.unmodifiableSet(declared);
    }
  }

  /**
   * {@inheritDoc}
   *
   * <p>The fake discards every posted operation without moving its bytes (held, awaiting its target
   * or ready to reap alike: a held op released later finds nothing), voids every peer handle (a
   * post to one is a violation) and keeps registrations and exposed regions. The address stays the
   * same, as a tcp endpoint bound to a fixed port would.
   */
  @Override
  public void reset() {
    synchronized (lock) {
      if (closed) {
        contract.violation("reset on a closed endpoint");
        throw new IllegalStateException("reset on a closed endpoint");
      }
      counts.increment(Counts.RESETS);
      audit.checkPostedStillOwned("reset");
      counts.add(Counts.OPS_DISCARDED_BY_RESET, slots.discardAll());
      completions.clear();
      peers.removeAll();
    }
  }

  @Override
  public int maxTx() {
    synchronized (lock) {
      return script.maxTxReported;
    }
  }

  @Override
  public boolean requiresLocalRegistration() {
    synchronized (lock) {
      return script.requireLocalRegistration;
    }
  }

  /**
   * Registers local memory. The fake pins nothing; it records the range so posts can be checked
   * against it.
   *
   * @throws DmaException of kind FABRIC: {@code fi_mr_reg: Invalid argument (-22)} for a null
   *     address, a non-positive length or an overflowing range; {@code fi_mr_reg: Cannot allocate
   *     memory (-12)} beyond {@link FakeScript#pinnableBytes}; a scripted failure; a closed
   *     endpoint
   */
  @Override
  public long register(long localAddress, long lengthBytes, MemoryKind kind) {
    synchronized (lock) {
      if (closed) {
        throw DmaException.fabric("fi_mr_reg: the endpoint is closed");
      }
      // Any kind registers: the fake moves bytes with the CPU whatever the kind says, and records
      // the kind so that tests see which one reached the provider.
      lastRegisteredKind = kind;
      return registrations.register(localAddress, lengthBytes);
    }
  }

  /**
   * The kind of memory the latest {@link #register(long, long, MemoryKind)} call named, whether or
   * not it succeeded. Any thread.
   *
   * @return the kind, or {@code null} before the first registration
   */
  public @Nullable MemoryKind lastRegisteredKind() {
    synchronized (lock) {
      return lastRegisteredKind;
    }
  }

  /**
   * The descriptor of a live registration of this endpoint. Anything else is a violation, answered
   * with descriptor 0.
   */
  @Override
  public long descriptor(long registration) {
    synchronized (lock) {
      String problem = contract.descriptorProblem(closed, registration);
      if (problem != null) {
        contract.violation(problem);
        return 0;
      }
      return Registrations.descriptor(registrations.live(registration));
    }
  }

  /**
   * Closes a registration; any thread. A handle that is not a live registration of this endpoint
   * (never issued, already deregistered, closed with its endpoint, another endpoint's) is a
   * violation. Deregistering while an unreaped op uses the registration's descriptor is a violation
   * too (the registration still closes): the provider may still be reading it.
   */
  @Override
  public void deregister(long registration) {
    synchronized (lock) {
      String problem = contract.deregisterProblem(closed, registration);
      if (problem != null) {
        contract.violation(problem);
        return;
      }
      Registration live = registrations.live(registration);
      int user = slots.userOf(live.id);
      // Closed even when in use: the caller asked, and a real provider would have closed it too.
      registrations.deregister(live);
      if (user >= 0) {
        contract.violation(contract.inUse(live, user));
      }
    }
  }

  /**
   * Prepares the op slots and their {@value #CONTEXT_BYTES}-byte contexts. Calling it again, or
   * with fewer than 1 slot, is a violation and changes nothing.
   */
  @Override
  public void openSlots(int count) {
    synchronized (lock) {
      String problem = contract.openSlotsProblem(closed, count);
      if (problem != null) {
        contract.violation(problem);
        return;
      }
      completions.open(count);
      contexts = new OpContexts(count);
      slots.open(count);
    }
  }

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

  private int post(
      boolean write,
      int slot,
      long peer,
      long localAddress,
      long lengthBytes,
      long descriptor,
      long remoteAddress,
      long remoteKey) {
    synchronized (lock) {
      counts.increment(Counts.POST_ATTEMPTS);
      String call = write ? "postWrite" : "postRead";
      String problem =
          contract.postProblem(closed, call, slot, peer, localAddress, lengthBytes, descriptor);
      if (problem != null) {
        return contract.postViolation(problem);
      }
      long registrationId = script.requireLocalRegistration ? Registrations.id(descriptor) : 0;
      byte[] peerAddress = peers.address(peer);
      int refused = decisions.postFailure(peerAddress);
      if (refused != 0) {
        counts.increment(Counts.POST_ERRORS);
        return -refused;
      }
      FakeEndpoint target = peers.target(peer);
      if (target == null || decisions.again(target, slots.inFlight)) {
        counts.increment(Counts.AGAIN_ANSWERS);
        return AGAIN;
      }

      long index = fabric.nextOpIndex();
      // Rules run before the slot changes, so a matcher that throws leaves no half-posted op.
      decisions.judge(
          index,
          write,
          slot,
          peerAddress,
          peer,
          localAddress,
          lengthBytes,
          remoteAddress,
          remoteKey);
      slots.accept(
          slot,
          index,
          write,
          peer,
          localAddress,
          lengthBytes,
          remoteAddress,
          remoteKey,
          registrationId,
          target,
          fabric.watchedOperand(localAddress, lengthBytes));
      counts.increment(Counts.POSTS);
      counts.increment(write ? Counts.WRITES : Counts.READS);
      FakeScript.Rule fault = decisions.fault;
      if (fault != null) {
        slots.fail(slot, fault.errno, fault.providerErrno, fault.providerText);
      }
      slots.scribbled[slot] = script.scribbleContexts;
      if (script.scribbleContexts) {
        Objects.requireNonNull(contexts).scribble(slot, write, peer, index);
      }
      if (decisions.lose) {
        slots.hold[slot] = OpSlots.LOST;
      } else if (decisions.hold) {
        slots.hold[slot] = OpSlots.HELD;
        completions.hold(slot);
      } else if (!slots.done[slot] && script.targetProgressRequired) {
        slots.hold[slot] = OpSlots.AWAITING_TARGET;
        target.incoming.add(this, slot, index);
      } else {
        rma.complete(slot);
      }
      return FabricEndpoint.POSTED;
    }
  }

  @Override
  public String errorText(int code) {
    return FiErrno.text(code);
  }

  /**
   * Delivers up to {@code max} queued completions to {@code sink}, outside the fabric's lock, and
   * frees their slots before calling it. A target endpoint's reap also progresses it (see {@link
   * #progress()}). A scripted CQ-read failure is thrown after the completions it lets through.
   * Reaping a closed endpoint, or with {@code max} below 1, is a violation that reaps nothing.
   */
  @Override
  public int reap(CompletionSink sink, int max) {
    int count;
    FakeScript.CqFailure failure;
    synchronized (lock) {
      if (closed) {
        contract.violation("reap on a closed endpoint");
        return 0;
      }
      if (max < 1) {
        contract.violation("reap(sink, " + max + "): max must be positive");
        return 0;
      }
      incoming.progress();
      failure = decisions.reapFailure();
      count = batch.take(max, failure, contexts);
    }
    // The sink is the caller's code: call it without the lock, so it may use other endpoints of
    // the fabric, or wait for threads that do, without deadlocking.
    batch.deliver(sink, count, failure);
    return count;
  }

  /**
   * Exposes native memory for remote access. The key is unique on the fabric (1, 2, ... in the
   * order regions are exposed); the advertisement's remote address is the segment's address under
   * {@linkplain FakeScript#virtualAddressing virtual addressing}, else 0. The segment may belong to
   * any arena (a confined one too: the fake copies by address); it must stay alive until the region
   * is closed, which the fake checks when bytes move.
   *
   * @throws DmaException of kind FABRIC for a heap segment or a closed endpoint
   */
  @Override
  public ExposedRegion expose(MemorySegment segment, RemoteAccess access) {
    synchronized (lock) {
      if (closed) {
        throw DmaException.fabric("fi_mr_reg: the endpoint is closed");
      }
      return exposed.expose(segment, access);
    }
  }

  /**
   * Progresses this endpoint as a target: ops of other endpoints waiting for it ({@link
   * FakeScript#targetProgressRequired}) move their bytes and become reapable. Otherwise a no-op,
   * since the fake moves bytes when an op is posted.
   */
  @Override
  public void progress() {
    synchronized (lock) {
      if (closed) {
        contract.violation("progress on a closed endpoint");
        return;
      }
      counts.increment(Counts.PROGRESS_CALLS);
      incoming.progress();
    }
  }

  /**
   * Sleeps until an initiator's operation waits for this endpoint's progress ({@link
   * FakeScript#targetProgressRequired}), or for at most {@code timeoutNanos}.
   */
  @Override
  public boolean awaitIncoming(long timeoutNanos) {
    synchronized (lock) {
      return incoming.await(timeoutNanos, closed);
    }
  }

  /** Whether an initiator's operation waits for this endpoint's progress. */
  @Override
  public boolean incomingPending() {
    synchronized (lock) {
      return incoming.pending();
    }
  }

  /** Ends a wait in {@link #awaitIncoming}, or the next one, from any thread. */
  @Override
  public void wakeup() {
    synchronized (lock) {
      incoming.wakeup();
    }
  }

  /**
   * The ops of this endpoint whose completion is parked, with the lock held: for {@link FakeScript}
   * releasing held completions and for a target progressing ops that wait for it.
   */
  ParkedOps parked() {
    return parked;
  }

  @Override
  public EndpointInfo describe() {
    synchronized (lock) {
      int mrMode =
          (script.requireLocalRegistration ? MR_LOCAL : 0)
              | (script.virtualAddressing ? MR_VIRT_ADDR : 0);
      return new EndpointInfo(
          "fake",
          efa ? ADDR_FORMAT_EFA : ADDR_FORMAT_FAKE,
          mrMode,
          CAPS,
          script.requireLocalRegistration,
          script.virtualAddressing);
    }
  }

  /**
   * Closes the endpoint: its registrations and regions still open are closed (and counted), ops
   * still unreaped are dropped (and counted in {@link FakeCounters#opsInFlightAtClose()}), ops of
   * other endpoints waiting for this target complete with {@code FI_ECANCELED}, and its address
   * becomes unreachable. Idempotent; any thread.
   */
  @Override
  public void close() {
    synchronized (lock) {
      if (closed) {
        return;
      }
      closed = true;
      counts.add(Counts.OPS_IN_FLIGHT_AT_CLOSE, slots.inFlight);
      audit.checkPostedStillOwned("close");
      registrations.closeAll();
      exposed.closeAll();
      // Waiting initiators see this target closed, so their ops fail with FI_ECANCELED.
      incoming.progress();
      fabric.endpointClosed(this);
      if (contexts != null) {
        contexts.close();
        contexts = null;
      }
    }
  }

  @Override
  public String toString() {
    return "FakeEndpoint[" + fabric.name() + " " + Advertisement.encodeHex(address) + "]";
  }

  // ----------------------------------------------------------------------------------- helpers

  byte[] addressUnsafe() {
    return address;
  }

  int qpn() {
    return qpn;
  }

  /** The fabric's lock, which guards this endpoint; for its regions' {@link Region#close()}. */
  Object lock() {
    return lock;
  }

  /** Forgets a region of this endpoint that just closed, with the lock held. */
  void regionClosed(Region region) {
    exposed.closed(region);
  }

  /** Whether this endpoint is closed, with the lock held; for an initiator's checks. */
  boolean isClosedUnlocked() {
    return closed;
  }

  /** Whether a live peer handle names {@code peerAddress}, with the lock held. */
  boolean hasPeerUnlocked(byte[] peerAddress) {
    return peers.contains(peerAddress);
  }
}
