package dev.dma.fake;

import java.nio.ByteBuffer;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Objects;
import java.util.Set;
import java.util.function.BooleanSupplier;
import org.jspecify.annotations.Nullable;

/**
 * The deterministic fault script of one {@link FakeFabric}: what its endpoints do differently from
 * a perfect fabric. Every endpoint of the fabric follows it; changes take effect at the next call
 * that consults them (the exceptions are {@link #efaAddresses(boolean)}, fixed when an endpoint
 * opens, and {@link #virtualAddressing(boolean)}, fixed when a region is exposed).
 *
 * <p>Threads: any thread may change the script at any time, also while a fabric worker drives an
 * endpoint (for example to {@link #releaseCompletions()} from the test thread). Every method takes
 * the fabric's lock. Conditions and matchers run on the posting thread with that lock held: they
 * must be quick, must not block, and must not wait for another thread that uses the fabric.
 *
 * <p>Nothing here is random: the same posts and reaps against the same script give the same
 * results. Setters return this script, so a test writes {@code
 * fabric.script().requireLocalRegistration(true).maxTx(4).failOp(OpMatcher.nth(3), 5, -5, "boom")}.
 *
 * <p>Defaults (also after {@link #reset()}): a perfect fabric. No {@code -FI_EAGAIN}, {@code maxTx}
 * 0 (no fixed depth, nothing refused), completions delivered in order as soon as the op is posted,
 * no faults, no local registration required, offset addressing, 16-byte addresses, contexts
 * untouched, removal flushes nothing, targets accept initiators they have not inserted, targets
 * need no progress, registrations never fail.
 */
public final class FakeScript {

  /** The order in which {@code reap} takes completions off the queue. */
  public enum CompletionOrder {
    /** Oldest first, as every provider here delivers them. */
    IN_ORDER,
    /** Newest first: each {@code reap} takes the most recent completions. */
    NEWEST_FIRST
  }

  private final FakeFabric fabric;
  private final Object lock;

  // Every field below is guarded by `lock`; the endpoints and their collaborators read them
  // directly
  // while holding it. ScriptedDecisions consumes the insert, post, EAGAIN, rule and CQ settings;
  // Registrations the registration failures.
  int againTimes;
  @Nullable BooleanSupplier againWhile;
  int maxTxReported;
  int maxTxEnforced;
  final List<Rule> holdRules = new ArrayList<>();
  final List<Rule> loseRules = new ArrayList<>();
  final List<Rule> failRules = new ArrayList<>();
  CompletionOrder order = CompletionOrder.IN_ORDER;
  final ArrayDeque<CqFailure> cqFailures = new ArrayDeque<>();
  final Set<ByteBuffer> unreachable = new HashSet<>();
  boolean requireLocalRegistration;
  boolean virtualAddressing;
  boolean scribbleContexts;
  boolean flushOnRemove;
  boolean completesInPostOrder;
  boolean rejectUninsertedInitiator;
  boolean targetProgressRequired;
  boolean efaAddresses;
  int registrationFailures;
  int registrationErrno;
  long pinnableBytes = Long.MAX_VALUE;
  int insertFailures;
  int insertErrno;
  boolean throwOnViolation;
  boolean reuseAddressHandles;
  int postFailures;
  int postFailureErrno;
  final java.util.Map<ByteBuffer, Integer> postFailuresByPeer = new java.util.HashMap<>();

  FakeScript(FakeFabric fabric, Object lock) {
    this.fabric = fabric;
    this.lock = lock;
  }

  /**
   * Back to the defaults listed on this class. Completions already held stay held until released;
   * counters are not reset.
   *
   * @return this script
   */
  public FakeScript reset() {
    synchronized (lock) {
      againTimes = 0;
      againWhile = null;
      maxTxReported = 0;
      maxTxEnforced = 0;
      holdRules.clear();
      loseRules.clear();
      failRules.clear();
      order = CompletionOrder.IN_ORDER;
      cqFailures.clear();
      unreachable.clear();
      requireLocalRegistration = false;
      virtualAddressing = false;
      scribbleContexts = false;
      flushOnRemove = false;
      completesInPostOrder = false;
      rejectUninsertedInitiator = false;
      targetProgressRequired = false;
      efaAddresses = false;
      registrationFailures = 0;
      pinnableBytes = Long.MAX_VALUE;
      insertFailures = 0;
      throwOnViolation = false;
      reuseAddressHandles = false;
      postFailures = 0;
      postFailuresByPeer.clear();
      return this;
    }
  }

  /**
   * Behaves like EFA's efa-direct fabric: local registration required, virtual addressing, 32-byte
   * addresses whose identity is GID and QPN, contexts scribbled while posted, a peer's in-flight
   * ops flushed when it is removed, and targets that reject initiators they have not inserted. Call
   * it before opening the endpoints (addresses are fixed at open).
   *
   * @return this script
   */
  public FakeScript likeEfaDirect() {
    synchronized (lock) {
      requireLocalRegistration = true;
      virtualAddressing = true;
      efaAddresses = true;
      scribbleContexts = true;
      flushOnRemove = true;
      rejectUninsertedInitiator = true;
      return this;
    }
  }

  // ---------------------------------------------------------------------------------- -FI_EAGAIN

  /**
   * The next {@code count} posts that pass validation answer {@code -FI_EAGAIN} (whatever their
   * endpoint), then posts are accepted again. Replaces an earlier count. Posts refused for another
   * reason (an unreachable peer, a full transmit queue, {@link #againWhile}) do not use it up.
   *
   * @param count how many, at least 0
   * @return this script
   */
  public FakeScript againTimes(int count) {
    if (count < 0) {
      throw new IllegalArgumentException("count is negative: " + count);
    }
    synchronized (lock) {
      againTimes = count;
      return this;
    }
  }

  /**
   * Every post answers {@code -FI_EAGAIN} while {@code condition} is true; it is asked once per
   * post that passes validation, on the posting thread under the fabric's lock. For example an
   * {@code AtomicBoolean::get} the test flips, or a condition over a stepped test clock.
   *
   * @param condition the condition, or {@code null} to stop
   * @return this script
   */
  public FakeScript againWhile(@Nullable BooleanSupplier condition) {
    synchronized (lock) {
      againWhile = condition;
      return this;
    }
  }

  /**
   * Sets the transmit depth: {@code maxTx()} reports it and a post that would exceed it (with
   * {@code depth} operations unreaped on its endpoint) answers {@code -FI_EAGAIN}. 0 reports "no
   * fixed depth" and refuses nothing. Read by the worker when it opens, so set it first.
   *
   * @param depth the depth, at least 0
   * @return this script
   */
  public FakeScript maxTx(int depth) {
    return maxTx(depth, depth);
  }

  /**
   * Sets what {@code maxTx()} reports and the depth actually enforced separately: a provider may
   * report 0 and still refuse at some depth, or report more than it takes.
   *
   * @param reported what {@code maxTx()} returns, at least 0
   * @param enforced unreaped operations per endpoint beyond which posts answer {@code -FI_EAGAIN},
   *     or 0 for no limit
   * @return this script
   */
  public FakeScript maxTx(int reported, int enforced) {
    if (reported < 0 || enforced < 0) {
      throw new IllegalArgumentException("maxTx is negative: " + reported + ", " + enforced);
    }
    synchronized (lock) {
      maxTxReported = reported;
      maxTxEnforced = enforced;
      return this;
    }
  }

  /**
   * Posts against the peer with this address answer {@code -FI_EAGAIN} for as long as it stays
   * unreachable, like tcp;ofi_rxm to a dead process: no error, no completion. Posts to an endpoint
   * that was closed, or to an address no endpoint of this fabric has, behave the same without being
   * scripted.
   *
   * @param address the peer's address (copied)
   * @return this script
   */
  public FakeScript unreachable(byte[] address) {
    synchronized (lock) {
      unreachable.add(ByteBuffer.wrap(address.clone()));
      return this;
    }
  }

  /**
   * Undoes {@link #unreachable(byte[])}.
   *
   * @param address the peer's address
   * @return this script
   */
  public FakeScript reachable(byte[] address) {
    synchronized (lock) {
      unreachable.remove(ByteBuffer.wrap(address.clone()));
      return this;
    }
  }

  /**
   * The next {@code count} posts that pass validation return {@code -errno} instead of being
   * accepted: a post the provider refuses outright, which the worker reports as {@code post: ...}.
   * Not a violation; counted in {@link FakeCounters#postErrors()}. Replaces an earlier count.
   *
   * @param count how many, at least 0
   * @param errno the errno, positive (for example {@link FiErrno#ENOENT})
   * @return this script
   */
  public FakeScript failNextPosts(int count, int errno) {
    if (count < 0 || errno <= 0) {
      throw new IllegalArgumentException("bad count or errno: " + count + ", " + errno);
    }
    synchronized (lock) {
      postFailures = count;
      postFailureErrno = errno;
      return this;
    }
  }

  /**
   * Every post against the peer with this address returns {@code -errno}, as the sockets provider
   * answers {@code -FI_ENOENT} for a peer that closed. Checked before the {@code -FI_EAGAIN} rules.
   *
   * @param address the peer's address (copied)
   * @param errno the errno, positive, or 0 to stop failing posts to it
   * @return this script
   */
  public FakeScript failPostsTo(byte[] address, int errno) {
    if (errno < 0) {
      throw new IllegalArgumentException("errno is negative: " + errno);
    }
    synchronized (lock) {
      if (errno == 0) {
        postFailuresByPeer.remove(ByteBuffer.wrap(address.clone()));
      } else {
        postFailuresByPeer.put(ByteBuffer.wrap(address.clone()), errno);
      }
      return this;
    }
  }

  // --------------------------------------------------------------------------------- completions

  /**
   * Holds the completion of every operation accepted from now on: the op is posted (and counts
   * against {@code maxTx}) but nothing moves and {@code reap} does not see it until it is released
   * with {@link #releaseCompletions()} or its variants. Holding models an op still on the wire; its
   * bytes move when it is released.
   *
   * @return this script
   */
  public FakeScript holdCompletions() {
    return holdCompletions(OpMatcher.any());
  }

  /**
   * Holds the completions of accepted operations that {@code matcher} matches, as {@link
   * #holdCompletions()}.
   *
   * @param matcher which ops to hold
   * @return this script
   */
  public FakeScript holdCompletions(OpMatcher matcher) {
    Objects.requireNonNull(matcher, "matcher");
    synchronized (lock) {
      holdRules.add(new Rule(matcher, Long.MAX_VALUE, 0, 0, null));
      return this;
    }
  }

  /**
   * Loses the completions of accepted operations that {@code matcher} matches, as shm and
   * udp;ofi_rxd do for a write with a wrong key: the op is posted and counts against {@code maxTx},
   * but it never moves its bytes and never completes, and no release reaches it. Only a flush on
   * removal ({@link #flushOnRemove}), a {@code reset} or closing the endpoint ends it.
   *
   * @param matcher which ops to lose
   * @return this script
   */
  public FakeScript loseCompletions(OpMatcher matcher) {
    Objects.requireNonNull(matcher, "matcher");
    synchronized (lock) {
      loseRules.add(new Rule(matcher, Long.MAX_VALUE, 0, 0, null));
      return this;
    }
  }

  /**
   * Stops holding newly accepted operations; those already held stay held until released.
   *
   * @return this script
   */
  public FakeScript stopHolding() {
    synchronized (lock) {
      holdRules.clear();
      return this;
    }
  }

  /**
   * Releases every held completion, on every endpoint of the fabric, in the order the ops were
   * accepted: their bytes move now and {@code reap} delivers them after anything already queued.
   *
   * @return how many were released
   */
  public int releaseCompletions() {
    synchronized (lock) {
      int released = 0;
      for (FakeEndpoint endpoint : fabric.openEndpoints()) {
        released += endpoint.parked().releaseHeld(false);
      }
      return released;
    }
  }

  /**
   * Releases every held completion newest first, so {@code reap} sees them in the reverse of the
   * order they were posted.
   *
   * @return how many were released
   */
  public int releaseCompletionsReversed() {
    synchronized (lock) {
      int released = 0;
      for (FakeEndpoint endpoint : fabric.openEndpoints()) {
        released += endpoint.parked().releaseHeld(true);
      }
      return released;
    }
  }

  /**
   * Releases the held completions of these op slots in exactly this order (on every endpoint that
   * holds them), leaving the others held: the way to deliver completions in any chosen order.
   *
   * @param slots op slots whose completions are held
   * @return how many were released
   * @throws IllegalArgumentException if no endpoint holds one of the slots; nothing is released
   */
  public int releaseCompletions(int... slots) {
    synchronized (lock) {
      List<FakeEndpoint> endpoints = fabric.openEndpoints();
      for (int slot : slots) {
        boolean found = false;
        for (FakeEndpoint endpoint : endpoints) {
          found |= endpoint.parked().holds(slot);
        }
        if (!found) {
          throw new IllegalArgumentException("no completion is held for slot " + slot);
        }
      }
      int released = 0;
      for (int slot : slots) {
        for (FakeEndpoint endpoint : endpoints) {
          released += endpoint.parked().releaseHeldSlot(slot);
        }
      }
      return released;
    }
  }

  /**
   * How many completions are held now, on every endpoint of the fabric.
   *
   * @return the count
   */
  public int heldCompletions() {
    synchronized (lock) {
      int held = 0;
      for (FakeEndpoint endpoint : fabric.openEndpoints()) {
        held += endpoint.heldCompletions();
      }
      return held;
    }
  }

  /**
   * Sets the order {@code reap} takes completions in.
   *
   * @param value the order
   * @return this script
   */
  public FakeScript completionOrder(CompletionOrder value) {
    synchronized (lock) {
      order = Objects.requireNonNull(value, "value");
      return this;
    }
  }

  // ---------------------------------------------------------------------------------- op faults

  /**
   * Every accepted operation that {@code matcher} matches completes with an error entry instead of
   * moving bytes: {@code reap} reports {@code failed(slot, errno, providerErrno, message)} with
   * {@code message} exactly {@link FiErrno#completionMessage(int, int, String)}. The post itself
   * returns {@code POSTED}. Stays until {@link #clearFaults()}.
   *
   * @param matcher which ops fail
   * @param errno libfabric's error number, positive (for example {@link FiErrno#EIO})
   * @param providerErrno the provider's error number
   * @param providerText what {@code fi_cq_strerror} says
   * @return this script
   */
  public FakeScript failOp(OpMatcher matcher, int errno, int providerErrno, String providerText) {
    return failOps(matcher, Long.MAX_VALUE, errno, providerErrno, providerText);
  }

  /**
   * As {@link #failOp}, for the first {@code times} matching operations only.
   *
   * @param matcher which ops fail
   * @param times how many of them, at least 1
   * @param errno libfabric's error number, positive
   * @param providerErrno the provider's error number
   * @param providerText what {@code fi_cq_strerror} says
   * @return this script
   */
  public FakeScript failOps(
      OpMatcher matcher, long times, int errno, int providerErrno, String providerText) {
    Objects.requireNonNull(matcher, "matcher");
    Objects.requireNonNull(providerText, "providerText");
    if (times < 1) {
      throw new IllegalArgumentException("times must be at least 1, not " + times);
    }
    if (errno <= 0) {
      throw new IllegalArgumentException("errno must be positive, not " + errno);
    }
    synchronized (lock) {
      failRules.add(new Rule(matcher, times, errno, providerErrno, providerText));
      return this;
    }
  }

  /**
   * The next {@code count} accepted operations (on any endpoint) complete with this error entry.
   *
   * @param count how many, at least 1
   * @param errno libfabric's error number, positive
   * @param providerErrno the provider's error number
   * @param providerText what {@code fi_cq_strerror} says
   * @return this script
   */
  public FakeScript failNextOps(int count, int errno, int providerErrno, String providerText) {
    return failOps(OpMatcher.any(), count, errno, providerErrno, providerText);
  }

  /**
   * Removes every {@link #failOp} rule.
   *
   * @return this script
   */
  public FakeScript clearFaults() {
    synchronized (lock) {
      failRules.clear();
      return this;
    }
  }

  /**
   * Makes the next {@code reap} (on any endpoint of the fabric) fail as a whole, after delivering
   * at most {@code afterEntries} completions: it throws {@code DmaException} of kind FABRIC with
   * the message {@code fi_cq_read: {text} (-errno)}, for example {@code fi_cq_read: Input/output
   * error (-5)}, and the failure's errno. Completions it did not deliver stay queued. Calls queue
   * up: each failure is used by one {@code reap}.
   *
   * @param afterEntries completions to deliver before failing, at least 0
   * @param errno the failure's errno, positive
   * @return this script
   */
  public FakeScript failNextCqRead(int afterEntries, int errno) {
    if (errno <= 0) {
      throw new IllegalArgumentException("errno must be positive, not " + errno);
    }
    return cqFailure(afterEntries, FiErrno.callMessage("fi_cq_read", errno), errno);
  }

  /**
   * As {@link #failNextCqRead(int, int)} with an exact message, for queue-level failures that are
   * not a {@code fi_cq_read} code, such as {@code completion carried a null op_context} or {@code
   * fi_cq_readerr: ...}.
   *
   * @param afterEntries completions to deliver before failing, at least 0
   * @param message the exception's message
   * @return this script
   */
  public FakeScript failNextCqRead(int afterEntries, String message) {
    return cqFailure(afterEntries, Objects.requireNonNull(message, "message"), 0);
  }

  private FakeScript cqFailure(int afterEntries, String message, int errno) {
    if (afterEntries < 0) {
      throw new IllegalArgumentException("afterEntries is negative: " + afterEntries);
    }
    synchronized (lock) {
      cqFailures.add(new CqFailure(afterEntries, message, errno));
      return this;
    }
  }

  // ------------------------------------------------------------------------ EFA-like behaviours

  /**
   * Requires local registration, like EFA ({@code FI_MR_LOCAL}): {@code
   * requiresLocalRegistration()} returns it, and every post must carry the descriptor of a live
   * registration of its own endpoint that covers {@code [localAddress, localAddress +
   * lengthBytes)}. A missing, foreign, stale (deregistered) or non-covering descriptor is a
   * violation: the post returns {@code -FI_EINVAL} and {@link FakeCounters#violations()} counts it.
   * Deregistering a registration while an accepted op that uses it is unreaped is a violation too.
   *
   * @param value whether local registration is required
   * @return this script
   */
  public FakeScript requireLocalRegistration(boolean value) {
    synchronized (lock) {
      requireLocalRegistration = value;
      return this;
    }
  }

  /**
   * Uses virtual addressing ({@code FI_MR_VIRT_ADDR}, as EFA): regions exposed from now on
   * advertise their virtual address, and posts against them name virtual addresses. Otherwise (tcp)
   * they advertise 0 and posts name offsets. Fixed per region when it is exposed.
   *
   * @param value whether to use virtual addresses
   * @return this script
   */
  public FakeScript virtualAddressing(boolean value) {
    synchronized (lock) {
      virtualAddressing = value;
      return this;
    }
  }

  /**
   * Imitates {@code FI_CONTEXT2} ownership: while an op is posted the provider owns its 64-byte
   * context and writes into it (EFA puts completion flags and the peer address in the first 16
   * bytes; the fake also fills the rest), and it reads the first 16 back when the op completes. A
   * context changed by anyone else meanwhile ({@link FakeEndpoint#opContext(int)}) is a violation.
   * After reaping, the context holds the provider's garbage.
   *
   * @param value whether to scribble
   * @return this script
   */
  public FakeScript scribbleContexts(boolean value) {
    synchronized (lock) {
      scribbleContexts = value;
      return this;
    }
  }

  /**
   * Like EFA, removing a peer from an endpoint's address vector fails that endpoint's unreaped
   * operations against it: each completes with {@code FI_ECANCELED} (125), provider errno 1,
   * "Flushed during queue pair destroy", held ones included (they are released). The fake treats
   * every unreaped op as in flight, so a worker that removes a peer too early always sees it. A
   * removal with ops outstanding is counted ({@link FakeCounters#removesWithOpsOutstanding()})
   * whether or not this is on.
   *
   * @param value whether removal flushes
   * @return this script
   */
  public FakeScript flushOnRemove(boolean value) {
    synchronized (lock) {
      flushOnRemove = value;
      return this;
    }
  }

  /**
   * Makes the endpoints declare {@link
   * dev.dma.spi.FabricEndpoint.Capability#COMPLETES_IN_POST_ORDER}, as shm up to libfabric 2.4
   * does. The fake itself still completes ops in any order: a test models the stall by holding the
   * later ops' completions ({@link #holdCompletions(OpMatcher)}).
   *
   * @param value what the endpoints answer
   * @return this script
   */
  public FakeScript completesInPostOrder(boolean value) {
    synchronized (lock) {
      completesInPostOrder = value;
      return this;
    }
  }

  /**
   * Like EFA, a target that has not inserted the initiator's address into its own address vector
   * rejects the initiator's ops: they complete with {@code FI_ENOTCONN} (107), provider errno 14
   * (REMOTE_ERROR_UNKNOWN_PEER). Checked when the op's bytes would move.
   *
   * @param value whether to reject
   * @return this script
   */
  public FakeScript rejectUninsertedInitiator(boolean value) {
    synchronized (lock) {
      rejectUninsertedInitiator = value;
      return this;
    }
  }

  /**
   * Like tcp;ofi_rxm with delivery-complete: an op's bytes move, and its completion becomes
   * reapable, only when the target endpoint calls {@code progress()} (or {@code reap}). A test
   * whose passive target never progresses then never sees its writes complete, as on real tcp. Ops
   * already waiting keep waiting if this is turned off.
   *
   * @param value whether targets must progress
   * @return this script
   */
  public FakeScript targetProgressRequired(boolean value) {
    synchronized (lock) {
      targetProgressRequired = value;
      return this;
    }
  }

  /**
   * Gives endpoints opened from now on EFA-shaped 32-byte addresses: a 16-byte GID (the same for
   * every endpoint of the fabric), a 2-byte QPN and a 4-byte QKEY, with identity ({@code
   * peerIdentity}) the first 18 bytes. QPNs are reused like the device does: a new endpoint takes
   * the lowest QPN no open endpoint holds, with a new QKEY, so a closed endpoint's successor has
   * the same identity but different bytes. {@code describe()} then reports {@code FI_ADDR_EFA}.
   *
   * @param value whether to use EFA-shaped addresses
   * @return this script
   */
  public FakeScript efaAddresses(boolean value) {
    synchronized (lock) {
      efaAddresses = value;
      return this;
    }
  }

  // ------------------------------------------------------------------ registrations and inserts

  /**
   * Reuses removed peer handles, as tcp;ofi_rxm and shm do: an insert takes the lowest handle that
   * was removed. A stale handle that was reused then silently names the new peer, as on those
   * providers; by default handles are never reused, so any post against a removed handle is caught
   * as a violation.
   *
   * @param value whether to reuse handles
   * @return this script
   */
  public FakeScript reuseAddressHandles(boolean value) {
    synchronized (lock) {
      reuseAddressHandles = value;
      return this;
    }
  }

  /**
   * The next {@code count} calls to {@code register} (on any endpoint) throw {@code DmaException}
   * {@code fi_mr_reg: {text} (-errno)}, for example {@code fi_mr_reg: Cannot allocate memory (-12)}
   * for {@link FiErrno#ENOMEM}, carrying the errno. Replaces an earlier count.
   *
   * @param count how many, at least 0
   * @param errno the errno, positive
   * @return this script
   */
  public FakeScript failNextRegistrations(int count, int errno) {
    if (count < 0 || errno <= 0) {
      throw new IllegalArgumentException("bad count or errno: " + count + ", " + errno);
    }
    synchronized (lock) {
      registrationFailures = count;
      registrationErrno = errno;
      return this;
    }
  }

  /**
   * Limits the bytes registered at once on the fabric, like the device's cap on pinned pages: a
   * {@code register} that would exceed it throws {@code fi_mr_reg: Cannot allocate memory (-12)},
   * and succeeds again once enough was deregistered. Exposed regions do not count.
   *
   * @param limit the most bytes registered at once, or {@link Long#MAX_VALUE} for no limit
   * @return this script
   */
  public FakeScript pinnableBytes(long limit) {
    if (limit < 0) {
      throw new IllegalArgumentException("limit is negative: " + limit);
    }
    synchronized (lock) {
      pinnableBytes = limit;
      return this;
    }
  }

  /**
   * The next {@code count} calls to {@code insertPeer} throw {@code DmaException} {@code
   * fi_av_insert: {text} (-errno)}.
   *
   * @param count how many, at least 0
   * @param errno the errno, positive
   * @return this script
   */
  public FakeScript failNextInserts(int count, int errno) {
    if (count < 0 || errno <= 0) {
      throw new IllegalArgumentException("bad count or errno: " + count + ", " + errno);
    }
    synchronized (lock) {
      insertFailures = count;
      insertErrno = errno;
      return this;
    }
  }

  /**
   * Also throws {@code IllegalStateException("fake fabric violation: ...")} from the call that
   * violated the contract, after counting it, so the stack trace points at the culprit. The call
   * changes nothing, except that a {@code deregister} while the registration is in use still closes
   * it. Violations found later, while an op's bytes move or its completion is reaped (memory freed
   * while exposed, a context written while posted), are only counted.
   *
   * @param value whether to throw
   * @return this script
   */
  public FakeScript throwOnViolation(boolean value) {
    synchronized (lock) {
      throwOnViolation = value;
      return this;
    }
  }

  // ---------------------------------------- read by ScriptedDecisions and the endpoint it serves

  /** A fault or hold rule; {@code remaining} is Long.MAX_VALUE for "every match". */
  static final class Rule {
    final OpMatcher matcher;
    long remaining;
    final int errno;
    final int providerErrno;
    final @Nullable String providerText;

    Rule(
        OpMatcher matcher,
        long remaining,
        int errno,
        int providerErrno,
        @Nullable String providerText) {
      this.matcher = matcher;
      this.remaining = remaining;
      this.errno = errno;
      this.providerErrno = providerErrno;
      this.providerText = providerText;
    }
  }

  /** A scripted queue-level failure of one reap. */
  record CqFailure(int afterEntries, String message, int errno) {}
}
