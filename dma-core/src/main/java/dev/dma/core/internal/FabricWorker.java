package dev.dma.core.internal;

import dev.dma.api.BatchCompleter;
import dev.dma.api.Checksum;
import dev.dma.api.Completion;
import dev.dma.api.Direction;
import dev.dma.api.DmaException;
import dev.dma.api.Errno;
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
import java.util.Arrays;
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
 * <p>Each pass: drain the channel without blocking; post pending operations up to the in-flight
 * cap, requeueing {@code -FI_EAGAIN} until the progress deadline; reap at most {@value
 * #TARGET_COMPLETIONS} completions; hand checksummed completions to the pool in batches; deliver
 * plain completions in batches; then spin, yield or park (see {@link Idle}).
 *
 * <p>Threads: everything here runs on the worker thread except the constructor. The caller's {@link
 * BatchCompleter} runs here for plain completions and on pool threads for checksummed ones.
 *
 * <p>This file reads in the order a transfer travels: intake, accept, post, reap, finish, deliver;
 * then the recovery paths (completion deadline, dead clients, endpoint reset) and shutdown. Three
 * helpers own a concern each: {@code WorkerTelemetry} (spans and metrics, called behind one boolean
 * check), {@code ChecksumBatch} (checksummed completions on their way to the pool) and {@code
 * CompletionDeadline} (when posted ops expire and when to give up on their flush).
 *
 * <p>Allocation: operations (each with its telemetry record), slots, client records and the plain
 * batch list are recycled. A plain transfer allocates its {@link Completion}; its successful
 * outcome, a {@link TransferDone}, is shared with the previous transfer while lengths repeat (a new
 * length allocates a new one), and a failure allocates its {@link DmaException} and an {@link
 * Outcome.Failed}. A checksummed transfer allocates a {@code Checksummed} record here, and on the
 * pool thread its Completion, its TransferDone (which carries its checksum) and, when fewer bytes
 * moved than the operand holds, a slice of it. Each flush of checksummed completions allocates a
 * new batch list, a job and the pool queue's node, and the job a list of the completions it
 * delivers (all in {@code ChecksumBatch}). With tracing or metrics installed, spans and attributes
 * come on top ({@code WorkerTelemetry}).
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

  /** Spins a partial plain batch may wait for company before it is delivered anyway. */
  static final int MAX_DRAIN_SPINS = 10;

  /** The text of every transfer that never reached the wire because the worker went away. */
  public static final String WORKER_GONE = "fabric worker is gone";

  /**
   * How many times a transfer is posted again after its connection was lost under it before it
   * fails: two are enough for the one teardown another transfer's bad key causes on tcp;ofi_rxm.
   * Which transfers may be posted again at all is {@link #mayPostAgain}.
   */
  static final int MAX_RETRIES = 2;

  private static final System.Logger LOG = System.getLogger(FabricWorker.class.getName());

  private final FabricEndpoint endpoint;
  // The endpoint's rendering of a peer address, for failure texts: one function for the worker's
  // life, so that naming a client allocates no lambda per failure.
  private final Function<byte[], String> peerText;
  private final LocalRegions regions;
  private final PeerTable peers;
  private final WorkerChannel channel;
  private final BatchCompleter<T> completer;
  private final AtomicLong outstanding;
  private final NanoClock ticker;
  private final long progressDeadlineNs;
  // How long an op may keep getting -FI_EAGAIN while other transfers are in flight: the completion
  // deadline (those transfers' completions free what the provider is short of), or the progress
  // deadline when there is no completion deadline.
  private final long stallBoundNs;
  private final CompletionDeadline completionDeadline;
  // How long an op of a client with nothing in flight is refused (or, where the endpoint strands a
  // gone peer's ops, stays in flight) before the worker asks the endpoint whether the peer is gone
  // (FabricEndpoint.peerGone), and the least time between two such questions about one client: a
  // tenth of the progress deadline, 100 ms by default. What a question costs is the endpoint's to
  // bound (a tcp endpoint limits its connection attempts).
  private final long probeAfterNs;
  // The endpoint may leave a gone peer's posted ops neither completed nor failed (shm), so the
  // deadline scan asks about the peers of ops long in flight too.
  private final boolean strandsOpsOfGonePeers;
  // The endpoint completes in post order across peers (shm up to 2.4): one stuck op stalls every
  // client, so the deadline judges only the oldest stuck op's incarnation (see judgeInPostOrder).
  private final boolean inPostOrder;
  // The endpoint's removal of a peer flushes its posted ops (FabricEndpoint.Capability), so a
  // dead peer's ops come back without a reset.
  private final boolean removalFlushes;
  // Numbers posts in order: on an in-post-order endpoint the smallest in flight is the op every
  // later completion waits behind.
  private long postSequence;
  // Client incarnations (client id and address) found dead, with the error their later transfers
  // fail with at once, until addPeer, removePeer or a transfer carrying a new address for the
  // client. Empty (and never looked up) on a healthy server.
  private final LongObjectMap<DeadMark> deadPeers = new LongObjectMap<>();
  // When inFlight last fell to 0: with nothing in flight, nothing the provider holds for us can
  // be what a refused post waits for.
  private long idleSinceNs;
  // When the endpoint first asked for a quiet reset (wantsQuietReset), or NO_QUIET_RESET.
  private long quietResetSinceNs = NO_QUIET_RESET;
  // An op of a client that left was judged stuck (judgeEach): a quiet reset finishes it.
  private boolean quietResetWanted;
  private final Consumer<byte[]> addressChanged;
  private final Backoff backoff;
  private boolean closeTimedOut;
  private final RateLimitedLog warnings = new RateLimitedLog(LOG);
  private final WorkerTelemetry telemetry;

  private final int cap;
  private final Op<T>[] slots;
  private final int[] freeSlots;
  private int freeSlotCount;
  private int inFlight;

  private final ArrayDeque<Op<T>> pending = new ArrayDeque<>();
  // Ops a post pass could not post (refused, held, or behind a refusal of their client), put back
  // at the head of the queue when the pass ends, in their order: a refused op keeps its place
  // ahead of those queued after it, so ops sharing a peer are posted first come, first served.
  private final ArrayDeque<Op<T>> deferred = new ArrayDeque<>();
  private final ArrayDeque<Op<T>> spareOps = new ArrayDeque<>();
  // Outstanding (queued or in-flight) ops per client, and whether its peer is to be released once
  // that count hits 0. Counting from intake rather than posting stops a removal slipping between a
  // queued transfer and its post, where the post would re-insert the peer just removed. Deferring
  // the release to 0 also keeps it from flushing a live queue pair (EFA does flush).
  private final ClientMap<Client> clients;
  private final ArrayDeque<Client> spareClients = new ArrayDeque<>();

  private final List<Completion<T>> completions = new ArrayList<>();
  // Reaped ops wanting a checksum: their CRC and completion run on the pool so hashing never
  // stalls posting and reaping. The rest complete inline.
  private final ChecksumBatch<T> checksums;
  private int drainSpins;
  private TransferDone lastDone;

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
    this.telemetry = new WorkerTelemetry(telemetry);
    this.regions = regions;
    this.peers = peers;
    this.channel = channel;
    this.completer = completer;
    this.checksums = new ChecksumBatch<>(pool, completer, this.telemetry);
    this.outstanding = outstanding;
    this.ticker = ticker;
    this.progressDeadlineNs = progressDeadline.toNanos();
    this.stallBoundNs =
        completionDeadline.isZero()
            ? progressDeadlineNs
            : Math.max(progressDeadlineNs, completionDeadline.toNanos());
    this.completionDeadline = new CompletionDeadline(completionDeadline);
    Set<FabricEndpoint.Capability> capabilities = endpoint.capabilities();
    this.inPostOrder = capabilities.contains(FabricEndpoint.Capability.COMPLETES_IN_POST_ORDER);
    this.probeAfterNs = Math.max(1_000_000L, progressDeadlineNs / 10);
    this.strandsOpsOfGonePeers =
        capabilities.contains(FabricEndpoint.Capability.STRANDS_OPERATIONS_OF_GONE_PEERS);
    this.removalFlushes = capabilities.contains(FabricEndpoint.Capability.REMOVAL_FLUSHES);
    this.addressChanged = addressChanged;
    this.backoff = new Backoff(channel);
    readClock();
    idleSinceNs = now;
    // A stale incarnation leaves the address vector only when its holders' ops are done, as every
    // other removal does.
    this.cap = inFlightCap(configuredCap, endpoint.maxTx());
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

  /** The pending-queue length as of the last pass, for the gauge. */
  private int pendingCount;

  /**
   * The in-flight cap: the configured value (at least 1), clamped to the provider's transmit depth
   * so the worker limits itself below {@code -FI_EAGAIN}. A depth of 0 means "no fixed depth";
   * clamping to it would serialize everything at 1.
   *
   * @param configured the configured cap
   * @param maxTx the provider's depth, or 0
   * @return the cap
   */
  public static int inFlightCap(int configured, int maxTx) {
    int requested = Math.max(1, configured);
    return maxTx <= 0 ? requested : Math.min(requested, maxTx);
  }

  /**
   * Whether to hand the accumulated checksummed completions to the pool this pass: when the batch
   * is full, when nothing moved, or when the worker is about to park.
   *
   * <p>{@code aboutToPark} must never be dropped: the worker then blocks on the channel with
   * nothing to post or reap, so a batch held back here would wait for an unrelated message,
   * stranding every client in it until then.
   *
   * @param batched checksummed completions waiting
   * @param posted ops posted this pass
   * @param reapedAny whether anything was reaped this pass
   * @param aboutToPark whether nothing is pending or in flight
   * @return whether to flush
   */
  public static boolean shouldFlushChecksums(
      int batched, int posted, boolean reapedAny, boolean aboutToPark) {
    return 0 < batched
        && (batched >= TARGET_COMPLETIONS || (0 == posted && !reapedAny) || aboutToPark);
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
      loop();
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

  private void loop() {
    while (true) {
      boolean disconnected = intake();
      // A coarse clock: read every CLOCK_PASSES passes and after every park, not per pass (a
      // clock read per pass cost a fifth of a window-1 transfer on the fake). Posts stamp it and
      // the deadlines compare against it, so it lags real time by at most CLOCK_PASSES busy
      // passes (microseconds), never by a park.
      if ((++passes & (CLOCK_PASSES - 1)) == 0) {
        readClock();
      }

      int posted = quietResetWanted || endpoint.wantsQuietReset() ? quietReset() : postPass();

      // How many completions the provider delivered this pass (a stray slot's included). A reap
      // that throws reports no count: the ops it did yield stand, but the pass counts 0, which
      // only shades this pass's spin and checksum-flush choice.
      int reaped = 0;
      try {
        reaped = endpoint.reap(this, TARGET_COMPLETIONS);
      } catch (DmaException error) {
        // Names no op, so no client can be failed for it. Keep serving: the ops it did yield were
        // delivered, and the rest stay in flight for a later pass.
        warnings.warn("completion queue read failed: " + error.getMessage());
      }
      boolean reapedAny = reaped > 0;
      if (completionDeadline.scanDue(now, inFlight)) {
        completionDeadline.scanned(now);
        checkDeadlines();
      }
      pendingCount = pending.size();
      if (telemetry.tracePasses && (posted > 0 || reapedAny)) {
        // Emitted only when something moved; a debug aid the user opts into.
        telemetry.pass(inFlight, posted, reaped, pendingCount);
      }

      boolean idle = pending.isEmpty() && inFlight == 0;
      if (shouldFlushChecksums(checksums.size(), posted, reapedAny, idle)) {
        checksums.flush();
      }

      if (!completions.isEmpty()) {
        if (completions.size() < TARGET_COMPLETIONS
            && drainSpins < MAX_DRAIN_SPINS
            && inFlight > 0) {
          // Let the batch grow a little: one downstream lock acquisition per batch, not per op.
          // Only while more completions can come: with nothing in flight, waiting adds a pass of
          // progress (0.3 to 0.5 µs on tcp) per spin to every transfer's latency and gains nothing.
          Thread.onSpinWait();
          drainSpins++;
          continue;
        }
        drainSpins = 0;
        deliver(completions);
      }

      if (disconnected) {
        if (idle) {
          return;
        }
        if (channel.hasCloseDeadline() && System.nanoTime() - channel.closeDeadlineNanos() >= 0) {
          // close(timeout) promised to return: shutDown closes the endpoint (after which no
          // provider touches an operand) and fails what is still posted.
          closeTimedOut = true;
          return;
        }
      }
      switch (Idle.decide(inFlight, pending.size(), posted, reapedAny)) {
        case PARK -> {
          backoff.reset();
          // Only after a real block: a resubmitting completer (a closed loop) leaves a message
          // every time, and a clock read per transfer there cost a sixth of it (JMH, fake).
          if (channel.park()) {
            readClock();
          }
        }
        // Work in flight or stalled on -FI_EAGAIN, and nothing moved: spin for the completion
        // that usually follows within microseconds, then back off to parking so a peer that went
        // silent does not cost a core.
        case YIELD, SPIN -> {
          if (backoff.idle()) {
            readClock();
          }
        }
        case CONTINUE -> backoff.reset();
      }
    }
  }

  /** {@link #quietResetSinceNs} while the endpoint wants no reset. */
  private static final long NO_QUIET_RESET = Long.MIN_VALUE;

  /**
   * A pass while a reset is wanted once nothing is in flight: the endpoint asks for one ({@link
   * FabricEndpoint#wantsQuietReset}), or an op of a client that left was judged stuck ({@link
   * #judgeEach}) and only a reset makes its operand safe to hand back. Posts nothing new, so what
   * is in flight can drain, and resets when the ops of current clients have (those of clients that
   * left may never complete), or once the progress deadline has passed with ops still in flight (a
   * peer that will not answer must not hold every client's posts; those ops are finished as any
   * reset finishes them). Then posts on the fresh endpoint.
   *
   * @return the ops posted this pass
   */
  private int quietReset() {
    readClock();
    if (quietResetSinceNs == NO_QUIET_RESET) {
      quietResetSinceNs = now;
    }
    if (inFlight > 0
        && now - quietResetSinceNs < progressDeadlineNs
        && inFlightToCurrentClients() > 0) {
      return 0;
    }
    quietResetSinceNs = NO_QUIET_RESET;
    resetEndpoint(
        quietResetWanted
            ? "a client left or went away with a transfer posted that its provider will not"
                + " complete"
            : "the provider asked for a fresh endpoint: shm cannot reuse the slots of peers that"
                + " left, and a reset frees them");
    return postPass();
  }

  /**
   * The ops in flight whose client has not left: what a quiet reset waits for. An op of a client
   * that left may never complete (its endpoint closed with it posted); the reset finishes it.
   */
  private int inFlightToCurrentClients() {
    int count = 0;
    for (int slot = 0; slot < cap; slot++) {
      Op<T> op = slots[slot];
      if (op != null && !op.expired && !hasLeft(op)) {
        count++;
      }
    }
    return count;
  }

  /** {@link Op#postedByNs} of an op no deadline scan has seen since its post. */
  private static final long NOT_SCANNED = Long.MIN_VALUE;

  /** Passes between two reads of the clock; a power of two. */
  static final int CLOCK_PASSES = 64;

  /** Recent clock readings kept for {@link #postedNoLaterThan}; a power of two. */
  static final int CLOCK_RING = 1024;

  /** The coarse clock: the ticker's last reading (see the loop). */
  private long now;

  // Each reading of the clock starts an epoch; the ring holds the readings of the last
  // CLOCK_RING epochs, indexed by epoch, so the end of the epoch a post was made in bounds its
  // time from above.
  private int clockEpoch;
  private final long[] clockReadings = new long[CLOCK_RING];

  /** Reads the clock into {@link #now}, starting a new epoch. */
  private void readClock() {
    long reading = ticker.nanoTime();
    now = reading;
    clockReadings[++clockEpoch & (CLOCK_RING - 1)] = reading;
  }

  private int passes;

  // The clients of the transfers intake accepted since the last post pass, and whether each request
  // carries its peer: the pass has the peer table load where it will find them all at once before
  // posting any (PeerTable#warm). With many clients each is a cache miss, and taken one post at a
  // time they were a third of a transfer's time at 100,000 clients; loaded together they overlap.
  // Past the arrays' ends the rest are read cold.
  private final long[] warmIds = new long[256];
  private final boolean[] warmCarriesPeer = new boolean[256];
  private int warmCount;

  /** Drains the channel without blocking; returns whether it is closed and drained. */
  private boolean intake() {
    Object message;
    while ((message = channel.poll()) != null) {
      handle(message);
    }
    return channel.isDrained();
  }

  @SuppressWarnings("unchecked")
  private void handle(Object message) {
    switch (message) {
      case TransferRequest<?> request -> accept((TransferRequest<T>) request, null);
      case Traced traced -> accept((TransferRequest<T>) traced.request(), traced.parent());
      case Commands.AddPeer add -> {
        // The application says the peer is back (or new): its transfers are posted again.
        deadPeers.remove(add.peer().clientId());
        try {
          peers.advertise(add.peer());
          add.reply().send(null);
        } catch (DmaException error) {
          add.reply().fail(error);
        }
      }
      case Commands.RemovePeer remove -> {
        deadPeers.remove(remove.clientId());
        removeOrDefer(remove.clientId());
      }
      case Commands.Pin pin -> {
        // The submitter is blocked on this reply, so answer even when the pin fails.
        try {
          regions.pin(pin.base(), pin.lengthBytes());
          pin.reply().send(null);
        } catch (DmaException error) {
          pin.reply().fail(error);
        }
      }
      default -> throw new IllegalStateException("unknown worker message " + message);
    }
  }

  /** Queues a submitted transfer, or completes it at once when its operand doesn't resolve. */
  private void accept(TransferRequest<T> request, Context parent) {
    T context = request.context();
    if (!deadPeers.isEmpty() && refusedAsDead(request)) {
      return;
    }
    MemorySegment operand;
    try {
      operand = Intake.checkedOperand(request, null, peerText);
    } catch (DmaException refused) {
      refuseAtIntake(context, refused);
      return;
    }
    long lengthBytes = Operands.lengthOf(request.direction(), operand);
    Op<T> op = spareOps.pollFirst();
    if (op == null) {
      op = new Op<>();
    }
    op.request = request;
    op.operand = operand;
    op.lengthBytes = lengthBytes;
    op.stalled = false;
    op.expired = false;
    op.leftBehind = false;
    op.judgedGone = null;
    op.retries = 0;
    op.posts = 0;
    op.parent = parent;
    op.client = clientFor(request.clientId());
    op.client.outstanding++;
    pending.addLast(op);
    if (warmCount < warmIds.length) {
      warmCarriesPeer[warmCount] = request.peer() != null;
      warmIds[warmCount++] = request.clientId();
    }
  }

  /**
   * Fails at intake a transfer to a client incarnation marked dead; returns whether it was. A
   * transfer carrying an address the client never had before is its new incarnation (it restarted
   * and advertised again): the mark, which belongs to the old one, is dropped and the transfer goes
   * ahead. One carrying an address the client has since left goes ahead too, to fail as stale at
   * post.
   */
  private boolean refusedAsDead(TransferRequest<T> request) {
    DeadMark mark = deadPeers.get(request.clientId());
    if (mark == null) {
      return false;
    }
    if (!Arrays.equals(mark.address, request.peerAddress())) {
      if (!peers.isPreviousAddress(request.clientId(), request.peerAddress())) {
        deadPeers.remove(request.clientId());
      }
      return false;
    }
    refuseAtIntake(request.context(), mark.error);
    return true;
  }

  /**
   * The error of the dead incarnation {@code op} was submitted to, or null while it is not dead.
   */
  private DmaException deadFor(Op<T> op) {
    if (deadPeers.isEmpty()) {
      return null;
    }
    DeadMark mark = deadPeers.get(op.client.id);
    return mark != null && Arrays.equals(mark.address, op.request.peerAddress())
        ? mark.error
        : null;
  }

  /** Completes a transfer that never became an op (nothing was counted for a client yet). */
  private void refuseAtIntake(T context, DmaException error) {
    releaseOutstanding();
    telemetry.refused(error);
    completions.add(new Completion<>(context, Outcome.failed(error), 0));
  }

  private Client clientFor(long clientId) {
    Client client = clients.get(clientId);
    if (client == null) {
      client = spareClients.pollFirst();
      if (client == null) {
        client = new Client();
      }
      client.id = clientId;
      client.outstanding = 0;
      client.removalPending = false;
      client.refusedInPass = passes - 1;
      client.movedNs = now;
      client.inFlight = 0;
      client.probedNs = now - probeAfterNs;
      clients.put(clientId, client);
    }
    return client;
  }

  /** Removes a client's peer, or defers it until its last op finishes. */
  private void removeOrDefer(long clientId) {
    Client client = clients.get(clientId);
    if (client == null || client.outstanding == 0) {
      peers.release(clientId);
    } else {
      client.removalPending = true;
    }
  }

  /** Posts up to the cap, one pass over the queue; returns how many were posted. */
  private int postPass() {
    if (warmCount > 0) {
      peers.warm(warmIds, warmCarriesPeer, warmCount);
      warmCount = 0;
    }
    int posted = 0;
    int attempts = pending.size();
    while (inFlight < cap && attempts-- > 0) {
      Op<T> op = pending.pollFirst();
      if (op == null) {
        // A client marked dead during this pass took its queued ops out.
        break;
      }
      if (op.client.refusedInPass == passes) {
        // Its peer answered -FI_EAGAIN earlier in this pass: the next post to it would too (a
        // full per-peer queue; on shm 2.x one segmented transfer per peer at a time), and each
        // refused call costs the pass time that reaping and the target's progress need. It keeps
        // its place among the client's ops and is tried next pass.
        deferred.addLast(op);
        continue;
      }
      int code;
      try {
        code = post(op);
      } catch (Throwable setupFailure) {
        // Any Throwable: an Error from the caller's cacheableSpan() (met while leasing) or from
        // the provider fails this transfer only; rethrowing would strand every other one.
        failPostThrew(op, setupFailure);
        continue;
      }
      if (code == FabricEndpoint.POSTED) {
        posted++;
      } else if (code == FabricEndpoint.AGAIN) {
        op.client.refusedInPass = passes;
        stalled(op, code);
      } else if (code == HELD) {
        held(op);
      } else {
        postFailed(op, code);
      }
    }
    while (!deferred.isEmpty()) {
      pending.addFirst(deferred.pollLast());
    }
    return posted;
  }

  // The cold paths of postPass live in methods of their own, so the per-transfer loop stays small
  // enough for the JIT to inline (with them inline, a window-1 transfer on the fake cost 20 %
  // more).

  /**
   * An op the provider refused with -FI_EAGAIN: queued again, or failed when the refusal says its
   * peer is dead. A full transmit queue is not a dead peer: while other transfers are in flight,
   * their completions free what the provider is short of (a burst to one peer fills its queue; a
   * dead shm neighbour holds shm's command slots until the completion deadline recovers them), so
   * the op waits. It fails only when its client has nothing in flight (else their completion
   * deadline judges it) and has had no post accepted nor completion reaped for the completion
   * deadline ({@link #stallBoundNs}), and never while an expired transfer awaits its recovery. With
   * nothing in flight at all, nothing of ours can be what the provider waits for: refused for the
   * progress deadline then, the peer cannot be reached (its connection cannot be set up, or its
   * queue stays full).
   */
  private void stalled(Op<T> op, int code) {
    if (!op.stalled) {
      op.stalled = true;
      op.stalledSinceNs = now;
    }
    telemetry.stalled();
    // Also while closing: a connection still being set up answers -FI_EAGAIN too, so a stalled op
    // keeps its chance until the deadline, which bounds how long close() waits.
    String why = null;
    // Counted from the later of its first refusal and the last sign of life of its client (a post
    // accepted, a completion reaped): a client whose other transfers move is not stuck, however
    // long its queue at the peer.
    long since = Math.max(op.stalledSinceNs, op.client.movedNs);
    if (op.client.inFlight == 0 && now - since >= probeAfterNs) {
      // Nothing of its client's in flight, so no connection to its peer is up: a peer whose
      // endpoint is gone is told from one slow to connect by the endpoint's probe, long before the
      // deadlines below.
      String gone = probeGone(op.client, op.request.peerAddress());
      if (gone != null) {
        long clientId = op.client.id;
        byte[] address = op.request.peerAddress();
        failUnposted(op, goneError(DmaException.Kind.TRANSFER, clientId, address, gone, -code, 0));
        markDead(clientId, address, goneText(gone));
        return;
      }
    }
    if (inFlight == 0) {
      if (now - Math.max(since, idleSinceNs) >= progressDeadlineNs) {
        why =
            "no post to it was accepted for "
                + DurationFormat.format(Duration.ofNanos(progressDeadlineNs))
                + " with nothing else in flight: its connection could not be set up, or its"
                + " queue stayed full (peer gone, stopped or not accepting)";
      }
    } else if (op.client.inFlight == 0
        && now - since >= stallBoundNs
        && !completionDeadline.recovering()) {
      // With ops of its own in flight, the client is judged by their completion deadline instead.
      why =
          "no post to it was accepted for "
              + DurationFormat.format(Duration.ofNanos(stallBoundNs))
              + " while other transfers were in flight: its queue stayed full (peer stopped or not"
              + " progressing)";
    }
    if (why == null) {
      deferred.addLast(op);
      return;
    }
    String text = clientText(op.client.id, op.request.peerAddress()) + ": " + why;
    DmaException error =
        new DmaException(
            DmaException.Kind.TRANSFER, DmaException.Reason.DEADLINE, text, -code, 0, null);
    telemetry.progressDeadlinePassed();
    // Fail it first, so the client's other queued ops fail after it, not before.
    long clientId = op.client.id;
    byte[] address = op.request.peerAddress();
    failUnposted(op, error);
    markDead(clientId, address, why);
  }

  /** "client 7 at 10.0.0.2:4711": the client and the peer address a failure concerns. */
  private String clientText(long clientId, byte[] address) {
    return Intake.clientText(clientId, address, peerText);
  }

  /**
   * An op whose post failed outright: it finishes here and is never reaped. When the endpoint says
   * the failure means the peer is gone, the client incarnation is marked unreachable too.
   */
  private void postFailed(Op<T> op, int code) {
    DmaException.Reason reason = endpoint.postFailureReason(code);
    long clientId = op.client.id;
    byte[] address = op.request.peerAddress();
    String text = "post: " + endpoint.errorText(code) + " (" + code + ")";
    failUnposted(
        op,
        new DmaException(
            DmaException.Kind.FABRIC,
            reason,
            clientText(clientId, address) + ": " + text,
            -code,
            0,
            null));
    if (reason == DmaException.Reason.PEER_UNREACHABLE) {
      // markDead decides per incarnation: a mark left by an older address does not stop this one.
      markDead(clientId, address, text);
    }
  }

  /**
   * What {@link #post} returns, never a provider's code, when the op's operand cannot be registered
   * under {@code max_pinned_bytes} until operations release their leases.
   */
  private static final int HELD = Integer.MIN_VALUE;

  /**
   * An op whose operand does not fit under {@code max_pinned_bytes} yet ({@link
   * LocalRegions#noRoomYet()}): queued again while an op in flight may release a lease, within the
   * progress deadline; otherwise failed as retryable, naming the bound. Never marks its peer dead:
   * the bound is this endpoint's, not the peer's.
   */
  private void held(Op<T> op) {
    if (!op.stalled) {
      op.stalled = true;
      op.stalledSinceNs = now;
    }
    if (inFlight > 0 && now - op.stalledSinceNs < progressDeadlineNs) {
      deferred.addLast(op);
      return;
    }
    failUnposted(
        op,
        regions.noRoomError(
            op.lengthBytes,
            inFlight > 0
                ? "for longer than progress_deadline"
                : "with no transfer in flight left to release one"));
  }

  /**
   * An op whose post threw: a set-up failure (peer insert, registration) fails it alone; any other
   * exception (a provider bug) still finishes it, since it is in neither the queue nor a slot now
   * and nothing else would ever complete it.
   */
  private void failPostThrew(Op<T> op, Throwable thrown) {
    failUnposted(
        op,
        thrown instanceof DmaException setupFailure
            ? namingTheClient(op, setupFailure)
            : new DmaException(
                DmaException.Kind.FABRIC,
                DmaException.Reason.PROVIDER,
                "post failed: " + thrown,
                0,
                0,
                thrown));
  }

  /**
   * A set-up failure (a peer insert, a registration) with the client and peer address it concerns
   * in front, as every transfer's failure names them; one that names them already is kept.
   */
  private DmaException namingTheClient(Op<T> op, DmaException failure) {
    String message = String.valueOf(failure.getMessage());
    if (message.startsWith("client ")) {
      return failure;
    }
    return new DmaException(
        failure.kind(),
        failure.reason(),
        clientText(op.client.id, op.request.peerAddress()) + ": " + message,
        failure.fabricErrno(),
        failure.providerErrno(),
        failure);
  }

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
    // reading that followed it (see checkDeadlines), so the coarse clock's lag can never make it
    // expire early.
    op.postedEpoch = clockEpoch;
    op.postedByNs = NOT_SCANNED;
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
    reap(slot, null, 0, 0, null);
  }

  @Override
  public void failed(int slot, int errno, int providerErrno, String message) {
    reap(slot, DmaException.Reason.ofErrno(errno), errno, providerErrno, message);
  }

  @Override
  public void failed(
      int slot, DmaException.Reason reason, int errno, int providerErrno, String message) {
    reap(slot, reason, errno, providerErrno, message);
  }

  /**
   * The reap of one completion, top to bottom: free its slot, decide its outcome (or post it
   * again), then finish it.
   */
  private void reap(
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
    if (postAgainAfterConnectionLoss(op, errno)) {
      return;
    }
    String gone = probeAfterFailure(op, failed);
    if (gone == null) {
      finishReaped(op, failure(op, failed, errno, providerErrno, message));
      return;
    }
    long clientId = op.client.id;
    byte[] address = op.request.peerAddress();
    finishReaped(
        op, goneError(DmaException.Kind.TRANSFER, clientId, address, gone, errno, providerErrno));
    // After its own failure, so the client's queued ops fail after it, not before.
    markDead(clientId, address, goneText(gone));
  }

  /**
   * For a completion error that may mean its peer went away (a refusal, which on tcp is the closing
   * of the connection that a dying peer causes too; a lost connection), the endpoint's evidence
   * that the peer's endpoint is gone, or null.
   */
  private @Nullable String probeAfterFailure(Op<T> op, DmaException.Reason failed) {
    if (op.expired
        || (failed != DmaException.Reason.ACCESS_DENIED
            && failed != DmaException.Reason.PEER_UNREACHABLE)
        || deadFor(op) != null) {
      return null;
    }
    return probeGone(op.client, op.request.peerAddress());
  }

  /**
   * Asks the endpoint whether the client's peer at {@code address} is gone ({@link
   * FabricEndpoint#peerGone}), at most once per {@link #probeAfterNs} per client; its evidence, or
   * null. Off the per-transfer path: only for ops refused or failed or long in flight.
   */
  private @Nullable String probeGone(Client client, byte[] address) {
    if (now - client.probedNs < probeAfterNs) {
      return null;
    }
    client.probedNs = now;
    try {
      return endpoint.peerGone(address);
    } catch (RuntimeException probeBug) {
      warnings.warn("the endpoint's peer probe threw; taken as no answer: " + probeBug);
      return null;
    }
  }

  /** Why an incarnation whose endpoint is gone is marked unreachable, in words. */
  private static String goneText(String evidence) {
    return "its endpoint is gone: " + evidence;
  }

  /**
   * The failure of a transfer whose peer's endpoint is gone (closed, exited, or restarted under a
   * new address): {@link DmaException.Reason#PEER_UNREACHABLE}, the same on every provider that can
   * tell, whatever the provider reported.
   */
  private DmaException goneError(
      DmaException.Kind kind,
      long clientId,
      byte[] address,
      String evidence,
      int errno,
      int providerErrno) {
    return new DmaException(
        kind,
        DmaException.Reason.PEER_UNREACHABLE,
        clientText(clientId, address)
            + ": "
            + goneText(evidence)
            + " (the client closed, exited or restarted): ask it for its current advertisement",
        errno,
        providerErrno,
        null);
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
   * Queues an op whose error completion says its connection was torn down under it (on tcp;ofi_rxm
   * another transfer's bad key does that), not by its own fault, to be posted again once the
   * provider reconnects; returns whether it did. Not an op past its deadline, one of a dead client,
   * or one out of retries.
   */
  private boolean postAgainAfterConnectionLoss(Op<T> op, int errno) {
    if (op.expired || !isConnectionLevel(errno) || !mayPostAgain(op, true) || deadFor(op) != null) {
      return false;
    }
    retry(op, "connection reset");
    pending.addFirst(op);
    return true;
  }

  /**
   * Whether an op whose post was lost may be posted again: a read always (it writes no remote
   * memory, and its earlier post can no longer write the landing buffer: the provider failed it, or
   * the reset closed dma's endpoint), a write only after a connection-level error completion and
   * only when its request allows it ({@link TransferRequest#retryWrite()}). After an endpoint reset
   * a write is never posted again: the old connection may still deliver its bytes, later than the
   * repost's and so perhaps over newer ones. Either way at most {@link #MAX_RETRIES} times.
   *
   * @param connectionLost true for a connection-level error completion, false for a reset
   */
  private static boolean mayPostAgain(Op<?> op, boolean connectionLost) {
    if (op.retries >= MAX_RETRIES) {
      return false;
    }
    return isRead(op.request) || (connectionLost && op.request.retryWrite());
  }

  /** Counts a retry of an op whose post is being abandoned; the caller queues it again. */
  private void retry(Op<T> op, String why) {
    op.retries++;
    if (telemetry.tracing) {
      telemetry.retried(op, why);
    }
  }

  /**
   * The failure an error completion stands for, naming the client and the peer address it concerns.
   */
  private DmaException failure(
      Op<T> op, DmaException.Reason reason, int errno, int providerErrno, String message) {
    if (op.expired) {
      // The flush of an op that passed its deadline: the deadline is why it failed.
      return expiredError(op);
    }
    DmaException dead = deadFor(op);
    if (dead != null) {
      // Flushed by the removal of its dead peer: that is why it failed.
      return dead;
    }
    return new DmaException(
        DmaException.Kind.TRANSFER,
        reason,
        clientText(op.client.id, op.request.peerAddress()) + ": " + message,
        errno,
        providerErrno,
        null);
  }

  /** The failure of an op that passed the completion deadline. */
  private DmaException expiredError(Op<T> op) {
    if (op.judgedGone != null) {
      return op.judgedGone;
    }
    return completionDeadline.error(
        clientText(op.client.id, op.request.peerAddress()), op.leftBehind);
  }

  /**
   * Whether a completion error means the connection failed rather than this transfer: {@code
   * ENOTCONN}, {@code EPIPE}, {@code ECONNRESET} and {@code ECONNABORTED}, the same on every
   * libfabric provider here (tcp;ofi_rxm reports the victims of a torn-down connection as ENOTCONN
   * with prov_errno EPIPE; net, sockets and shm report their own faults as EACCES, EIO or
   * ECANCELED, which are not retried).
   */
  static boolean isConnectionLevel(int errno) {
    return switch (errno) {
      case Errno.EPIPE, Errno.FI_ECONNABORTED, Errno.FI_ECONNRESET, Errno.FI_ENOTCONN -> true;
      default -> false;
    };
  }

  /**
   * Finishes an op that was posted (reaped, or failed by a reset), in order: records its telemetry,
   * accounts it and recycles it, and buffers its completion, a checksummed one for the next flush
   * to the pool and a plain one for the next delivery.
   *
   * @param error its failure, or null for a success
   */
  private void finishReaped(Op<T> op, DmaException error) {
    TransferRequest<T> request = op.request;
    if (error != null) {
      error = whatItLeft(op, error);
    }
    if (telemetry.on) {
      telemetry.reaped(op, isRead(request), op.lengthBytes, error);
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
   * The failure of {@code op} saying what it may have left at the peer: a write that was ever
   * posted may land later ({@link DmaException.TargetMemory#MAY_HAVE_CHANGED}), whatever ended it;
   * a read, or a write never posted, changed nothing there.
   */
  private static DmaException whatItLeft(Op<?> op, DmaException error) {
    return op.posts > 0 && !isRead(op.request)
        ? error.withTargetMemory(DmaException.TargetMemory.MAY_HAVE_CHANGED)
        : error;
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
  private void failUnposted(Op<T> op, DmaException error) {
    TransferRequest<T> request = op.request;
    // Never posted this time, but an earlier post (before a lost connection) may still land.
    error = whatItLeft(op, error);
    telemetry.failedUnposted(isRead(request), error);
    int posts = op.posts;
    accountFinished(op);
    completions.add(new Completion<>(request.context(), Outcome.failed(error), posts));
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

  private static boolean isRead(TransferRequest<?> request) {
    return request.direction() instanceof Direction.FromPeer;
  }

  /** Drops one op from the device-wide tally that submit raised, never below zero. */
  private void releaseOutstanding() {
    long current;
    do {
      current = outstanding.get();
      if (current == 0) {
        return;
      }
    } while (!outstanding.compareAndSet(current, current - 1));
  }

  private void deliver(List<Completion<T>> batch) {
    try {
      completer.complete(batch);
    } catch (Throwable hookFailure) {
      // The hook must not throw; when it does, the batch counts as delivered and the worker goes
      // on serving every other transfer.
      LOG.log(Level.ERROR, "the BatchCompleter threw; the worker carries on", hookFailure);
    }
    batch.clear();
  }

  // Recovery, off the per-transfer path: the completion deadline, dead clients, endpoint reset.

  /**
   * Fails every in-flight op past the completion deadline, marks its client dead, and recovers the
   * endpoint so the op's completion can be delivered safely: by the flush its peer's removal causes
   * where the provider guarantees one, otherwise (and when the flush does not come) by resetting
   * the endpoint. An expired op is delivered only from its reaped completion or from the reset,
   * never on the timer alone: until then the provider may still write its operand.
   */
  private void checkDeadlines() {
    // The deadline judges the provider, not the worker's absence: after a stall (a GC pause, a
    // slow completer, no CPU) completions may be waiting in the queue for ops that look overdue.
    // Reap them all first, then read the clock afresh.
    reapEverythingWaiting();
    readClock();
    long scanNs = now;
    if (inPostOrder) {
      judgeInPostOrder(scanNs);
    } else {
      judgeEach(scanNs);
    }
    String resetReason = completionDeadline.resetReason(now, removalFlushes);
    if (resetReason != null) {
      resetEndpoint(resetReason);
    }
  }

  /**
   * Expires every posted op past the deadline and marks its client dead: on an endpoint whose
   * completions do not wait for each other, an op past the deadline is its own peer's doing.
   */
  private void judgeEach(long scanNs) {
    for (int slot = 0; slot < cap; slot++) {
      Op<T> op = slots[slot];
      if (op == null || op.expired) {
        continue;
      }
      stampPostedBy(op);
      if (!completionDeadline.passed(scanNs, op.postedByNs)) {
        if (!removalFlushes
            && hasLeft(op)
            && completionDeadline.leftBehind(scanNs, op.postedByNs)) {
          // Its client left with it posted and its provider will not flush it: it may never
          // complete (the peer's endpoint closed). Judge it now, without the reset that would take
          // the current clients' ops with it: a quiet one, once theirs have completed.
          op.expired = true;
          op.leftBehind = true;
          telemetry.completionDeadlinePassed();
          quietResetWanted = true;
        } else if (strandsOpsOfGonePeers && scanNs - op.postedByNs >= probeAfterNs) {
          String gone = probeGone(op.client, op.request.peerAddress());
          if (gone != null) {
            judgeGone(op, gone);
          }
        }
      } else {
        op.expired = true;
        completionDeadline.expired();
        telemetry.completionDeadlinePassed();
        long clientId = op.client.id;
        if (deadFor(op) == null
            && markDead(clientId, op.request.peerAddress(), completionDeadline.text())
            && removalFlushes) {
          // Its posted ops come back as flushed error completions.
          peers.release(clientId);
        }
      }
    }
  }

  /**
   * Judges every posted op of the incarnation of {@code op}, whose endpoint is gone and whose ops
   * the endpoint may never complete: they fail as {@link DmaException.Reason#PEER_UNREACHABLE} once
   * a reset makes their operands safe, and the incarnation is marked unreachable. The reset is a
   * quiet one (it waits for the current clients' ops, not for these), except on an endpoint that
   * completes in post order, where nothing completes behind these ops: there they are expired as a
   * deadline expires them, the reset follows at once and posts the bystanders again.
   */
  private void judgeGone(Op<T> op, String evidence) {
    long clientId = op.client.id;
    byte[] address = op.request.peerAddress();
    DmaException error = goneError(DmaException.Kind.TRANSFER, clientId, address, evidence, 0, 0);
    for (int slot = 0; slot < cap; slot++) {
      Op<T> posted = slots[slot];
      if (posted != null
          && !posted.expired
          && posted.client.id == clientId
          && Arrays.equals(posted.request.peerAddress(), address)) {
        if (inPostOrder) {
          expire(posted, true);
        } else {
          posted.expired = true;
          posted.leftBehind = true;
          quietResetWanted = true;
        }
        posted.judgedGone = error;
      }
    }
    markDead(clientId, address, goneText(evidence));
  }

  /** Gives an op its {@link Op#postedByNs} at the first deadline scan that sees it. */
  private void stampPostedBy(Op<T> op) {
    if (op.postedByNs == NOT_SCANNED) {
      op.postedByNs = postedNoLaterThan(op.postedEpoch);
    }
  }

  /**
   * The deadline on an endpoint that completes in post order ({@link
   * FabricEndpoint.Capability#COMPLETES_IN_POST_ORDER}): every completion after a stuck op waits
   * behind it, so the ops past the deadline are mostly bystanders of live clients. Only the oldest
   * op in flight can be the cause; it is judged when it passes the deadline, or sooner ({@link
   * CompletionDeadline#leftBehind}) when its client has left (removePeer, or a new address since),
   * which is what a client closing its endpoint with a write in flight looks like. Its
   * incarnation's ops are expired (and a client still current is marked dead), as are those of any
   * other client that left and whose ops are as old; the reset that follows posts every other op
   * again (see {@link #resetEndpoint}), so live clients lose nothing.
   */
  private void judgeInPostOrder(long scanNs) {
    Op<T> oldest = null;
    for (int slot = 0; slot < cap; slot++) {
      Op<T> op = slots[slot];
      if (op == null || op.expired) {
        continue;
      }
      stampPostedBy(op);
      if (oldest == null || op.postSeq - oldest.postSeq < 0) {
        oldest = op;
      }
    }
    if (oldest == null) {
      return;
    }
    boolean passed = completionDeadline.passed(scanNs, oldest.postedByNs);
    boolean left =
        !passed && hasLeft(oldest) && completionDeadline.leftBehind(scanNs, oldest.postedByNs);
    if (!passed && !left && strandsOpsOfGonePeers && scanNs - oldest.postedByNs >= probeAfterNs) {
      String gone = probeGone(oldest.client, oldest.request.peerAddress());
      if (gone != null) {
        // Its own ops are judged now; the bystanders are posted again after the reset.
        judgeGone(oldest, gone);
        return;
      }
    }
    if (!passed && !left) {
      return;
    }
    long clientId = oldest.client.id;
    byte[] address = oldest.request.peerAddress();
    for (int slot = 0; slot < cap; slot++) {
      Op<T> op = slots[slot];
      if (op == null || op.expired) {
        continue;
      }
      if (op.client.id == clientId && Arrays.equals(op.request.peerAddress(), address)) {
        expire(op, left);
      } else if (hasLeft(op) && completionDeadline.leftBehind(scanNs, op.postedByNs)) {
        expire(op, true);
        judged(op, completionDeadline.leftText());
      }
    }
    judged(oldest, left ? completionDeadline.leftText() : completionDeadline.text());
  }

  /**
   * Marks the incarnation of a judged op dead, which also fails its queued ops: posted after the
   * reset, they would stall every client again. An incarnation already replaced by a new address is
   * not marked (its queued ops are refused as stale at their post).
   */
  private void judged(Op<T> op, String why) {
    if (deadFor(op) == null) {
      markDead(op.client.id, op.request.peerAddress(), why);
    }
  }

  /** Marks a posted op expired: its slot waits for the reset, its failure for then. */
  private void expire(Op<T> op, boolean leftBehind) {
    op.expired = true;
    op.leftBehind = leftBehind;
    completionDeadline.expired();
    telemetry.completionDeadlinePassed();
  }

  /**
   * Whether the client incarnation an op was sent to has left: removePeer was called for it, or the
   * client has advertised another address since.
   */
  private boolean hasLeft(Op<T> op) {
    return op.client.removalPending
        || !peers.isCurrentOrUnknown(op.client.id, op.request.peerAddress());
  }

  /**
   * A time no earlier than a post made in clock epoch {@code epoch}: the reading that ended that
   * epoch, or, when the ring no longer holds it, the oldest reading it holds (later, so safe: the
   * deadline may fire late by up to the ring's span, never early). The coarse clock itself is no
   * bound: it was read before the post, by up to {@link #CLOCK_PASSES} passes, and a worker
   * descheduled on a loaded machine made that 170 ms.
   */
  private long postedNoLaterThan(int epoch) {
    int age = clockEpoch - epoch;
    int next = age < CLOCK_RING ? epoch + 1 : clockEpoch - (CLOCK_RING - 1);
    return clockReadings[next & (CLOCK_RING - 1)];
  }

  /**
   * Reaps until the completion queue has nothing more, at most one full window plus one batch: a
   * provider that keeps producing cannot hold the scan for ever.
   */
  private void reapEverythingWaiting() {
    int budget = cap + TARGET_COMPLETIONS;
    while (budget > 0) {
      int reaped;
      try {
        reaped = endpoint.reap(this, TARGET_COMPLETIONS);
      } catch (DmaException error) {
        warnings.warn("completion queue read failed: " + error.getMessage());
        return;
      }
      if (reaped < TARGET_COMPLETIONS) {
        return;
      }
      budget -= reaped;
    }
  }

  /**
   * Marks a client incarnation (its id and {@code address}) dead after one of its transfers passed
   * a deadline: its queued transfers fail now, and new ones fail at intake, each with the same
   * error, instead of each waiting out a deadline of its own. The mark is the incarnation's, not
   * the id's: a transfer carrying a new address for the client is served at once. An incarnation
   * the client has already left (it advertised another address since) is not marked: only its own
   * transfers failed.
   *
   * @return whether the incarnation was marked
   */
  private boolean markDead(long clientId, byte[] address, String why) {
    if (!peers.isCurrentOrUnknown(clientId, address)) {
      return false;
    }
    DmaException unreachable =
        new DmaException(
            DmaException.Kind.TRANSFER,
            DmaException.Reason.PEER_UNREACHABLE,
            clientText(clientId, address)
                + " is unreachable ("
                + why
                + "); its transfers fail at once until it is added again (addPeer) or a transfer"
                + " carries a new address for it",
            0,
            0,
            null);
    deadPeers.put(clientId, new DeadMark(address.clone(), unreachable));
    failQueued(pending, clientId, address, unreachable);
    // Mid-pass, the ops this pass already put aside are queued too.
    failQueued(deferred, clientId, address, unreachable);
    return true;
  }

  /** Fails the ops of {@code queue} sent to the incarnation (client id and address). */
  private void failQueued(
      ArrayDeque<Op<T>> queue, long clientId, byte[] address, DmaException unreachable) {
    for (var queued = queue.iterator(); queued.hasNext(); ) {
      Op<T> op = queued.next();
      if (op.client.id == clientId && Arrays.equals(op.request.peerAddress(), address)) {
        queued.remove();
        failUnposted(op, unreachable);
      }
    }
  }

  /**
   * A dead client incarnation: the address its failed transfer carried, and the error its later
   * transfers fail with.
   */
  private record DeadMark(byte[] address, DmaException error) {}

  /**
   * Closes and reopens the endpoint's transport ({@link FabricEndpoint#reset()}): the one state in
   * which no provider can still touch a posted operand. Then every op that was in flight is
   * finished: expired ones fail with the deadline, ones of dead clients with their client's error,
   * and the rest, which failed through no fault of their own, are posted again (at most {@link
   * #MAX_RETRIES} times, then they fail as {@link DmaException.Reason#ENDPOINT_RESET}, retryable).
   * Live peers are inserted again; queued transfers go out on the new endpoint.
   */
  private void resetEndpoint(String why) {
    byte[] addressBefore = endpoint.localAddress();
    try {
      endpoint.reset();
    } catch (RuntimeException cannot) {
      // Nothing else makes the operands safe to hand back: stop, and let shutDown close the
      // endpoint before it fails everything.
      throw new IllegalStateException(
          "the endpoint could not be reset after " + why + ": " + cannot, cannot);
    }
    completionDeadline.endpointReset();
    telemetry.endpointReset();
    quietResetSinceNs = NO_QUIET_RESET;
    quietResetWanted = false;
    // The peers first: finishing the ops below releases the peers of clients whose removal waited
    // for them, and a release must find the new handle, not one the reset voided.
    int reinserted =
        peers.reinsertAfterReset(
            clientId -> {
              DeadMark mark = deadPeers.get(clientId);
              return mark == null || !peers.isCurrentOrUnknown(clientId, mark.address);
            });
    int retried = 0;
    int failed = 0;
    ArrayDeque<Op<T>> again = new ArrayDeque<>();
    for (int slot = 0; slot < cap; slot++) {
      Op<T> op = slots[slot];
      if (op == null) {
        continue;
      }
      slots[slot] = null;
      freeSlots[freeSlotCount++] = slot;
      inFlight = Math.max(0, inFlight - 1);
      op.client.inFlight--;
      DmaException dead = deadFor(op);
      if (op.expired) {
        finishReaped(op, expiredError(op));
        failed++;
      } else if (dead != null) {
        finishReaped(op, dead);
        failed++;
      } else if (inPostOrder || mayPostAgain(op, false)) {
        // On an in-post-order endpoint the op only waited behind the expired one (each reset there
        // expires at least one op, so this cannot go on for ever), and a write may go again: see
        // FabricEndpoint.Capability.COMPLETES_IN_POST_ORDER.
        retry(op, "endpoint reset");
        again.addLast(op);
        retried++;
      } else {
        finishReaped(op, resetError(op, why));
        failed++;
      }
    }
    idleSinceNs = now;
    // Posted again ahead of everything queued behind them, in their original order.
    while (!again.isEmpty()) {
      pending.addFirst(again.pollLast());
    }
    // Every queued op gets a fresh chance on the new endpoint: what refused its posts is gone.
    for (Op<T> queued : pending) {
      queued.stalled = false;
    }
    byte[] address = endpoint.localAddress();
    if (!Arrays.equals(address, addressBefore)) {
      try {
        addressChanged.accept(address.clone());
      } catch (RuntimeException listenerBug) {
        LOG.log(
            Level.ERROR, "the local-address listener threw; the worker carries on", listenerBug);
      }
    }
    LOG.log(
        Level.WARNING,
        "reset the endpoint ("
            + why
            + "): "
            + failed
            + " transfers failed, "
            + retried
            + " posted again, "
            + reinserted
            + " peers inserted again");
  }

  /** The failure of an op that a reset took and that is not posted again. */
  private static DmaException resetError(Op<?> op, String why) {
    String text =
        isRead(op.request)
            ? "the endpoint was reset while this read was posted ("
                + why
                + "), after "
                + op.retries
                + " retries; submitting it again is safe"
            : "the endpoint was reset while this write was posted ("
                + why
                + "); it may still land, whole or in part, so submit it again only if a late"
                + " landing of these bytes is harmless";
    return new DmaException(
        DmaException.Kind.TRANSFER, DmaException.Reason.ENDPOINT_RESET, text, 0, 0, null);
  }

  // Shutdown: the endpoint closes first, then whatever the worker still holds fails.

  /**
   * Fails whatever is left and closes the endpoint. After a normal exit only never-posted ops and
   * held checksummed completions remain; after a failure, in-flight ops too. The endpoint is closed
   * before in-flight ops are failed, so no provider touches their buffers after their completion.
   */
  private void shutDown(Throwable failure) {
    channel.close();
    // Unregisters the gauges only: counters and spans below still record.
    telemetry.close();
    try {
      regions.close();
    } catch (RuntimeException e) {
      LOG.log(Level.WARNING, "clearing the registration cache failed", e);
    }
    try {
      peers.clear();
    } catch (RuntimeException e) {
      LOG.log(Level.WARNING, "clearing the peer table failed", e);
    }
    // Whether the provider may still be live for what is posted: its close failed, so it may
    // not have stopped touching their operands. They still complete (every transfer gets its
    // completion, and the caller is not left waiting for ever), but their failure says so.
    String closeFailure = null;
    try {
      endpoint.close();
    } catch (RuntimeException e) {
      closeFailure = String.valueOf(e.getMessage());
      LOG.log(Level.ERROR, "closing the endpoint failed; the provider may still be live", e);
    }
    List<Completion<T>> leftover = new ArrayList<>(completions);
    completions.clear();
    for (int slot = 0; slot < cap; slot++) {
      Op<T> op = slots[slot];
      if (op != null) {
        slots[slot] = null;
        DmaException error =
            closeFailure != null
                ? new DmaException(
                    DmaException.Kind.FABRIC,
                    DmaException.Reason.PROVIDER,
                    "the provider could not be closed while this transfer was posted ("
                        + closeFailure
                        + "): it may still read or write the operand, so neither reuse nor free"
                        + " it",
                    0,
                    0,
                    failure)
                : closeTimedOut && failure == null
                    ? new DmaException(
                        DmaException.Kind.TRANSFER,
                        DmaException.Reason.CLOSED,
                        "the service closed before this transfer completed: the close timeout"
                            + " passed with it posted",
                        0,
                        0,
                        null)
                    : goneError(failure);
        if (telemetry.on) {
          // Posted, so its spans are open: end them with the failure, and count it.
          telemetry.reaped(op, isRead(op.request), op.lengthBytes, error);
        }
        leftover.add(finished(op, error));
      }
    }
    inFlight = 0;
    Op<T> op;
    while ((op = pending.pollFirst()) != null) {
      DmaException error = goneError(failure);
      if (telemetry.on) {
        telemetry.failedUnposted(isRead(op.request), error);
      }
      leftover.add(finished(op, error));
    }
    // Deferred checksummed completions finish inline: the pool may be tearing down alongside.
    checksums.drainInto(leftover);
    // Whatever arrived but was never taken in (only when the loop failed) fails too; replies are
    // abandoned so their callers wake.
    while (true) {
      Object message = channel.poll();
      if (message != null) {
        leftover.addAll(refuse(message));
      } else if (channel.isDrained()) {
        break;
      } else {
        // An offer is inside the gate; it either lands in the queue or sees the channel closed.
        Thread.onSpinWait();
      }
    }
    if (!leftover.isEmpty()) {
      deliver(leftover);
    }
  }

  private static DmaException goneError(Throwable failure) {
    return new DmaException(
        DmaException.Kind.FABRIC, DmaException.Reason.CLOSED, WORKER_GONE, 0, 0, failure);
  }

  /** The failed completion of an op the worker drops at shutdown; its lease goes with it. */
  private Completion<T> finished(Op<T> op, DmaException error) {
    T context = op.request.context();
    releaseOutstanding();
    if (op.lease != null) {
      op.lease.release();
      op.lease = null;
    }
    return new Completion<>(context, Outcome.failed(whatItLeft(op, error)), op.posts);
  }

  @SuppressWarnings("unchecked")
  private List<Completion<T>> refuse(Object message) {
    if (message instanceof Traced traced) {
      message = traced.request();
    }
    switch (message) {
      case TransferRequest<?> request -> {
        releaseOutstanding();
        return List.of(
            new Completion<>(
                (T) request.context(),
                Outcome.failed(DmaException.fabric(DmaException.Reason.CLOSED, WORKER_GONE)),
                0));
      }
      case Commands.AddPeer add -> add.reply().abandon();
      case Commands.Pin pin -> pin.reply().abandon();
      default -> {}
    }
    return List.of();
  }

  /**
   * Per-op state, recycled: a transfer between intake and completion. Its telemetry fields (the
   * submitter's context, the spans, the post time) are inherited from {@link
   * WorkerTelemetry.OpTrace} rather than held in an object of their own, so with telemetry off a
   * transfer pays no extra load or allocation for them.
   */
  private static final class Op<T extends Operands> extends WorkerTelemetry.OpTrace {
    TransferRequest<T> request;
    MemorySegment operand;
    long lengthBytes;
    Client client;
    Registration lease;
    int slot;
    boolean stalled;
    // Passed the completion deadline while posted; finished by its flush or the reset.
    boolean expired;
    // Expired because its client left with it posted (CompletionDeadline.leftBehind); its failure
    // says so.
    boolean leftBehind;
    // Expired because its peer's endpoint is gone (judgeGone): the failure it ends with.
    @Nullable DmaException judgedGone;
    // Its place in post order (see postSequence).
    long postSeq;
    // Posts abandoned to a reset or a torn-down connection so far.
    int retries;
    // Times it was handed to the provider; a failed write ever posted may still land.
    int posts;
    // No earlier than its post, on the worker's ticker: the first deadline scan after the post
    // stamps it (NOT_SCANNED until then); the completion deadline counts from here.
    long postedByNs;
    // The coarse clock's epoch when it was posted; bounds its post time for the first scan.
    int postedEpoch;
    // When the provider first answered -FI_EAGAIN; the progress deadline counts from here.
    long stalledSinceNs;
  }

  /** A client's outstanding count and pending removal, recycled. */
  private static final class Client {
    long id;
    int outstanding;
    boolean removalPending;
    // The worker pass in which a post to this client last answered -FI_EAGAIN.
    int refusedInPass;
    // When a post of this client was last accepted or a completion of it reaped (coarse clock).
    long movedNs;
    // Its ops posted and not yet reaped.
    int inFlight;
    // When the endpoint was last asked whether its peer is gone (probeGone).
    long probedNs;
  }

  /**
   * A transfer submitted while tracing is on, with the submitter's context (the parent of its
   * {@code dma.wire} span). Only allocated when tracing is installed.
   *
   * @param request the transfer
   * @param parent the submitter's current context
   */
  public record Traced(TransferRequest<?> request, Context parent) {}
}
