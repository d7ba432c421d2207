package dev.dma.fake.core;

import dev.dma.api.BatchCompleter;
import dev.dma.api.DmaConfiguration;
import dev.dma.api.Operands;
import dev.dma.api.Peer;
import dev.dma.api.TransferRequest;
import dev.dma.core.ChecksumPool;
import dev.dma.core.FabricProviders;
import dev.dma.core.NanoClock;
import dev.dma.core.internal.Commands;
import dev.dma.core.internal.FabricWorker;
import dev.dma.core.internal.FailureHook;
import dev.dma.core.internal.Reply;
import dev.dma.core.internal.Telemetry;
import dev.dma.core.internal.Traced;
import dev.dma.core.internal.WorkerAccounting;
import dev.dma.core.internal.WorkerChannel;
import dev.dma.core.internal.peers.BoundPeer;
import dev.dma.core.internal.peers.PeerTable;
import dev.dma.core.internal.regions.LocalRegions;
import dev.dma.core.internal.regions.RegionRegistry;
import dev.dma.spi.FabricEndpoint;
import dev.dma.spi.FabricProvider;
import java.time.Duration;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.BooleanSupplier;
import java.util.function.UnaryOperator;
import org.jspecify.annotations.Nullable;

/**
 * A fabric worker stepped on the test's own thread, as Agrona's {@code AgentInvoker} steps an
 * agent: the test calls {@link #step()} (one {@link FabricWorker#doWork()}) and asserts between
 * steps, with the clock a {@link ManualTicker} it advances by hand, so nothing it asserts depends
 * on when another thread runs. Submits and commands go through the worker's real {@link
 * WorkerChannel}, as {@code FabricService}'s do; a command's reply is answered by the step that
 * takes it in. The endpoint comes from the provider the configuration names (the fake).
 *
 * <p>Waits are bounded: {@link #stepUntil} fails after {@link #MAX_WAIT_NS} of stepping.
 * Checksummed completions still finish on pool threads; a {@link Recorder} stepped by this harness
 * ({@link Recorder#steppedBy}) steps until they arrive, bounded the same way.
 *
 * <p>Threads: one thread at a time, the one stepping it (it is the worker's thread then). {@link
 * #close()} closes the channel, steps the worker until it is finished, shuts it down (closing the
 * endpoint) and closes the checksum pool it made.
 *
 * @param <T> the caller context type
 */
final class SteppedWorker<T extends Operands> implements AutoCloseable {
  /**
   * How long a wait steps at most before it fails: far more than any test here needs (a wait on the
   * manual clock ends within a few hundred passes; one on the system clock, within its deadline).
   */
  static final long MAX_WAIT_NS = 30_000_000_000L;

  /**
   * Passes {@link #stepQuietly()} steps: several reads of the worker's coarse clock (every 64
   * passes), so that a deadline the clock has reached is judged and what it finishes is delivered.
   */
  static final int QUIET_PASSES = 512;

  private final WorkerChannel channel;
  private final CountingClock clock;
  private final FabricWorker<T> worker;
  private final LocalRegions regions;
  private final ChecksumPool pool;
  private final AtomicLong outstanding;
  private final AtomicReference<byte[]> localAddress;
  private final Duration closeTimeout;
  private Thread owner = Thread.currentThread();
  private boolean shutDown;

  private SteppedWorker(
      WorkerChannel channel,
      FabricWorker<T> worker,
      ChecksumPool pool,
      AtomicLong outstanding,
      AtomicReference<byte[]> localAddress,
      Duration closeTimeout,
      CountingClock clock,
      LocalRegions regions) {
    this.clock = clock;
    this.regions = regions;
    this.closeTimeout = closeTimeout;
    this.outstanding = outstanding;
    this.channel = channel;
    this.worker = worker;
    this.pool = pool;
    this.localAddress = localAddress;
  }

  /**
   * A worker over the endpoint the configuration's provider opens, stepped by the calling thread.
   *
   * @param configuration the configuration (its deadlines, caps and provider)
   * @param completer receives every completion
   * @param clock the worker's clock, usually a {@link ManualTicker}
   */
  static <T extends Operands> SteppedWorker<T> start(
      DmaConfiguration configuration, BatchCompleter<T> completer, NanoClock clock) {
    return start(configuration, completer, clock, Telemetry.OFF, UnaryOperator.identity());
  }

  /**
   * As {@link #start(DmaConfiguration, BatchCompleter, NanoClock)}, recording spans and metrics
   * into {@code telemetry}.
   */
  static <T extends Operands> SteppedWorker<T> start(
      DmaConfiguration configuration,
      BatchCompleter<T> completer,
      NanoClock clock,
      Telemetry telemetry) {
    return start(configuration, completer, clock, telemetry, UnaryOperator.identity());
  }

  /**
   * A worker as {@link #start(DmaConfiguration, BatchCompleter, NanoClock)} makes one, over the
   * endpoint the provider opens as {@code wrap} returns it: a test's wrapper may make the endpoint
   * do what the fake cannot be scripted to (report a slot that holds nothing, fail its close).
   */
  static <T extends Operands> SteppedWorker<T> start(
      DmaConfiguration configuration,
      BatchCompleter<T> completer,
      NanoClock clock,
      UnaryOperator<FabricEndpoint> wrap) {
    return start(configuration, completer, clock, Telemetry.OFF, wrap);
  }

  /** The general form of the ones above: with {@code telemetry}, over {@code wrap}'s endpoint. */
  static <T extends Operands> SteppedWorker<T> start(
      DmaConfiguration configuration,
      BatchCompleter<T> completer,
      NanoClock clock,
      Telemetry telemetry,
      UnaryOperator<FabricEndpoint> wrap) {
    FabricProvider provider = FabricProviders.select(configuration);
    DmaConfiguration resolved = FabricProviders.resolve(configuration, provider);
    WorkerChannel channel = new WorkerChannel(1 << 16);
    channel.bind(Thread.currentThread());
    FabricEndpoint endpoint = wrap.apply(provider.open(resolved));
    AtomicReference<byte[]> address = new AtomicReference<>(endpoint.localAddress());
    ChecksumPool pool = new ChecksumPool(resolved.crcPoolThreads(), resolved.closeTimeout());
    AtomicLong outstanding = new AtomicLong();
    CountingClock counting = new CountingClock(clock);
    LocalRegions regions =
        new LocalRegions(endpoint, RegionRegistry.global(), resolved.maxPinnedBytes());
    FabricWorker<T> worker =
        new FabricWorker<>(
            endpoint,
            regions,
            new PeerTable(endpoint),
            channel,
            completer,
            pool,
            outstanding,
            counting,
            resolved.maxInFlight(),
            resolved.progressDeadline(),
            resolved.completionDeadline(),
            address::set,
            telemetry);
    return new SteppedWorker<>(
        channel, worker, pool, outstanding, address, resolved.closeTimeout(), counting, regions);
  }

  /**
   * One pass of the worker's duty cycle.
   *
   * @return its work count
   */
  int step() {
    if (shutDown) {
      return 0; // shut down by close(): nothing is left to step
    }
    Thread current = Thread.currentThread();
    if (current != owner) {
      // JUnit may run a test's set-up, body and tear-down on different threads (one after the
      // other, never at once): the stepping thread is the worker's, so the channel names it.
      owner = current;
      channel.bind(current);
    }
    return worker.doWork();
  }

  /** Steps until {@code condition} holds, for at most {@link #MAX_WAIT_NS}. */
  void stepUntil(BooleanSupplier condition, String what) {
    long deadline = System.nanoTime() + MAX_WAIT_NS;
    for (long pass = 0; !condition.getAsBoolean(); pass++) {
      if (System.nanoTime() - deadline > 0) {
        throw new AssertionError(what + ": not after " + pass + " worker passes");
      }
      step();
    }
  }

  /** Steps {@link #QUIET_PASSES} passes: long enough for anything due at the current time. */
  void stepQuietly() {
    for (int pass = 0; pass < QUIET_PASSES; pass++) {
      step();
    }
  }

  /**
   * Advances {@code ticker}, then steps until the worker has read it: its coarse clock is read
   * every few dozen passes, and an op posted right after a jump of the clock could otherwise be
   * stamped with the reading from before it.
   */
  void advanceAndRead(ManualTicker ticker, Duration duration) {
    long before = ticker.reads();
    ticker.advance(duration);
    stepUntil(() -> ticker.reads() != before, "a read of the clock");
  }

  /**
   * What a worker thread with nothing outstanding does before it takes in the next message: it
   * parked, and reads the clock once the message wakes it (its coarse clock is read every few dozen
   * passes otherwise). Stepped, the idle passes until that read stand in for the park, so a
   * transfer submitted to an idle worker is stamped with the time it came, not with a reading from
   * before: on the system clock a deadline would otherwise pass early by the time the worker sat
   * idle.
   */
  private void wake() {
    long before = clock.reads.get();
    stepUntil(() -> clock.reads.get() != before, "a read of the clock");
  }

  /** The worker's clock, counting its reads. */
  private static final class CountingClock implements NanoClock {
    private final NanoClock clock;
    private final AtomicLong reads = new AtomicLong();

    CountingClock(NanoClock clock) {
      this.clock = clock;
    }

    @Override
    public long nanoTime() {
      reads.incrementAndGet();
      return clock.nanoTime();
    }
  }

  /**
   * Submits through the worker's channel, counted as {@code FabricService.submit} counts it.
   *
   * @return whether the channel took it (false once closed)
   */
  boolean submit(TransferRequest<T> request) {
    if (outstanding.get() == 0) {
      wake();
    }
    outstanding.incrementAndGet();
    if (channel.offer(request)) {
      return true;
    }
    outstanding.decrementAndGet();
    return false;
  }

  /**
   * Puts {@code message} (a transfer, a {@code Traced} one or a command) on the worker's channel
   * without stepping, counting a transfer as {@link #submit} does: it waits there until a step
   * takes it in, or a shut-down finds it.
   *
   * @return whether the channel took it
   */
  boolean offer(Object message) {
    boolean transfer = message instanceof TransferRequest<?> || message instanceof Traced;
    if (transfer) {
      outstanding.incrementAndGet();
    }
    if (channel.offer(message)) {
      return true;
    }
    if (transfer) {
      outstanding.decrementAndGet();
    }
    return false;
  }

  /**
   * Shuts the worker down at once with {@code failure} as its cause, as {@code FabricWorker.run}
   * does when a pass throws: no further step, whatever the worker holds or its channel still has
   * fails; then the checksum pool is closed. Later steps and {@link #close()} do nothing.
   */
  void shutDownNow(Throwable failure) {
    if (shutDown) {
      return;
    }
    shutDown = true;
    try {
      worker.shutDown(failure);
    } finally {
      pool.close();
    }
  }

  /**
   * Runs the worker's own loop ({@link FabricWorker#run}) on this thread until it ends, by itself
   * or by a throwable it rethrows, then closes the checksum pool. For a worker whose first pass
   * ends it: the loop parks when idle. Later steps and {@link #close()} do nothing.
   */
  void runOnThisThread() {
    shutDown = true;
    try {
      worker.run();
    } finally {
      pool.close();
    }
  }

  /** Installs a group's failure hook, as {@code FabricServiceGroup} does before the worker runs. */
  void failureHook(FailureHook<T> hook) {
    worker.failureHook(hook);
  }

  /** Adds a client's peer as {@code FabricService.addPeer} does; the reply comes with a step. */
  Peer addPeer(long clientId, byte[] address) {
    BoundPeer peer = new BoundPeer(clientId, address);
    Reply<Void> reply = new Reply<>();
    if (!channel.offer(new Commands.AddPeer(peer, reply))) {
      throw new IllegalStateException("the stepped worker's channel is closed");
    }
    step();
    reply.await("the stepped worker did not take the peer in");
    return peer;
  }

  /** Removes a client's peer as {@code FabricService.removePeer} does, taken in by a step. */
  void removePeer(long clientId) {
    channel.offer(new Commands.RemovePeer(clientId));
    step();
  }

  /**
   * Sends {@link Commands.ForgetDeadPeers}, as a group does for a paused device, taken in by a
   * step.
   */
  void forgetDeadPeers() {
    channel.offer(Commands.ForgetDeadPeers.INSTANCE);
    step();
  }

  /** The bytes the worker's registrations pin now ({@link LocalRegions#pinnedBytes()}). */
  long pinnedBytes() {
    return regions.pinnedBytes();
  }

  /** Transfers submitted and not yet completed. */
  long outstanding() {
    return outstanding.get();
  }

  /** The endpoint's current address (it changes when a reset changes it). */
  byte[] localAddress() {
    return localAddress.get().clone();
  }

  /**
   * Closes the channel, as {@code FabricService.close} does first: the worker drains what is queued
   * and finishes once nothing is in flight, as later steps show ({@link #isFinished()}).
   */
  void beginClose() {
    channel.close();
  }

  /** The worker's own accounting check ({@link WorkerAccounting#violation}): null if sound. */
  @Nullable String accountingViolation() {
    return WorkerAccounting.violation(worker);
  }

  /** Whether the worker has finished: its channel closed and drained, and nothing in flight. */
  boolean isFinished() {
    return worker.isFinished();
  }

  /** Whether {@link #close()} has shut the worker down. */
  boolean isRunning() {
    return !shutDown;
  }

  /**
   * Closes as {@code FabricService.close(timeout)} does: the channel closes with a deadline of
   * {@code timeout} from now (system time), the worker is stepped until it finishes, by itself or
   * at that deadline (then what is still posted fails as closed), and is shut down.
   */
  void close(Duration timeout) {
    channel.close(System.nanoTime() + timeout.toNanos());
    close();
  }

  /**
   * Closes as {@code FabricService.close()} does, within the configuration's close timeout: the
   * channel closes, the worker is stepped until every posted op completed or the timeout passed
   * (what is still posted then fails as closed), and is shut down (its endpoint closed); then the
   * checksum pool it made is closed. A worker not finished after {@link #MAX_WAIT_NS} of stepping
   * is shut down all the same.
   */
  @Override
  public void close() {
    if (shutDown) {
      return;
    }
    // The first close's deadline wins (the channel keeps it), as close(timeout) relies on.
    channel.close(System.nanoTime() + closeTimeout.toNanos());
    step();
    shutDown = true;
    long deadline = System.nanoTime() + MAX_WAIT_NS;
    while (!worker.isFinished() && System.nanoTime() - deadline < 0) {
      worker.doWork();
    }
    try {
      worker.shutDown(null);
    } finally {
      pool.close();
    }
  }
}
