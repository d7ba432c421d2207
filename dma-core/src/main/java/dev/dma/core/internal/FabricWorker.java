package dev.dma.core.internal;

import dev.dma.api.BatchCompleter;
import dev.dma.api.Checksum;
import dev.dma.api.Completion;
import dev.dma.api.Direction;
import dev.dma.api.DmaException;
import dev.dma.api.Operands;
import dev.dma.api.Outcome;
import dev.dma.api.TransferDone;
import dev.dma.api.TransferRequest;
import dev.dma.core.ChecksumPool;
import dev.dma.core.NanoClock;
import dev.dma.core.internal.peers.PeerTable;
import dev.dma.core.internal.regions.LocalRegions;
import dev.dma.core.internal.regions.Registration;
import dev.dma.spi.CompletionSink;
import dev.dma.spi.FabricEndpoint;
import io.opentelemetry.context.Context;
import java.lang.System.Logger.Level;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Consumer;
import java.util.function.Function;
import org.jspecify.annotations.Nullable;

/**
 * The fabric worker: one thread that owns one {@link FabricEndpoint} and drives every transfer on
 * it, a port of the original crate's {@code fabric_worker.rs}, behaviour for behaviour.
 *
 * <p>A duty cycle ({@link #doWork}), each step named and returning its work count: take in what the
 * channel holds; post pending operations up to the in-flight cap, requeueing {@code -FI_EAGAIN}
 * until the progress deadline; reap at most {@value #TARGET_COMPLETIONS} completions; scan the
 * posted ops when the completion deadline's scan is due; hand checksummed completions to the pool
 * in batches; deliver plain completions in batches. {@link #run} is that cycle in a loop with the
 * idle strategy ({@link Idle}, {@link Backoff}); a test steps it on its own thread instead.
 *
 * <p>Threads: everything here runs on the thread that runs or steps the worker, except the
 * constructor. The caller's {@link BatchCompleter} runs there for plain completions and on pool
 * threads for checksummed ones.
 *
 * <p>This file reads in the order a transfer travels: intake, accept, post, mark posted, the reap
 * callbacks, finish, deliver. Recovery lives in classes of its own, reached only from branches that
 * are cold already: {@link RefusedPosts}, {@link CompletionErrors}, {@link DeadlineScan}, {@link
 * Resets}, {@link DeadPeers} and {@link PeerProbe}; every failure the worker builds is {@link
 * Failures}', the way out {@link WorkerShutdown}'s. Spans and metrics are {@code WorkerTelemetry}'s
 * (called behind one boolean check), checksummed completions on their way to the pool {@code
 * ChecksumBatch}'s.
 *
 * <p>Allocation per transfer: see {@link Op}.
 *
 * @param <T> the caller context type
 */
public final class FabricWorker<T extends Operands> implements CompletionSink {
  /**
   * Completions to reap in one pass, and the batch size that triggers a delivery at the end of a
   * pass. It is a trigger, not a cap: a batch holds up to one less carried over from earlier passes
   * plus what this pass finished (at most this many reaped, plus the transfers it failed without a
   * completion: refused at intake or post, or past a deadline).
   */
  public static final int TARGET_COMPLETIONS = 10;

  /**
   * Messages one pass takes in at most, so a pass always reaches post, reap and delivery: transfers
   * refused at intake (a dead peer) give their room back at once and could keep it busy for ever.
   */
  static final int INTAKE_LIMIT = 4096;

  /** Spins a partial plain batch may wait for company before it is delivered anyway. */
  static final int MAX_DRAIN_SPINS = 10;

  /** The text of every transfer that never reached the wire because the worker went away. */
  public static final String WORKER_GONE = Failures.WORKER_GONE;

  /** Passes between two reads of the clock; a power of two. */
  static final int CLOCK_PASSES = 64;

  /** What {@link #post} returns (no provider's code) for an operand held under the pin bound. */
  private static final int HELD = Integer.MIN_VALUE;

  private static final System.Logger LOG = System.getLogger(FabricWorker.class.getName());

  final FabricEndpoint endpoint;
  // The endpoint's rendering of a peer address: one function, so no lambda per failure.
  private final Function<byte[], String> peerText;
  final LocalRegions regions;
  final PeerTable peers;
  final WorkerChannel channel;
  private final BatchCompleter<T> completer;
  private final AtomicLong outstanding;
  private final NanoClock ticker;
  final CompletionDeadline completionDeadline;
  // Recovery (see the class comment). The dead marks' map is checked for emptiness at intake; the
  // rest of DeadPeers is reached only once it holds a mark.
  private final LongObjectMap<DeadPeers.DeadMark> deadMarks = new LongObjectMap<>();
  final Failures failures;
  final DeadPeers<T> dead;
  final PeerProbe probe;
  // PeerProbe's interval, held here too: every new client record reads it.
  private final long probeAfterNs;
  final DeadlineScan<T> deadlines;
  private final RefusedPosts<T> refused;
  private final CompletionErrors<T> errors;
  private final Resets<T> resets;
  // Numbers posts in order: on an in-post-order endpoint the smallest in flight is the op every
  // later completion waits behind.
  private long postSequence;
  // When inFlight last fell to 0: with nothing in flight, nothing the provider holds for us can
  // be what a refused post waits for.
  long idleSinceNs;
  // An op of a client that left was judged stuck (DeadlineScan): a quiet reset finishes it.
  boolean quietResetWanted;
  private final Backoff backoff;
  final RateLimitedLog warnings = new RateLimitedLog(LOG);
  final WorkerTelemetry telemetry;

  final int cap;
  final Op<T>[] slots;
  final int[] freeSlots;
  int freeSlotCount;
  int inFlight;

  final ArrayDeque<Op<T>> pending = new ArrayDeque<>();
  // Ops a post pass could not post (refused, held, or behind a refusal of their client), put back
  // at the head of the queue when the pass ends, in their order: a refused op keeps its place
  // ahead of those queued after it, so ops sharing a peer are posted first come, first served.
  final ArrayDeque<Op<T>> deferred = new ArrayDeque<>();
  private final ArrayDeque<Op<T>> spareOps = new ArrayDeque<>();
  // Outstanding (queued or in-flight) ops per client, and whether its peer is to be released once
  // that count hits 0. Counting from intake rather than posting stops a removal slipping between a
  // queued transfer and its post, where the post would re-insert the peer just removed. Deferring
  // the release to 0 also keeps it from flushing a live queue pair (EFA does flush).
  final ClientMap<Client> clients;
  private final ArrayDeque<Client> spareClients = new ArrayDeque<>();

  final List<Completion<T>> completions = new ArrayList<>();
  // Reaped ops wanting a checksum, hashed on the pool so that hashing never stalls the worker.
  final ChecksumBatch<T> checksums;
  private int drainSpins;
  private TransferDone lastDone;
  // A group's health and failover (FailureHook), or null for a plain service; asked on failures
  // only. Set once before the worker runs.
  private @Nullable FailureHook<T> failureHook;
  // Transfers completed successfully, read by the failure hook on this thread.
  private long succeeded;

  // What the last pass did, for the idle strategy and the exit.
  private int postedInPass;
  private int reapedInPass;
  private boolean batchHeld;
  private boolean finished;
  boolean closeTimedOut;
  // The pending-queue length as of the last pass, for the gauge.
  private int pendingCount;

  /** The coarse clock: the ticker's last reading (see {@link #doWork}). */
  long now;

  private int passes;
  private int clockEpoch; // each reading of the clock starts one; a post records it (ClockReadings)
  private final ClockReadings clockReadings = new ClockReadings();

  // The clients of the transfers intake accepted since the last post pass, and whether each request
  // carries its peer: the pass has the peer table load where it will find them all at once before
  // posting any (PeerTable#warm). With many clients each is a cache miss, and taken one post at a
  // time they were a third of a transfer's time at 100,000 clients; loaded together they overlap.
  // Past the arrays' ends the rest are read cold.
  private final long[] warmIds = new long[256];
  private final boolean[] warmCarriesPeer = new boolean[256];
  private int warmCount;

  /**
   * A worker over an open endpoint.
   *
   * @param endpoint the endpoint, now owned by this worker (closed when it exits)
   * @param regions the endpoint's registration cache
   * @param peers the endpoint's peer table
   * @param channel the channel this worker consumes
   * @param completer the caller's hook
   * @param pool the checksum pool
   * @param outstanding the service's outstanding counter, raised by submit
   * @param ticker the clock for the progress deadline
   * @param configuredCap the configured in-flight cap
   * @param progressDeadline how long one op may keep getting {@code -FI_EAGAIN}
   * @param completionDeadline how long one posted op may wait for its completion, or zero for no
   *     bound
   * @param addressChanged told, on the worker thread, the endpoint's new address after a reset
   *     changed it
   * @param telemetry spans and metrics, or {@link Telemetry#OFF}
   */
  @SuppressWarnings("unchecked")
  public FabricWorker(
      FabricEndpoint endpoint,
      LocalRegions regions,
      PeerTable peers,
      WorkerChannel channel,
      BatchCompleter<T> completer,
      ChecksumPool pool,
      AtomicLong outstanding,
      NanoClock ticker,
      int configuredCap,
      Duration progressDeadline,
      Duration completionDeadline,
      Consumer<byte[]> addressChanged,
      Telemetry telemetry) {
    this.endpoint = endpoint;
    this.peerText = endpoint::peerText;
    this.failures = new Failures(peerText);
    this.telemetry = new WorkerTelemetry(telemetry);
    this.regions = regions;
    this.peers = peers;
    this.channel = channel;
    this.completer = completer;
    this.checksums = new ChecksumBatch<>(pool, completer, this.telemetry);
    this.outstanding = outstanding;
    this.ticker = ticker;
    long progressDeadlineNs = progressDeadline.toNanos();
    this.completionDeadline = new CompletionDeadline(completionDeadline);
    this.dead = new DeadPeers<>(this, deadMarks);
    this.probe = new PeerProbe(endpoint, warnings, progressDeadlineNs);
    this.probeAfterNs = probe.probeAfterNs();
    // The provider's declared behaviour, read once here.
    Set<FabricEndpoint.Capability> declared = endpoint.capabilities();
    boolean inPostOrder = declared.contains(FabricEndpoint.Capability.COMPLETES_IN_POST_ORDER);
    this.deadlines = new DeadlineScan<>(this, inPostOrder, declared);
    this.refused = new RefusedPosts<>(this, progressDeadline, completionDeadline);
    this.errors = new CompletionErrors<>(this);
    this.resets = new Resets<>(this, addressChanged, progressDeadlineNs, inPostOrder);
    this.backoff = new Backoff(channel);
    readClock();
    idleSinceNs = now;
    // A stale incarnation leaves the address vector only when its holders' ops are done, as every
    // other removal does.
    this.cap = WorkerAccounting.inFlightCap(configuredCap, endpoint.maxTx());
    this.clients = new ClientMap<>(ClientMap.slotsFor(cap));
    peers.deferRemovalWhile(clientId -> clients.get(clientId) != null);
    this.slots = (Op<T>[]) new Op<?>[cap];
    this.freeSlots = new int[cap];
    for (int slot = 0; slot < cap; slot++) {
      freeSlots[slot] = cap - 1 - slot;
    }
    this.freeSlotCount = cap;
    endpoint.openSlots(cap);
    this.telemetry.registerGauges(() -> inFlight, () -> pendingCount, peers, regions);
  }

  /**
   * Sets the hook told of every failed transfer before its completion is built (a group's rail
   * health); call before {@link #run}, on the thread that will run it.
   *
   * @param hook the hook
   */
  public void failureHook(FailureHook<T> hook) {
    this.failureHook = hook;
  }

  /**
   * The effective in-flight cap.
   *
   * @return the cap
   */
  public int cap() {
    return cap;
  }

  /**
   * Runs until the channel is closed and drained and nothing is in flight, then fails anything left
   * and closes the endpoint. Returns normally; an unexpected throwable (a bug) still fails every
   * transfer the worker holds, closes the endpoint, and is rethrown.
   */
  public void run() {
    Throwable failure = null;
    try {
      for (doWork(); !finished; doWork()) {
        idle();
      }
    } catch (Throwable unexpected) {
      failure = unexpected;
      LOG.log(Level.ERROR, "the fabric worker failed; failing every transfer it held", unexpected);
    } finally {
      shutDown(failure);
    }
    if (failure instanceof Error error) {
      throw error;
    }
  }

  /**
   * One pass of the duty cycle, on the thread that owns the worker: {@link #run}'s, or a test's
   * that steps the worker itself. Never blocks (the completer it calls must not either).
   *
   * @return the work done: messages taken in, ops posted and reaped, a scan, checksummed
   *     completions flushed and plain ones delivered; 0 when nothing moved
   */
  public int doWork() {
    int work = intake();
    boolean drained = channel.isDrained();
    // A coarse clock: read every CLOCK_PASSES passes and after every park, not per pass (a
    // clock read per pass cost a fifth of a window-1 transfer on the fake). Posts stamp it and
    // the deadlines compare against it, so it lags real time by at most CLOCK_PASSES busy
    // passes (microseconds), never by a park.
    if ((++passes & (CLOCK_PASSES - 1)) == 0) {
      readClock();
    }
    int posted = quietResetWanted || endpoint.wantsQuietReset() ? resets.quietPass() : postPass();
    int reaped = reap();
    work += posted + reaped + scanIfDue();
    pendingCount = pending.size();
    if (telemetry.tracePasses && (posted > 0 || reaped > 0)) {
      // Emitted only when something moved; a debug aid the user opts into.
      telemetry.pass(inFlight, posted, reaped, pendingCount);
    }
    boolean idle = pending.isEmpty() && inFlight == 0;
    work += checksums.flushIfDue(posted, reaped > 0, idle) + deliverBatch();
    postedInPass = posted;
    reapedInPass = reaped;
    if (!batchHeld && drained) {
      // Done once nothing is in flight; or, when close(timeout) promised to return and its time
      // is up, now: shutDown closes the endpoint (after which no provider touches an operand) and
      // fails what is still posted.
      closeTimedOut = !idle && channel.closeDeadlinePassed();
      finished = idle || closeTimedOut;
    }
    return work;
  }

  /**
   * Whether the worker is done: its channel closed and drained, and nothing in flight (or the close
   * timeout passed). {@link #run} then shuts down; a stepping test calls {@link #shutDown}.
   *
   * @return whether the last pass finished the worker
   */
  public boolean isFinished() {
    return finished;
  }

  /**
   * Takes in what the channel holds, without blocking, at most {@value #INTAKE_LIMIT} messages;
   * returns how many.
   */
  @SuppressWarnings("unchecked")
  private int intake() {
    int taken = 0;
    Object message;
    while (taken < INTAKE_LIMIT && (message = channel.poll()) != null) {
      switch (message) {
        case TransferRequest<?> request -> accept((TransferRequest<T>) request, null);
        case Traced traced -> accept((TransferRequest<T>) traced.request(), traced.parent());
        default -> Commands.apply(message, dead, peers, regions, clients);
      }
      taken++;
    }
    return taken;
  }

  /**
   * Reaps at most {@value #TARGET_COMPLETIONS} completions; returns how many the provider delivered
   * (a stray slot's included), or 0 when the reap threw: the ops it did yield stand.
   */
  private int reap() {
    try {
      return endpoint.reap(this, TARGET_COMPLETIONS);
    } catch (DmaException error) {
      // Names no op, so no client can be failed for it: keep serving; the rest stay in flight.
      warnings.warn("completion queue read failed: " + error.getMessage());
      return 0;
    }
  }

  /** The completion deadline's scan of the posted ops, when due; returns 1 when it ran. */
  private int scanIfDue() {
    return completionDeadline.scanDue(now, inFlight) ? deadlines.scan(now, resets) : 0;
  }

  /**
   * Delivers the plain completions this and earlier passes finished, or holds a partial batch back
   * for company ({@link #batchHeld}); returns how many it delivered.
   */
  private int deliverBatch() {
    batchHeld = false;
    int size = completions.size();
    if (size == 0) {
      return 0;
    }
    if (size < TARGET_COMPLETIONS && drainSpins < MAX_DRAIN_SPINS && inFlight > 0) {
      // Let the batch grow a little: one downstream lock acquisition per batch, not per op. Only
      // while more completions can come: with nothing in flight, waiting adds a pass of progress
      // (0.3 to 0.5 µs on tcp) per spin to every transfer's latency and gains nothing.
      drainSpins++;
      batchHeld = true;
      return 0;
    }
    drainSpins = 0;
    deliver(completions);
    return size;
  }

  /** The idle strategy, fed what the last pass posted and reaped. */
  private void idle() {
    if (batchHeld) {
      Thread.onSpinWait(); // a partial batch waits for company: straight into the next pass
    } else if (backoff.after(
        Idle.decide(inFlight, pending.size(), postedInPass, reapedInPass > 0))) {
      readClock();
    }
  }

  /** Reads the clock into {@link #now}, starting a new epoch. */
  void readClock() {
    long reading = ticker.nanoTime();
    now = reading;
    clockReadings.record(++clockEpoch, reading);
  }

  /** A time no earlier than a post made in clock epoch {@code epoch} (see ClockReadings). */
  long postedNoLaterThan(int epoch) {
    return clockReadings.postedNoLaterThan(epoch, clockEpoch);
  }

  /** Queues a submitted transfer, or completes it at once when its operand doesn't resolve. */
  private void accept(TransferRequest<T> request, Context parent) {
    if (!deadMarks.isEmpty() && dead.refusedAtIntake(request)) {
      return; // to an incarnation marked dead
    }
    MemorySegment operand;
    try {
      operand = Intake.checkedOperand(request, null, peerText);
    } catch (DmaException refused) {
      refuseAtIntake(request, refused);
      return;
    }
    long lengthBytes = Operands.lengthOf(request.direction(), operand);
    Op<T> op = spareOps.pollFirst();
    if (op == null) {
      op = new Op<>();
    }
    op.accepted(request, operand, lengthBytes, parent, clientFor(request.clientId()));
    pending.addLast(op);
    if (warmCount < warmIds.length) {
      warmCarriesPeer[warmCount] = request.peer() != null;
      warmIds[warmCount++] = request.clientId();
    }
  }

  /**
   * Completes a transfer that never became an op (nothing was counted for a client yet), unless a
   * group's failure hook takes it to another device (nothing was posted here).
   */
  void refuseAtIntake(TransferRequest<T> request, DmaException error) {
    releaseOutstanding();
    telemetry.refused(error);
    if (!FailureHook.takesOver(failureHook, request, null, error, 0, succeeded)) {
      completions.add(new Completion<>(request.context(), Outcome.failed(error), 0));
    }
  }

  private Client clientFor(long clientId) {
    Client client = clients.get(clientId);
    if (client == null) {
      client = spareClients.pollFirst();
      if (client == null) {
        client = new Client();
      }
      client.opened(clientId, passes, now, probeAfterNs);
      clients.put(clientId, client);
    }
    return client;
  }

  /** Posts up to the cap, one pass over the queue; returns how many were posted. */
  int postPass() {
    if (warmCount > 0) {
      peers.warm(warmIds, warmCarriesPeer, warmCount);
      warmCount = 0;
    }
    int posted = 0;
    int refusedClients = 0;
    int attempts = pending.size();
    while (inFlight < cap && attempts-- > 0) {
      Op<T> op = pending.pollFirst();
      if (op == null) {
        // A client marked dead during this pass took its queued ops out.
        break;
      }
      if (op.client.refusedInPass == passes) {
        // Its peer refused a post in this pass (a full per-peer queue), so would this one, at a
        // cost to the pass. It keeps its place among the client's ops and is tried next pass.
        deferred.addLast(op);
        continue;
      }
      int code;
      try {
        code = post(op);
      } catch (Throwable setupFailure) {
        // Any Throwable: an Error from the caller's cacheableSpan() (met while leasing) or from
        // the provider fails this transfer only; rethrowing would strand every other one.
        refused.threw(op, setupFailure);
        continue;
      }
      if (code == FabricEndpoint.POSTED) {
        posted++;
      } else if (code == FabricEndpoint.AGAIN) {
        op.client.refusedInPass = passes;
        refused.stalled(op, code);
        if (++refusedClients >= clients.size()) {
          break; // the rest would only be put aside one by one; they keep their places
        }
      } else if (code == HELD) {
        refused.held(op);
      } else {
        refused.failed(op, code);
      }
    }
    while (!deferred.isEmpty()) {
      pending.addFirst(deferred.pollLast());
    }
    return posted;
  }

  // The cold paths of postPass live in RefusedPosts, so the per-transfer loop stays small enough
  // for the JIT to inline (with them inline, a window-1 transfer on the fake cost 20 % more).

  /**
   * Posts one op; returns the raw code. Throws for a set-up failure (peer or registration).
   *
   * <p>Kept under the JIT's hot inlining limit ({@code FreqInlineSize}, 325 bytes of bytecode) so
   * that postPass inlines it; that is why the telemetry steps here are single calls, and why the
   * bookkeeping of a posted op is a method of its own ({@code -XX:+PrintInlining} showed this at
   * 354 bytes and not inlined).
   */
  private int post(Op<T> op) {
    TransferRequest<T> request = op.request;
    long peer = peers.handle(request.clientId(), request.peerAddress(), request.peer());
    long address = op.operand.address();
    // Leased once per op and kept across -FI_EAGAIN and retries: re-registering an uncached
    // operand on every refused post would pin and unpin it thousands of times a second.
    Registration lease = op.lease;
    if (lease == null) {
      lease = leaseOperand(op, address);
      if (lease == regions.noRoomYet()) {
        return HELD; // nothing leased, no slot taken
      }
      op.lease = lease;
    }
    long descriptor = lease == null ? 0 : lease.descriptor();
    int slot = freeSlots[--freeSlotCount];
    int code;
    try {
      code =
          request.direction() instanceof Direction.FromPeer
              ? endpoint.postRead(
                  slot,
                  peer,
                  address,
                  op.lengthBytes,
                  descriptor,
                  request.remoteAddress(),
                  request.remoteKey())
              : endpoint.postWrite(
                  slot,
                  peer,
                  address,
                  op.lengthBytes,
                  descriptor,
                  request.remoteAddress(),
                  request.remoteKey());
    } catch (RuntimeException providerBug) {
      // The lease stays with the op and is dropped when the op finishes.
      freeSlots[freeSlotCount++] = slot;
      throw providerBug;
    }
    if (code == FabricEndpoint.POSTED) {
      markPosted(op, slot);
    } else {
      freeSlots[freeSlotCount++] = slot;
    }
    return code;
  }

  /** Records a posted op in its slot; a step of {@link #post}, apart to keep that inlinable. */
  private void markPosted(Op<T> op, int slot) {
    // The lease is held until the op finishes: while it lives the registration cannot be closed,
    // so a concurrent invalidate cannot pull it out from under the descriptor just handed to the
    // provider.
    op.slot = slot;
    op.posts++;
    op.client.movedNs = now;
    op.client.inFlight++;
    // Not yet seen by a deadline scan: the first scan after the post stamps it with the clock
    // reading that followed it (see DeadlineScan.stampPostedBy), so the coarse clock's lag can
    // never make it expire early.
    op.postedEpoch = clockEpoch;
    op.postedByNs = Op.NOT_SCANNED;
    op.postSeq = ++postSequence;
    // A later retry's progress deadline counts from its own first refusal.
    op.stalled = false;
    slots[slot] = op;
    inFlight++;
    if (telemetry.on) {
      telemetry.posted(op, op.request, op.lengthBytes);
    }
  }

  /** Leases an op's operand; while tracing, with a span when the lease had to register. */
  private Registration leaseOperand(Op<T> op, long address) {
    T context = op.request.context();
    return telemetry.tracing
        ? telemetry.leaseTraced(regions, address, op.lengthBytes, context)
        : regions.lease(address, op.lengthBytes, context);
  }

  // The reap: endpoint.reap calls back here once per completion, on the worker thread.

  @Override
  public void completed(int slot) {
    reaped(slot, null, 0, 0, null);
  }

  @Override
  public void failed(int slot, int errno, int providerErrno, String message) {
    reaped(slot, DmaException.Reason.ofErrno(errno), errno, providerErrno, message);
  }

  @Override
  public void failed(
      int slot, DmaException.Reason reason, int errno, int providerErrno, String message) {
    reaped(slot, reason, errno, providerErrno, message);
  }

  /**
   * The reap of one completion, top to bottom: free its slot, decide its outcome (or post it
   * again), then finish it.
   */
  private void reaped(
      int slot, DmaException.Reason failed, int errno, int providerErrno, String message) {
    Op<T> op = reclaim(slot);
    if (op == null) {
      return;
    }
    op.client.movedNs = now;
    op.client.inFlight--;
    // A success stands even for an op that passed its deadline: it did land, late.
    if (failed == null) {
      finishReaped(op, null);
      return;
    }
    // Posted again after a lost connection, or finished with its failure (CompletionErrors).
    errors.failed(op, failed, errno, providerErrno, message);
  }

  /** Frees the slot of a completion and returns its op, or null for a slot holding none. */
  private Op<T> reclaim(int slot) {
    Op<T> op = slot >= 0 && slot < cap ? slots[slot] : null;
    if (op == null) {
      warnings.warn("the provider reaped slot " + slot + ", which holds no operation; ignored");
      return null;
    }
    slots[slot] = null;
    freeSlots[freeSlotCount++] = slot;
    // Saturating: a reap that outran in-flight would otherwise leave the worker unable to post.
    if (--inFlight <= 0) {
      inFlight = 0;
      idleSinceNs = now;
    }
    if (op.expired) {
      completionDeadline.expiredReaped();
    }
    return op;
  }

  /**
   * Finishes an op that was posted (reaped, or failed by a reset), in order: records its telemetry,
   * accounts it and recycles it, and buffers its completion, a checksummed one for the next flush
   * to the pool and a plain one for the next delivery.
   *
   * @param error its failure, or null for a success
   */
  void finishReaped(Op<T> op, DmaException error) {
    TransferRequest<T> request = op.request;
    if (error != null) {
      error = op.whatItLeft(error);
    } else {
      succeeded++;
    }
    if (telemetry.on) {
      telemetry.reaped(op, op.isRead(), op.lengthBytes, error);
    }
    if (error != null
        && FailureHook.takesOver(failureHook, request, op.operand, error, op.posts, succeeded)) {
      accountFinished(op);
      return;
    }
    if (request.checksum() == Checksum.CRC32C) {
      // Handed over before accountFinished recycles the op and clears its spans.
      checksums.add(request.context(), op.operand, op.lengthBytes, error, op.posts, op.wire);
      accountFinished(op);
    } else {
      Outcome outcome = error == null ? done(op.lengthBytes) : Outcome.failed(error);
      int posts = op.posts;
      accountFinished(op);
      completions.add(new Completion<>(request.context(), outcome, posts));
    }
  }

  /**
   * The outcome of a plain transfer of {@code lengthBytes}: immutable, so the last one is shared
   * while lengths repeat (they mostly do), leaving the Completion the only allocation per transfer.
   */
  private TransferDone done(long lengthBytes) {
    TransferDone last = lastDone;
    if (last == null || last.bytes() != lengthBytes) {
      last = TransferDone.of(lengthBytes);
      lastDone = last;
    }
    return last;
  }

  /**
   * Fails an op that never reached the wire (post refused, deadline, set-up step) and accounts it.
   * Reaped ops are counted in finishReaped instead.
   */
  void failUnposted(Op<T> op, DmaException error) {
    TransferRequest<T> request = op.request;
    // Never posted this time, but an earlier post (before a lost connection) may still land.
    error = op.whatItLeft(error);
    telemetry.failedUnposted(op.isRead(), error);
    int posts = op.posts;
    boolean takenOver =
        FailureHook.takesOver(failureHook, request, op.operand, error, posts, succeeded);
    accountFinished(op);
    if (!takenOver) {
      completions.add(new Completion<>(request.context(), Outcome.failed(error), posts));
    }
  }

  /** Accounts one finished op (reaped, or failed before posting) and recycles it. */
  private void accountFinished(Op<T> op) {
    releaseOutstanding();
    if (op.lease != null) {
      op.lease.release();
      op.lease = null;
    }
    Client client = op.client;
    if (--client.outstanding <= 0) {
      clients.remove(client.id);
      if (client.removalPending) {
        peers.release(client.id);
      }
      spareClients.addLast(client);
      if (peers.hasRetired()) {
        peers.removeRetired();
      }
    }
    op.request = null;
    op.operand = null;
    op.client = null;
    op.clearTrace();
    spareOps.addLast(op);
  }

  /** Drops one op from the device-wide tally that submit raised, never below zero. */
  void releaseOutstanding() {
    long current;
    do {
      current = outstanding.get();
      if (current == 0) {
        return;
      }
    } while (!outstanding.compareAndSet(current, current - 1));
  }

  /** Hands a batch to the caller's hook and clears it. */
  void deliver(List<Completion<T>> batch) {
    try {
      completer.complete(batch);
    } catch (Throwable hookFailure) {
      // The hook must not throw; when it does, the batch counts as delivered and the worker goes
      // on serving every other transfer.
      LOG.log(Level.ERROR, "the BatchCompleter threw; the worker carries on", hookFailure);
    }
    batch.clear();
  }

  /**
   * Fails whatever is left and closes the endpoint ({@link WorkerShutdown}): {@link #run} calls it
   * on its way out, and a test stepping the worker once {@link #isFinished()} (or to abandon it).
   *
   * @param failure what ended the worker, or null for a normal exit
   */
  public void shutDown(@Nullable Throwable failure) {
    WorkerShutdown.shutDown(this, failure);
  }
}
