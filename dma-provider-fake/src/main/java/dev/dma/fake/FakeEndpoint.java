package dev.dma.fake;

import dev.dma.api.Advertisement;
import dev.dma.api.DmaException;
import dev.dma.api.RemoteAccess;
import dev.dma.spi.CompletionSink;
import dev.dma.spi.EndpointInfo;
import dev.dma.spi.ExposedRegion;
import dev.dma.spi.FabricEndpoint;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.Collections;
import java.util.EnumSet;
import java.util.List;
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
 * bottom. Its state lives in package-private helpers it alone calls, with the fabric's lock held:
 * {@code AddressVector} (peer handles), {@code Registrations} and {@code Registration} (local
 * registration), {@code Region} (exposed memory and the remote-access checks), {@code OpSlots}
 * (what each posted op is and how it ends), {@code CompletionQueue} (ready and held completions)
 * and {@code OpContexts} (the slots' {@code fi_context2} memory).
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

  private static final int VIOLATION = -FiErrno.EINVAL;
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

  private final AddressVector peers = new AddressVector();
  private final Registrations registrations;
  private final List<Region> exposed = new ArrayList<>();
  // Ops of other endpoints waiting for this (target) endpoint to progress.
  private final List<Awaiting> awaiting = new ArrayList<>();

  /** Set by {@link #wakeup()}, cleared by the wait it ends; guarded by {@link #lock}. */
  private boolean wakeRequested;

  // Op slots, sized by openSlots, so a post allocates nothing.
  private final OpSlots slots = new OpSlots();
  private final CompletionQueue completions = new CompletionQueue();
  private @Nullable OpContexts contexts;

  // Reap's scratch, so the sink is called outside the lock without allocating.
  private int[] reapSlots = new int[16];
  private int[] reapErrno = new int[16];
  private int[] reapProviderErrno = new int[16];
  private String[] reapText = new String[16];

  FakeEndpoint(FakeFabric fabric, byte[] address, int qpn) {
    this.fabric = fabric;
    this.lock = fabric.lock;
    this.script = fabric.scriptUnlocked();
    this.address = address;
    this.efa = address.length == FakeAddresses.EFA_BYTES;
    this.qpn = qpn;
    this.counts = new Counts(fabric.counts);
    this.registrations = new Registrations(this, fabric, script, counts);
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

  /**
   * The reason of an error completion, as dma's libfabric endpoint gives it for the same error on
   * tcp: {@code FI_ECANCELED} (the fake's closed target, tcp's closed connection) is {@link
   * DmaException.Reason#ACCESS_DENIED}, since tcp cannot tell a target that refused from one that
   * went away (the worker then asks {@link #peerGone}, and reports a closed target as {@link
   * DmaException.Reason#PEER_UNREACHABLE}, as it does on tcp); the rest is what the error number
   * says. Keeps a test on the fake choosing the same action as the server will on tcp (dma-it's
   * conformance suite checks both).
   */
  private static DmaException.Reason reasonOf(int errno) {
    return errno == FiErrno.ECANCELED
        ? DmaException.Reason.ACCESS_DENIED
        : DmaException.Reason.ofErrno(errno);
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
      String problem = FakeAddresses.problem(peerAddress, efa);
      if (problem != null) {
        counts.increment(Counts.INSERT_FAILURES);
        throw DmaException.fabric(DmaException.Reason.BAD_REQUEST, problem);
      }
      if (script.insertFailures > 0) {
        script.insertFailures--;
        counts.increment(Counts.INSERT_FAILURES);
        int errno = script.insertErrno;
        throw new DmaException(
            DmaException.Kind.FABRIC,
            FiErrno.callMessage("fi_av_insert", errno),
            errno,
            DmaException.UNKNOWN_ERRNO,
            null);
      }
      byte[] copy = peerAddress.clone();
      FakeEndpoint target = fabric.endpointAt(copy);
      counts.increment(Counts.INSERTS);
      return peers.insert(copy, target, script.reuseAddressHandles);
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
      if (closed) {
        return violation("removePeer(" + handle + ") on a closed endpoint");
      }
      String problem = peers.problem(handle);
      if (problem != null) {
        return violation("removePeer(" + handle + "): " + problem);
      }
      peers.remove(handle);
      counts.increment(Counts.REMOVES);
      if (slots.postedTo(handle) > 0) {
        counts.increment(Counts.REMOVES_WITH_OPS_OUTSTANDING);
        if (script.flushOnRemove) {
          flush(handle);
        }
      }
      return 0;
    }
  }

  /** Fails every unreaped op against {@code handle} as EFA does when the peer is destroyed. */
  private void flush(long handle) {
    for (int slot = 0; slot < slots.count; slot++) {
      if (slots.state[slot] != OpSlots.POSTED || slots.peer[slot] != handle) {
        continue;
      }
      boolean queued = slots.hold[slot] == OpSlots.NOT_HELD;
      if (slots.hold[slot] == OpSlots.HELD) {
        completions.removeHeld(slot);
      }
      slots.hold[slot] = OpSlots.NOT_HELD;
      // An op that already failed keeps its own error; a success not yet reaped is flushed too,
      // because the worker cannot tell it from one still on the wire.
      if (!slots.done[slot] || slots.errno[slot] == 0) {
        slots.fail(slot, FiErrno.ECANCELED, 1, "Flushed during queue pair destroy");
        counts.increment(Counts.FLUSHED_OPS);
      }
      if (!queued) {
        completions.pushReady(slot);
      }
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
      counts.increment(Counts.PEER_PROBES);
      FakeEndpoint target = fabric.endpointAt(peerAddress);
      return target == null || target.closed
          ? "no open fake endpoint has the address "
              + java.util.HexFormat.of().formatHex(peerAddress)
              + " any more"
          : null;
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
        violation("reset on a closed endpoint");
        throw new IllegalStateException("reset on a closed endpoint");
      }
      counts.increment(Counts.RESETS);
      checkPostedStillOwned("reset");
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
  public long register(long localAddress, long lengthBytes) {
    synchronized (lock) {
      if (closed) {
        throw DmaException.fabric("fi_mr_reg: the endpoint is closed");
      }
      return registrations.register(localAddress, lengthBytes);
    }
  }

  /**
   * The descriptor of a live registration of this endpoint. Anything else is a violation, answered
   * with descriptor 0.
   */
  @Override
  public long descriptor(long registration) {
    synchronized (lock) {
      if (closed) {
        violation("descriptor(0x" + Long.toHexString(registration) + ") after the endpoint closed");
        return 0;
      }
      String problem = registrations.handleProblem(registration, "descriptor");
      if (problem != null) {
        violation(problem);
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
      if (closed) {
        // Closing the endpoint closed its registrations; libfabric would now free an MR twice.
        violation(
            "deregister(0x"
                + Long.toHexString(registration)
                + ") after the endpoint closed, which had closed the registration already");
        return;
      }
      String problem = registrations.handleProblem(registration, "deregister");
      if (problem != null) {
        violation(problem);
        return;
      }
      Registration live = registrations.live(registration);
      int user = slots.userOf(live.id);
      // Closed even when in use: the caller asked, and a real provider would have closed it too.
      registrations.deregister(live);
      if (user >= 0) {
        violation(
            "registration "
                + live.id
                + " was deregistered while op #"
                + slots.index[user]
                + " in slot "
                + user
                + " that uses it was not yet reaped");
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
      if (closed) {
        violation("openSlots(" + count + ") on a closed endpoint");
        return;
      }
      if (count < 1) {
        violation("openSlots(" + count + "): at least 1 slot is needed");
        return;
      }
      if (slots.count != 0) {
        violation("openSlots(" + count + ") called again; slots were opened with " + slots.count);
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
      if (closed) {
        return postViolation(call + " on a closed endpoint");
      }
      if (slots.count == 0) {
        return postViolation(call + " before openSlots");
      }
      if (slot < 0 || slot >= slots.count) {
        return postViolation(call + ": slot " + slot + " is outside [0, " + slots.count + ")");
      }
      if (slots.state[slot] != OpSlots.FREE) {
        return postViolation(
            call
                + ": slot "
                + slot
                + " is still owned by op #"
                + slots.index[slot]
                + ", which was not reaped");
      }
      if (lengthBytes < 0
          || (lengthBytes > 0 && localAddress == 0)
          || localAddress + lengthBytes < localAddress) {
        return postViolation(
            call + ": bad local operand [" + localAddress + ", +" + lengthBytes + ")");
      }
      String peerProblem = peers.problem(peer);
      if (peerProblem != null) {
        return postViolation(call + ": " + peerProblem);
      }
      long registrationId = 0;
      if (script.requireLocalRegistration) {
        String problem = registrations.descriptorProblem(descriptor, localAddress, lengthBytes);
        if (problem != null) {
          return postViolation(call + ": " + problem);
        }
        registrationId = Registrations.id(descriptor);
      }

      int refused = script.postFailure(peers.address(peer));
      if (refused != 0) {
        counts.increment(Counts.POST_ERRORS);
        return -refused;
      }
      FakeEndpoint target = peers.target(peer);
      if (target == null
          || target.closed
          || (!script.unreachable.isEmpty()
              && script.unreachable.contains(java.nio.ByteBuffer.wrap(target.address)))
          || (script.maxTxEnforced > 0 && slots.inFlight >= script.maxTxEnforced)
          || script.againNow()) {
        counts.increment(Counts.AGAIN_ANSWERS);
        return AGAIN;
      }

      long index = fabric.nextOpIndex();
      // Rules run before the slot changes, so a matcher that throws leaves no half-posted op.
      boolean hold = false;
      boolean lose = false;
      FakeScript.Rule fault = null;
      if (script.hasOpRules()) {
        FakeOp op =
            new FakeOp(
                index,
                write ? FakeOp.Kind.WRITE : FakeOp.Kind.READ,
                slot,
                address.clone(),
                peers.address(peer).clone(),
                peer,
                localAddress,
                lengthBytes,
                remoteAddress,
                remoteKey);
        hold = script.matchHold(op);
        lose = script.matchLose(op);
        fault = script.matchFault(op);
      }
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
      if (fault != null) {
        slots.fail(slot, fault.errno, fault.providerErrno, fault.providerText);
      }
      slots.scribbled[slot] = script.scribbleContexts;
      if (script.scribbleContexts) {
        Objects.requireNonNull(contexts).scribble(slot, write, peer, index);
      }
      if (lose) {
        slots.hold[slot] = OpSlots.LOST;
      } else if (hold) {
        slots.hold[slot] = OpSlots.HELD;
        completions.hold(slot);
      } else if (!slots.done[slot] && script.targetProgressRequired) {
        slots.hold[slot] = OpSlots.AWAITING_TARGET;
        target.awaiting.add(new Awaiting(this, slot, index));
        // Wakes a target sleeping in awaitIncoming (the fabric's endpoints share this lock).
        lock.notifyAll();
      } else {
        complete(slot);
      }
      return FabricEndpoint.POSTED;
    }
  }

  /** Moves the op's bytes unless it already failed, and queues its completion. */
  private void complete(int slot) {
    if (!slots.done[slot]) {
      move(slot);
    }
    completions.pushReady(slot);
  }

  /** Performs the op against its target, recording success or the error completion. */
  private void move(int slot) {
    FakeEndpoint target = slots.target[slot];
    long key = slots.key[slot];
    if (target.closed) {
      slots.fail(slot, FiErrno.ECANCELED, FiErrno.ENOTCONN, FiErrno.text(FiErrno.ENOTCONN));
      return;
    }
    long registrationId = slots.registration[slot];
    if (registrationId != 0 && fabric.registration(registrationId) == null) {
      // Deregistered while the op was held (already a violation): EFA fails it with a bad lkey,
      // and the fake must not read or write memory its owner may have freed since.
      slots.fail(slot, FiErrno.EINVAL, 5, "Invalid lkey: the local registration was closed");
      return;
    }
    if (script.rejectUninsertedInitiator && !target.peers.contains(address)) {
      slots.fail(
          slot,
          FiErrno.ENOTCONN,
          14,
          "Unknown peer: the target has not inserted the initiator's address into its address"
              + " vector (REMOTE_ERROR_UNKNOWN_PEER)");
      return;
    }
    Region region = fabric.region(key);
    if (region == null || region.owner != target) {
      slots.fail(
          slot,
          FiErrno.EACCES,
          -FiErrno.EACCES,
          "remote key " + key + " is not registered at the target");
      return;
    }
    boolean write = slots.write[slot];
    long remote = slots.remote[slot];
    long length = slots.lengthBytes[slot];
    String refusal = region.refusal(write, remote, length);
    if (refusal != null) {
      slots.fail(slot, FiErrno.EACCES, -FiErrno.EACCES, refusal);
      return;
    }
    if (!region.scope.isAlive()) {
      counts.violation(
          "the memory of the region of remote key "
              + key
              + " was freed while it was still exposed (close the region first)");
      slots.fail(slot, FiErrno.EIO, -FiErrno.EIO, "the target memory was freed while exposed");
      return;
    }
    if (length > 0) {
      long remoteBytes = region.base + region.offset(remote);
      MemorySegment operand = slots.operand[slot];
      if (operand != null) {
        if (!copyWatched(slot, operand, remoteBytes)) {
          return;
        }
      } else if (write) {
        Memory.copy(slots.local[slot], remoteBytes, length);
      } else {
        Memory.copy(remoteBytes, slots.local[slot], length);
      }
    }
    counts.add(write ? Counts.BYTES_WRITTEN : Counts.BYTES_READ, length);
    slots.done[slot] = true;
  }

  /**
   * Moves a watched operand's bytes through its segment, so the JDK's liveness check, not a raw
   * address, stands between the fake and memory freed on delivery: a copy after the arena closed
   * throws here (and a close racing the copy cannot free the memory under it). Such a copy is
   * recorded and fails the op.
   *
   * @return whether the bytes moved
   */
  private boolean copyWatched(int slot, MemorySegment operand, long remoteBytes) {
    boolean write = slots.write[slot];
    long length = slots.lengthBytes[slot];
    long offset = slots.local[slot] - operand.address();
    try {
      if (write) {
        MemorySegment.copy(operand, offset, Memory.ALL, remoteBytes, length);
      } else {
        MemorySegment.copy(Memory.ALL, remoteBytes, operand, offset, length);
      }
      return true;
    } catch (IllegalStateException released) {
      fabric.operandViolation(
          counts,
          describe(slot)
              + (write ? " read its source" : " wrote its landing buffer")
              + " after the operand was released (its transfer's completion was delivered): "
              + released.getMessage());
      slots.fail(slot, FiErrno.EIO, -FiErrno.EIO, "the local operand was released");
      // Recorded once: reap, reset or close need not report the same op again.
      slots.operand[slot] = null;
      return false;
    }
  }

  /**
   * Records a posted op whose watched operand was already released while the provider still owned
   * the op: its completion reached the caller before the provider had let go of the memory.
   */
  private void checkStillOwned(int slot, String when) {
    MemorySegment operand = slots.operand[slot];
    if (operand != null && !operand.scope().isAlive()) {
      fabric.operandViolation(
          counts,
          describe(slot)
              + "'s operand was released (its transfer's completion was delivered) while the"
              + " provider still owned the op, found at "
              + when);
    }
  }

  private String describe(int slot) {
    return "op #"
        + slots.index[slot]
        + " ("
        + (slots.write[slot] ? "write" : "read")
        + " of "
        + slots.lengthBytes[slot]
        + " bytes in slot "
        + slot
        + ")";
  }

  /** Checks, as the op completes, that nobody but the provider wrote into its context. */
  private void checkContext(int slot) {
    if (!Objects.requireNonNull(contexts)
        .intact(slot, slots.write[slot], slots.peer[slot], slots.index[slot])) {
      counts.violation(
          "the context of slot "
              + slot
              + " (op #"
              + slots.index[slot]
              + ") was written while the provider owned it (FI_CONTEXT2)");
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
        violation("reap on a closed endpoint");
        return 0;
      }
      if (max < 1) {
        violation("reap(sink, " + max + "): max must be positive");
        return 0;
      }
      progressUnlocked();
      failure = script.cqFailures.poll();
      count = Math.min(max, completions.readyCount());
      if (failure != null) {
        count = Math.min(count, failure.afterEntries());
        counts.increment(Counts.CQ_READ_FAILURES);
      }
      if (reapSlots.length < count) {
        int size = Math.max(count, reapSlots.length * 2);
        reapSlots = new int[size];
        reapErrno = new int[size];
        reapProviderErrno = new int[size];
        reapText = new String[size];
      }
      boolean newestFirst = script.order == FakeScript.CompletionOrder.NEWEST_FIRST;
      for (int i = 0; i < count; i++) {
        int slot = completions.takeReady(newestFirst);
        checkStillOwned(slot, "reap");
        if (slots.scribbled[slot]) {
          checkContext(slot);
        }
        reapSlots[i] = slot;
        reapErrno[i] = slots.errno[slot];
        reapProviderErrno[i] = slots.providerErrno[slot];
        reapText[i] = slots.text[slot];
        counts.increment(slots.errno[slot] == 0 ? Counts.COMPLETIONS : Counts.ERROR_COMPLETIONS);
        slots.free(slot);
      }
    }
    // The sink is the caller's code: call it without the lock, so it may use other endpoints of
    // the fabric, or wait for threads that do, without deadlocking.
    for (int i = 0; i < count; i++) {
      if (reapErrno[i] == 0) {
        sink.completed(reapSlots[i]);
      } else {
        sink.failed(
            reapSlots[i],
            reasonOf(reapErrno[i]),
            reapErrno[i],
            reapProviderErrno[i],
            FiErrno.completionMessage(reapErrno[i], reapProviderErrno[i], reapText[i]));
        reapText[i] = null;
      }
    }
    if (failure != null) {
      throw new DmaException(
          DmaException.Kind.FABRIC,
          failure.message(),
          failure.errno(),
          DmaException.UNKNOWN_ERRNO,
          null);
    }
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
      if (!segment.isNative()) {
        throw DmaException.fabric(
            FiErrno.callMessage("fi_mr_reg", FiErrno.EINVAL)
                + ": a heap segment cannot be registered; allocate it from an Arena");
      }
      long key = fabric.nextKey();
      Region region = new Region(this, key, segment, script.virtualAddressing, access);
      fabric.addRegion(region);
      exposed.add(region);
      counts.increment(Counts.EXPOSES);
      counts.increment(Counts.LIVE_EXPOSES);
      return region;
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
        violation("progress on a closed endpoint");
        return;
      }
      counts.increment(Counts.PROGRESS_CALLS);
      progressUnlocked();
    }
  }

  /**
   * Sleeps until an initiator's operation waits for this endpoint's progress ({@link
   * FakeScript#targetProgressRequired}), or for at most {@code timeoutNanos}.
   */
  @Override
  public boolean awaitIncoming(long timeoutNanos) {
    synchronized (lock) {
      if (wakeRequested) {
        wakeRequested = false;
        return false;
      }
      if (closed || !awaiting.isEmpty()) {
        return !closed;
      }
      try {
        // wait(0, 0) would wait forever: never less than a nanosecond.
        long bounded = Math.max(1, timeoutNanos);
        lock.wait(bounded / 1_000_000, (int) (bounded % 1_000_000));
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
      wakeRequested = false;
      return !awaiting.isEmpty();
    }
  }

  /** Whether an initiator's operation waits for this endpoint's progress. */
  @Override
  public boolean incomingPending() {
    synchronized (lock) {
      return !awaiting.isEmpty();
    }
  }

  /** Ends a wait in {@link #awaitIncoming}, or the next one, from any thread. */
  @Override
  public void wakeup() {
    synchronized (lock) {
      wakeRequested = true;
      lock.notifyAll();
    }
  }

  private void progressUnlocked() {
    if (awaiting.isEmpty()) {
      return;
    }
    for (Awaiting op : awaiting) {
      op.initiator.targetProgressed(op.slot, op.index);
    }
    awaiting.clear();
  }

  /** Called on an initiator when the target of its op in {@code slot} progressed or closed. */
  private void targetProgressed(int slot, long index) {
    // The op may have been flushed, or its endpoint closed, since it started waiting.
    if (!closed
        && slots.state[slot] == OpSlots.POSTED
        && slots.index[slot] == index
        && slots.hold[slot] == OpSlots.AWAITING_TARGET) {
      slots.hold[slot] = OpSlots.NOT_HELD;
      complete(slot);
    }
  }

  /** Releases the held completions, in acceptance order or reversed. */
  int releaseHeld(boolean reversed) {
    int count = completions.heldCount();
    for (int i = 0; i < count; i++) {
      int slot = completions.held(reversed ? count - 1 - i : i);
      slots.hold[slot] = OpSlots.NOT_HELD;
      complete(slot);
    }
    completions.clearHeld();
    return count;
  }

  boolean holds(int slot) {
    return !closed
        && slot >= 0
        && slot < slots.count
        && slots.hold[slot] == OpSlots.HELD
        && slots.state[slot] == OpSlots.POSTED;
  }

  int releaseHeldSlot(int slot) {
    if (!holds(slot)) {
      return 0;
    }
    completions.removeHeld(slot);
    slots.hold[slot] = OpSlots.NOT_HELD;
    complete(slot);
    return 1;
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
      checkPostedStillOwned("close");
      registrations.closeAll();
      for (Region region : List.copyOf(exposed)) {
        region.closeUnlocked();
      }
      // Waiting initiators see this target closed, so their ops fail with FI_ECANCELED.
      progressUnlocked();
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

  private void checkPostedStillOwned(String when) {
    for (int slot = 0; slot < slots.count; slot++) {
      if (slots.state[slot] == OpSlots.POSTED) {
        checkStillOwned(slot, when);
      }
    }
  }

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
    fabric.removeRegion(region.key);
    exposed.remove(region);
    counts.add(Counts.LIVE_EXPOSES, -1);
  }

  /**
   * Records a violation found before any state changed, and throws if the script says so. Found
   * later (while bytes move or a completion is reaped), a violation is only counted: throwing there
   * would strand the op.
   */
  private int violation(String description) {
    counts.violation(description);
    if (script.throwOnViolation) {
      throw new IllegalStateException("fake fabric violation: " + description);
    }
    return VIOLATION;
  }

  private int postViolation(String description) {
    counts.increment(Counts.POST_ERRORS);
    return violation(description);
  }

  /** An op of another endpoint that waits for this target to progress. */
  private record Awaiting(FakeEndpoint initiator, int slot, long index) {}

  /**
   * Raw memory access. A holder class, so the restricted call runs (and warns without native
   * access) only when bytes first move, not when the provider is merely loaded.
   */
  private static final class Memory {
    @SuppressWarnings("restricted")
    private static final MemorySegment ALL = MemorySegment.NULL.reinterpret(Long.MAX_VALUE);

    static void copy(long from, long to, long lengthBytes) {
      MemorySegment.copy(ALL, from, ALL, to, lengthBytes);
    }
  }
}
