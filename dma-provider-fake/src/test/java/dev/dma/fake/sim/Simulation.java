package dev.dma.fake.sim;

import dev.dma.api.Advertisement;
import dev.dma.api.BatchCompleter;
import dev.dma.api.CacheableSpan;
import dev.dma.api.Checksum;
import dev.dma.api.Checksums;
import dev.dma.api.Completion;
import dev.dma.api.DmaConfiguration;
import dev.dma.api.DmaException;
import dev.dma.api.MemoryKind;
import dev.dma.api.Operands;
import dev.dma.api.Outcome;
import dev.dma.api.RemoteAccess;
import dev.dma.api.TransferDone;
import dev.dma.api.TransferRequest;
import dev.dma.core.AsyncFabricService;
import dev.dma.core.ChecksumPool;
import dev.dma.core.DmaService;
import dev.dma.core.FabricProviders;
import dev.dma.core.FabricService;
import dev.dma.core.FabricServiceGroup;
import dev.dma.core.NanoClock;
import dev.dma.core.SteppedServices;
import dev.dma.core.internal.Commands;
import dev.dma.core.internal.FabricWorker;
import dev.dma.core.internal.Reply;
import dev.dma.core.internal.Telemetry;
import dev.dma.core.internal.WorkerAccounting;
import dev.dma.core.internal.WorkerChannel;
import dev.dma.core.internal.peers.BoundPeer;
import dev.dma.core.internal.peers.PeerTable;
import dev.dma.core.internal.regions.LocalRegions;
import dev.dma.core.internal.regions.RegionRegistry;
import dev.dma.fake.FakeEndpoint;
import dev.dma.fake.FakeFabric;
import dev.dma.fake.FakeScript;
import dev.dma.fake.FiErrno;
import dev.dma.fake.OpMatcher;
import dev.dma.spi.FabricEndpoint;
import dev.dma.spi.FabricProvider;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.jspecify.annotations.Nullable;

/**
 * Runs one {@link Schedule} against a real {@link FabricWorker} over the fake provider, on the
 * calling thread, and checks the invariants after every step and at the end. Nothing here starts a
 * thread or reads the system clock for anything the worker decides on: the worker's clock is a
 * manual one the steps move, its checksum pool is closed from the start (a closed pool runs each
 * job on the submitting thread, here the worker's), and the fake is deterministic, so a schedule
 * replays pass for pass.
 *
 * <p>Threads: one; a simulation is used once ({@link #run}).
 */
final class Simulation implements BatchCompleter<Simulation.Transfer> {
  private static final AtomicInteger FABRICS = new AtomicInteger();
  // Each target exposes this much; transfers take disjoint ranges of it, so a transfer's bytes are
  // its own to check.
  private static final int TARGET_BYTES = 1 << 20;
  private static final byte TARGET_FILL = 0x5a;
  private static final long FLUSH_GRACE_MS = 1000;
  // Passes after every step: the worker's coarse clock is read every 64 passes.
  private static final int PASSES_PER_STEP = 6;
  private static final int QUIET_PASSES = 160;
  // Errnos the worker maps (CompletionErrors, Failures), for error completions and refusals.
  private static final int[] ERRNOS = {
    FiErrno.EIO,
    FiErrno.EACCES,
    FiErrno.ECONNABORTED,
    FiErrno.ECONNRESET,
    FiErrno.ENOTCONN,
    FiErrno.ETIMEDOUT,
    FiErrno.ECONNREFUSED,
    FiErrno.EHOSTUNREACH,
    FiErrno.ECANCELED,
    FiErrno.ENOMEM,
    FiErrno.EINVAL,
    FiErrno.ENOENT,
    FiErrno.EOTHER,
    FiErrno.ENOKEY,
    FiErrno.ENORX
  };

  private final Schedule schedule;
  private final List<String> violations = new ArrayList<>();
  private final List<Transfer> transfers = new ArrayList<>();
  private final ManualClock clock = new ManualClock();
  private FakeFabric fabric;
  private Arena arena;
  private Target[] targets;
  private BoundPeer[] peers;
  private WorkerChannel channel;
  private FabricWorker<Transfer> worker;
  private ChecksumPool pool;
  private final AtomicLong outstanding = new AtomicLong();
  private int stepIndex;
  // The cached span's memory, and how much of it writes took.
  private MemorySegment cache;
  private long cacheUsed;
  private boolean closed;
  private int completerThrows; // 0 none, 1 RuntimeException, 2 Error
  private long slowCompleterNs;
  private long nextId;
  private long fingerprint = 17;
  // Every front: the workers stepped and the channels commands go on (one each for WORKER).
  private final List<FabricWorker<?>> workers = new ArrayList<>();
  private final List<WorkerChannel> channels = new ArrayList<>();
  // A group's off-thread striped completions and the async API's future completions, run in order
  // after each pass, as the pool threads and the executor would run them.
  private final ArrayDeque<Runnable> deferred = new ArrayDeque<>();
  private @Nullable FabricServiceGroup<Transfer> group;
  private @Nullable AsyncFabricService<Transfer> async;

  private Simulation(Schedule schedule) {
    this.schedule = schedule;
  }

  /**
   * Runs {@code schedule} and answers what it violated, empty when nothing.
   *
   * @param schedule the schedule
   * @return the violations, each naming the step it was found after
   */
  static List<String> run(Schedule schedule) {
    return runTraced(schedule).violations();
  }

  /**
   * What one run found, and a fingerprint of what happened in it (every completion in delivery
   * order, with its outcome, the step it came in and the simulated time), for a replay to compare.
   *
   * @param violations what it violated, empty when nothing
   * @param fingerprint a hash of the run's completions
   */
  record Result(List<String> violations, long fingerprint) {}

  /**
   * Runs {@code schedule} and answers what it violated and its fingerprint.
   *
   * @param schedule the schedule
   * @return the result
   */
  static Result runTraced(Schedule schedule) {
    Simulation simulation = new Simulation(schedule);
    try {
      simulation.execute();
    } catch (Throwable unexpected) {
      StringBuilder where = new StringBuilder("threw " + unexpected);
      StackTraceElement[] frames = unexpected.getStackTrace();
      for (int i = 0; i < Math.min(6, frames.length); i++) {
        where.append(i == 0 ? " at " : " < ").append(frames[i]);
      }
      simulation.violation(where.toString());
    } finally {
      simulation.tearDown();
    }
    return new Result(simulation.violations, simulation.fingerprint);
  }

  private void execute() {
    setUp();
    List<Schedule.Step> steps = schedule.steps();
    for (stepIndex = 0; stepIndex < steps.size(); stepIndex++) {
      perform(steps.get(stepIndex));
      check();
      if (!violations.isEmpty()) {
        return;
      }
    }
    stepIndex = steps.size();
    finish();
  }

  // ------------------------------------------------------------------------------------ set-up

  private void setUp() {
    Schedule.Setup setup = schedule.setup();
    Schedule.Front front = setup.front();
    fabric = FakeFabric.create("sim-" + FABRICS.incrementAndGet());
    FakeScript script = fabric.script();
    switch (setup.flavor()) {
      case EFA -> script.efaAddresses(true);
      case EFA_DIRECT -> script.likeEfaDirect();
      case FAKE -> {}
    }
    if (setup.maxTx() > 0) {
      script.maxTx(setup.maxTx());
    }
    script.completesInPostOrder(setup.inPostOrder());
    arena = Arena.ofConfined();
    cache = arena.allocate(1 << 17, 4096);
    targets = new Target[setup.targets() + 1];
    peers = new BoundPeer[setup.targets() + 1];
    for (int client = 1; client <= setup.targets(); client++) {
      targets[client] = new Target(fabric, arena);
    }
    DmaConfiguration configuration =
        DmaConfiguration.builder()
            .providers("fake")
            .interfaces(List.of(fabric.name()))
            .maxInFlight(setup.maxInFlight())
            .progressDeadline(Duration.ofMillis(setup.progressMs()))
            .completionDeadline(Duration.ofMillis(setup.completionMs()))
            .build();
    // A closed pool runs every checksum job on the thread that submits it: the worker's, here.
    pool = new ChecksumPool(1, Duration.ofSeconds(1));
    pool.close();
    if (front != Schedule.Front.WORKER) {
      setUpServices(configuration, front);
      return;
    }
    FabricProvider provider = FabricProviders.select(configuration);
    DmaConfiguration resolved = FabricProviders.resolve(configuration, provider);
    channel = new WorkerChannel(1 << 12);
    channel.bind(Thread.currentThread());
    FabricEndpoint endpoint = provider.open(resolved);
    AtomicReference<byte[]> address = new AtomicReference<>(endpoint.localAddress());
    worker =
        new FabricWorker<>(
            endpoint,
            new LocalRegions(endpoint, RegionRegistry.global(), resolved.maxPinnedBytes()),
            new PeerTable(endpoint),
            channel,
            this,
            pool,
            outstanding,
            clock,
            resolved.maxInFlight(),
            resolved.progressDeadline(),
            resolved.completionDeadline(),
            address::set,
            Telemetry.OFF);
    workers.add(worker);
    channels.add(channel);
  }

  /**
   * The public services, built stepped (SteppedServices): their workers come here unstarted, the
   * group's device choice draws from the seed, and what they would run on other threads is queued
   * in {@link #deferred}.
   */
  private void setUpServices(DmaConfiguration base, Schedule.Front front) {
    Schedule.Group shape = schedule.setup().group();
    boolean grouped = front == Schedule.Front.GROUP || front == Schedule.Front.ASYNC_GROUP;
    DmaConfiguration configuration =
        base.toBuilder()
            .interfaces(java.util.Collections.nCopies(grouped ? shape.devices() : 1, fabric.name()))
            .build();
    java.util.SplittableRandom choice = new java.util.SplittableRandom(schedule.seed());
    if (front == Schedule.Front.GROUP) {
      group =
          SteppedServices.stepped(
                  FabricServiceGroup.<Transfer>builder(configuration)
                      .completer(this)
                      .checksumPool(pool)
                      .clock(clock)
                      .stripeThresholdBytes(shape.stripeThresholdBytes())
                      .stripeChunks(shape.stripeChunks()),
                  workers::add,
                  deferred::add,
                  choice)
              .start();
      channels.addAll(SteppedServices.channels(group));
    } else {
      AsyncFabricService.Builder<Transfer> builder =
          AsyncFabricService.<Transfer>builder(configuration)
              .executor(deferred::add)
              .checksumPool(pool)
              .clock(clock);
      if (grouped) {
        builder
            .group()
            .stripeThresholdBytes(shape.stripeThresholdBytes())
            .stripeChunks(shape.stripeChunks());
      }
      async = SteppedServices.stepped(builder, workers::add, deferred::add, choice).start();
      channels.addAll(SteppedServices.channels(async));
    }
  }

  private void tearDown() {
    try {
      if (!closed) {
        for (WorkerChannel each : channels) {
          each.close(System.nanoTime() - 1);
        }
      }
      for (FabricWorker<?> each : workers) {
        for (int pass = 0; pass < 10_000 && !each.isFinished(); pass++) {
          each.doWork();
        }
        each.shutDown(null);
      }
      runDeferred();
    } catch (Throwable ignored) {
      // Already reported through the invariants, or irrelevant once the schedule failed.
    } finally {
      for (Transfer transfer : transfers) {
        if (transfer.ownArena != null && transfer.ownArena.scope().isAlive()) {
          transfer.ownArena.close();
        }
      }
      if (fabric != null) {
        fabric.close();
      }
      if (arena != null) {
        // The registry is process-wide: the span's memory is freed below, so it is forgotten first.
        FabricService.invalidate(cache.address(), cache.address() + cache.byteSize());
        arena.close();
      }
    }
  }

  // ------------------------------------------------------------------------------------- steps

  private void perform(Schedule.Step step) {
    FakeScript script = fabric.script();
    int client = step.a();
    Target target = targets[client];
    int errno = ERRNOS[step.c() % ERRNOS.length];
    switch (step.kind()) {
      case WRITE -> submit(client, true, false, step);
      case READ -> submit(client, false, false, step);
      case WRITE_BY_PEER -> submit(client, true, true, step);
      case READ_BY_PEER -> submit(client, false, true, step);
      case OUT_OF_BOUNDS -> submitOutOfBounds(client, step);
      case THROWING_OPERAND -> submitThrowing(client, step);
      case ADD_PEER -> addPeer(client);
      case REMOVE_PEER -> {
        if (command(() -> new Commands.RemovePeer(client))) {
          peers[client] = null;
        }
      }
      case RESTART_CLIENT -> {
        // The client comes back under its id at a new address: a new endpoint and region.
        target.endpoint.close();
        targets[client] = new Target(fabric, arena);
        peers[client] = null;
        addPeer(client);
      }
      case CACHED_WRITE -> submitCached(client, step);
      case INVALIDATE -> {
        // Legal at any time (CacheableSpan: rewriting needs none, unmapping needs one first).
        FabricService.invalidate(cache.address(), cache.address() + cache.byteSize());
      }
      case PIN -> {
        MemorySegment pinned = arena.allocate(4096, 4096);
        command(
            () ->
                new Commands.Pin(
                    pinned.address(), pinned.byteSize(), MemoryKind.HOST, new Reply<>()));
      }
      case AGAIN -> script.againTimes(1 + step.b() * 3);
      case FAIL_NEXT_OPS -> script.failNextOps(1 + step.b() % 2, errno, -errno, "simulated");
      case HOLD -> script.holdCompletions();
      case RELEASE -> {
        script.stopHolding();
        script.releaseCompletions();
      }
      case RELEASE_REVERSED -> {
        script.stopHolding();
        script.releaseCompletionsReversed();
      }
      case LOSE_NEXT -> script.loseCompletions(OpMatcher.nth(fabric.counters().posts() + 1));
      case FAIL_CQ_READ -> script.failNextCqRead(step.b() % 3, errno);
      case UNREACHABLE -> script.unreachable(target.endpoint.localAddress());
      case REACHABLE -> script.reachable(target.endpoint.localAddress());
      case SILENT -> script.holdCompletions(OpMatcher.toPeer(target.endpoint.localAddress()));
      case FLUSH_ON_REMOVE -> script.flushOnRemove((step.b() & 1) == 0);
      case FAIL_INSERTS -> script.failNextInserts(1 + step.b() % 2, errno);
      case FAIL_REGISTRATIONS -> script.failNextRegistrations(1 + step.b() % 2, FiErrno.ENOMEM);
      case COMPLETER_THROWS -> completerThrows = 1 + (step.b() & 1);
      case SLOW_COMPLETER -> slowCompleterNs = (step.c() % 2000) * 1_000_000L;
      case ADVANCE -> {
        clock.advance(advanceNs(step.c()));
        passes(QUIET_PASSES);
      }
      case PASSES -> passes(1 + step.c() % 200);
      case CLOSE -> {
        // A close that waits for what is posted (its timeout is the system clock's, which the
        // simulation does not move: the end's close with no time left stands for it passing).
        // On a service front every device's channel, as the public close does first: its
        // deadline is the system clock's too, so the public close itself runs at the end, once the
        // workers finished (SteppedServices: a stepped close joins nothing).
        for (WorkerChannel each : channels) {
          each.close();
        }
        closed = true;
      }
      case CLOSE_NOW -> close(System.nanoTime() - 1);
      case FAIL_DEVICE -> {
        byte[] device = deviceAddress(client);
        if (device != null) {
          script.failOp(OpMatcher.fromInitiator(device), errno, -errno, "simulated dead rail");
        }
      }
      case STALL_DEVICE -> {
        byte[] device = deviceAddress(client);
        if (device != null) {
          script.holdCompletions(OpMatcher.fromInitiator(device));
        }
      }
    }
    passes(PASSES_PER_STEP);
  }

  // Up to twice the longest deadline, so some advances pass every deadline and some none.
  private long advanceNs(int draw) {
    Schedule.Setup setup = schedule.setup();
    long span = 2L * Math.max(setup.progressMs(), setup.completionMs()) + 1;
    return (draw % span) * 1_000_000L + draw;
  }

  private void close(long deadlineNanos) {
    for (WorkerChannel each : channels) {
      each.close(deadlineNanos);
    }
    closed = true;
  }

  private void passes(int count) {
    for (int i = 0; i < count; i++) {
      for (FabricWorker<?> each : workers) {
        each.doWork();
      }
      runDeferred();
    }
  }

  private void runDeferred() {
    for (Runnable job = deferred.poll(); job != null; job = deferred.poll()) {
      try {
        job.run();
      } catch (Throwable thrown) {
        // As the pool or delivery thread would: the completer's Error ends that job only.
      }
    }
  }

  // A device's address (device a % devices); null on a front of one device.
  private byte @Nullable [] deviceAddress(int draw) {
    List<byte[]> addresses =
        group != null ? group.localAddresses() : async != null ? async.localAddresses() : List.of();
    return addresses.size() > 1 ? addresses.get(draw % addresses.size()) : null;
  }

  // A command on every device's channel, as the group's addPeer and removePeer send it, without
  // waiting for the answers (only this thread runs the workers).
  private boolean command(java.util.function.Supplier<Object> command) {
    boolean all = true;
    for (WorkerChannel each : channels) {
      all &= each.offer(command.get());
    }
    return all;
  }

  private void addPeer(int client) {
    BoundPeer peer = new BoundPeer(client, targets[client].endpoint.localAddress());
    if (command(() -> new Commands.AddPeer(peer, new Reply<>()))) {
      peers[client] = peer;
    }
  }

  private void submit(int client, boolean write, boolean byPeer, Schedule.Step step) {
    Target target = targets[client];
    int size = Schedule.SIZES[step.b()];
    long offset = target.take(size);
    if (offset < 0) {
      return; // this target's memory is used up: the step does nothing
    }
    Transfer transfer = newTransfer(client, write, size, target, offset, Mode.PLAIN);
    byte fill = (byte) (transfer.id * 7 + 1);
    if (write) {
      transfer.local.fill(fill);
      transfer.expectedCrc = Checksums.crc32c(transfer.local);
    } else {
      target.memory.asSlice(offset, size).fill(fill);
      transfer.expectedCrc = Checksums.crc32c(target.memory.asSlice(offset, size));
    }
    BoundPeer peer = peers[client];
    TransferRequest<Transfer> request;
    if (byPeer && peer != null) {
      request =
          write
              ? TransferRequest.write(peer, target.ad, transfer)
              : TransferRequest.read(peer, target.ad, size, transfer);
    } else {
      request =
          write
              ? TransferRequest.write(client, target.ad, transfer)
              : TransferRequest.read(client, target.ad, size, transfer);
    }
    request = at(request, offset);
    if (schedule.setup().checksums() && (step.c() & 1) == 0) {
      request = request.withChecksum(Checksum.CRC32C);
      transfer.checksummed = true;
    }
    offer(transfer, request);
  }

  // A write from a slice of one cached span (registered once, shared by every write inside it).
  private void submitCached(int client, Schedule.Step step) {
    Target target = targets[client];
    int size = Schedule.SIZES[step.b()];
    long start = (cacheUsed + 63) & ~63L;
    long offset = start + size <= cache.byteSize() ? target.take(size) : -1;
    if (offset < 0) {
      return;
    }
    cacheUsed = start + size;
    MemorySegment local = cache.asSlice(start, size);
    Transfer transfer =
        new Transfer(
            nextId++, client, true, size, target, offset, local, null, Mode.PLAIN, clock.now);
    transfer.span = CacheableSpan.of(cache);
    transfers.add(transfer);
    local.fill((byte) (transfer.id * 7 + 1));
    transfer.expectedCrc = Checksums.crc32c(local);
    offer(transfer, at(TransferRequest.write(client, target.ad, transfer), offset));
  }

  private void submitOutOfBounds(int client, Schedule.Step step) {
    Target target = targets[client];
    int size = Schedule.SIZES[step.b()];
    Transfer transfer = newTransfer(client, true, size, target, -1, Mode.OUT_OF_BOUNDS);
    transfer.local.fill((byte) 3);
    TransferRequest<Transfer> request =
        at(
            TransferRequest.write(client, target.ad, transfer),
            TARGET_BYTES - size + 1 + step.c() % 64);
    offer(transfer, request);
  }

  private void submitThrowing(int client, Schedule.Step step) {
    Target target = targets[client];
    int size = Schedule.SIZES[step.b()];
    long offset = target.take(size);
    if (offset < 0) {
      return;
    }
    Mode[] modes = {
      Mode.SOURCE_RUNTIME, Mode.SOURCE_ERROR,
      Mode.ALLOCATE_RUNTIME, Mode.ALLOCATE_ERROR,
      Mode.SPAN_RUNTIME, Mode.SPAN_ERROR
    };
    Mode mode = modes[step.c() % modes.length];
    boolean write = mode != Mode.ALLOCATE_RUNTIME && mode != Mode.ALLOCATE_ERROR;
    Transfer transfer = newTransfer(client, write, size, target, offset, mode);
    transfer.local.fill((byte) 9);
    transfer.expectedCrc =
        write
            ? Checksums.crc32c(transfer.local)
            : Checksums.crc32c(target.memory.asSlice(offset, size));
    TransferRequest<Transfer> request =
        (write
            ? TransferRequest.write(client, target.ad, transfer)
            : TransferRequest.read(client, target.ad, size, transfer));
    request = at(request, offset);
    offer(transfer, request);
  }

  // The request moved {@code offset} bytes into its region, the region's bounds kept.
  private static TransferRequest<Transfer> at(TransferRequest<Transfer> request, long offset) {
    return new TransferRequest<>(
        request.clientId(),
        request.peerAddress(),
        request.remoteKey(),
        request.remoteAddress() + offset,
        request.direction(),
        request.checksum(),
        request.context(),
        request.remoteBase(),
        request.remoteLength(),
        request.retryWrite(),
        request.peer());
  }

  private Transfer newTransfer(
      int client, boolean write, int size, Target target, long offset, Mode mode) {
    Arena own = schedule.setup().watch() ? Arena.ofShared() : null;
    MemorySegment local = (own != null ? own : arena).allocate(size, 8);
    if (own != null) {
      fabric.watchOperand(local);
    }
    Transfer transfer =
        new Transfer(nextId++, client, write, size, target, offset, local, own, mode, clock.now);
    transfers.add(transfer);
    return transfer;
  }

  private void offer(Transfer transfer, TransferRequest<Transfer> request) {
    if (group != null) {
      try {
        transfer.accepted = group.offer(request) == DmaService.Offer.ACCEPTED;
      } catch (Throwable thrown) {
        // The group's offer must fail only the transfer, never throw the caller's Error back.
        violation("the group's offer of " + transfer + " threw " + thrown);
      }
      return;
    }
    if (async != null) {
      java.util.concurrent.CompletableFuture<Completion<Transfer>> future;
      try {
        future = async.transfer(request);
      } catch (Throwable thrown) {
        violation("the async transfer of " + transfer + " threw " + thrown);
        return;
      }
      // Its executor queues: an accepted transfer's future cannot be done yet; a refused one's is.
      transfer.accepted = !future.isDone();
      future.whenComplete((done, failed) -> asyncDone(transfer, done, failed));
      return;
    }
    // As FabricService.submit counts it: raised before the offer, given back when refused.
    outstanding.incrementAndGet();
    if (channel.offer(request)) {
      transfer.accepted = true;
    } else {
      outstanding.decrementAndGet();
    }
  }

  // ----------------------------------------------------------------------------- the completer

  @Override
  public void complete(List<Completion<Transfer>> batch) {
    for (Completion<Transfer> completion : batch) {
      record(completion);
    }
    if (slowCompleterNs > 0) {
      // A slow completer: the worker's clock moves on while it holds the worker.
      clock.advance(slowCompleterNs);
      slowCompleterNs = 0;
    }
    int throwing = completerThrows;
    completerThrows = 0;
    if (throwing == 1) {
      throw new IllegalStateException("the simulated completer throws");
    } else if (throwing == 2) {
      throw new AssertionError("the simulated completer throws an Error");
    }
  }

  private void asyncDone(
      Transfer transfer, @Nullable Completion<Transfer> done, @Nullable Throwable failed) {
    if (!transfer.accepted) {
      return; // the refusal's already-failed future
    }
    if (done != null) {
      record(done);
    } else {
      Throwable cause =
          failed instanceof java.util.concurrent.CompletionException wrapped
                  && wrapped.getCause() != null
              ? wrapped.getCause()
              : failed;
      if (cause instanceof DmaException error) {
        // A failed future carries no counts: posts -1, not checked.
        record(transfer, Outcome.failed(error), -1, 1, 1);
      } else {
        violation("transfer " + transfer + "'s future failed with " + cause);
      }
    }
  }

  private void record(Completion<Transfer> completion) {
    record(
        completion.context(),
        completion.outcome(),
        completion.posts(),
        completion.chunks(),
        completion.devices());
  }

  private void record(Transfer transfer, Outcome outcome, int posts, int chunks, int devices) {
    transfer.completions++;
    if (transfer.completions > 1) {
      violation("transfer " + transfer + " completed " + transfer.completions + " times");
      return;
    }
    if (!transfer.accepted) {
      violation("refused transfer " + transfer + " completed");
    }
    if (transfer.write && !schedule.setup().inPostOrder() && posts > chunks) {
      // Op.mayPostAgain: a write is posted again only after a connection-level error and when its
      // request allows it (none here does), never after a reset, except on an endpoint that
      // completes in post order; a group never moves a posted write to another device.
      violation("write " + transfer + " was posted " + posts + " times in " + chunks + " chunks");
    }
    checkCounts(transfer, outcome, posts, chunks, devices);
    transfer.outcome = outcome;
    fingerprint =
        31 * (31 * (31 * fingerprint + transfer.id) + stepIndex)
            + clock.now
            + (outcome.isDone() ? 1 : outcome.error().reason().ordinal() + 2);
    if (outcome instanceof TransferDone done) {
      if (transfer.mode != Mode.PLAIN
          && transfer.mode != Mode.SPAN_RUNTIME
          && transfer.mode != Mode.SPAN_ERROR) {
        violation("transfer " + transfer + " succeeded though its " + transfer.mode);
      } else {
        checkLanded(transfer, done);
      }
    } else if (transfer.write && transfer.offset >= 0) {
      DmaException error = outcome.error();
      if (error.targetMemory() == DmaException.TargetMemory.UNCHANGED
          && !unchanged(transfer.target.memory.asSlice(transfer.offset, transfer.size))) {
        violation("write " + transfer + " failed as UNCHANGED, but its target changed: " + error);
      }
    }
    if (transfer.ownArena != null) {
      // The completion is delivered: from now on the fake reports any touch of the operand.
      transfer.ownArena.close();
    }
  }

  /**
   * Completion.posts, chunks and devices agree with each other and with the set-up: more than one
   * chunk only for a striped size on a group, never more chunks than the group cuts, a success
   * posted every chunk on at least one device, no more devices than posts or than the group has; a
   * transfer refused before posting (out of bounds) posted nothing and left its target as it was.
   */
  private void checkCounts(Transfer transfer, Outcome outcome, int posts, int chunks, int devices) {
    String counts = " (posts " + posts + ", chunks " + chunks + ", devices " + devices + ")";
    if (transfer.mode == Mode.OUT_OF_BOUNDS) {
      if (posts > 0) {
        violation("out-of-bounds " + transfer + " was posted" + counts);
      }
      if (!outcome.isDone()
          && outcome.error().targetMemory() != DmaException.TargetMemory.UNCHANGED) {
        violation(
            "out-of-bounds " + transfer + " failed as " + outcome.error().targetMemory() + counts);
      }
    }
    if (posts < 0) {
      return; // an async failure: the future carries no counts
    }
    Schedule.Group shape = schedule.setup().group();
    int deviceCount = group != null || async != null ? Math.max(1, channels.size()) : 1;
    int maxChunks =
        shape.stripeThresholdBytes() > 0 && transfer.size >= shape.stripeThresholdBytes()
            ? (shape.stripeChunks() > 0 ? shape.stripeChunks() : deviceCount)
            : 1;
    if (chunks < 1 || chunks > maxChunks) {
      violation(
          "transfer " + transfer + " has " + chunks + " chunks, at most " + maxChunks + counts);
    }
    if (devices < 0 || devices > deviceCount || (posts > 0 && devices > posts)) {
      violation("transfer " + transfer + " reports " + devices + " devices" + counts);
    }
    if (outcome.isDone() && (posts < chunks || devices < 1)) {
      violation("transfer " + transfer + " succeeded with too few posts or devices" + counts);
    }
  }

  private void checkLanded(Transfer transfer, TransferDone done) {
    int target = Checksums.crc32c(transfer.target.memory.asSlice(transfer.offset, transfer.size));
    int local = Checksums.crc32c(transfer.local);
    if (target != transfer.expectedCrc || local != transfer.expectedCrc) {
      violation(
          (transfer.write ? "write " : "read ")
              + transfer
              + " succeeded but the bytes differ (target "
              + Integer.toHexString(target)
              + ", local "
              + Integer.toHexString(local)
              + ", expected "
              + Integer.toHexString(transfer.expectedCrc)
              + ")");
    }
    if (done.bytes() != transfer.size) {
      violation("transfer " + transfer + " reports " + done.bytes() + " bytes");
    }
    if (transfer.checksummed
        && (done.checksum().isEmpty() || done.checksum().getAsInt() != transfer.expectedCrc)) {
      violation("transfer " + transfer + " has checksum " + done.checksum());
    }
  }

  private static boolean unchanged(MemorySegment range) {
    for (long i = 0; i < range.byteSize(); i += 8) {
      long left = Math.min(8, range.byteSize() - i);
      for (long j = 0; j < left; j++) {
        if (range.get(java.lang.foreign.ValueLayout.JAVA_BYTE, i + j) != TARGET_FILL) {
          return false;
        }
      }
    }
    return true;
  }

  // ------------------------------------------------------------------------------ invariants

  private void check() {
    for (FabricWorker<?> each : workers) {
      String accounting = WorkerAccounting.violation(each);
      if (accounting != null) {
        violation("worker accounting: " + accounting);
      }
    }
    List<String> touched = fabric.operandViolations();
    if (!touched.isEmpty()) {
      violation("operand touched after its completion: " + touched.getFirst());
    }
    long open = 0;
    for (Transfer transfer : transfers) {
      if (transfer.accepted && transfer.completions == 0) {
        open++;
      }
    }
    // The worker gives a transfer's count back when it finishes the op, before its completion is
    // delivered, so outstanding() may trail the open transfers but never exceed them.
    if (group != null || async != null) {
      // A striped transfer holds room for each of its chunks, so only the empty case is exact.
      long held = outstandingNow();
      if (held < 0 || (open == 0 && held != 0)) {
        violation("the front's outstanding() is " + held + " with " + open + " transfers open");
      }
      return;
    }
    if (outstanding.get() > open || (open == 0 && outstanding.get() != 0)) {
      violation("outstanding() is " + outstanding.get() + " with " + open + " transfers open");
    }
  }

  private long outstandingNow() {
    return group != null
        ? group.outstanding()
        : async != null ? async.outstanding() : outstanding.get();
  }

  /**
   * The end: every fault cleared and every held completion released, the clock moved past every
   * deadline round by round, so that each transfer completes within its bound; then a close with no
   * time left, which must finish the worker and complete what a lost completion still holds.
   */
  private void finish() {
    FakeScript script = fabric.script();
    script.clearFaults();
    script.againTimes(0);
    script.stopHolding();
    script.releaseCompletions();
    for (Target target : targets) {
      if (target != null) {
        script.reachable(target.endpoint.localAddress());
      }
    }
    passes(QUIET_PASSES);
    Schedule.Setup setup = schedule.setup();
    if (setup.completionMs() > 0) {
      // Each round passes every deadline once; a transfer queued behind a full cap may wait for
      // the ones ahead of it, a cap at a time, and one refused behind its client's earlier ones
      // keeps its place in the queue until each of those is judged, a round each (a refused post
      // is judged only once its client has nothing in flight; failure-model.md, DEADLINE).
      // (CompletionDeadline: an op past the deadline waits up to FLUSH_GRACE_NS, one second, for
      // the flush its peer's removal brings before the reset.)
      long round = (setup.progressMs() + setup.completionMs() + FLUSH_GRACE_MS + 1) * 1_000_000L;
      int rounds =
          3
              + transfers.size() / Math.max(1, Math.min(setup.maxInFlight(), maxTx()))
              + longestClientQueue();
      for (int i = 0; i < rounds && openTransfers() > 0; i++) {
        clock.advance(round);
        passes(QUIET_PASSES);
      }
      if (openTransfers() > 0) {
        violation(openTransfers() + " transfers still open after " + rounds + " deadline rounds");
      }
    }
    check();
    closed = true;
    for (WorkerChannel each : channels) {
      each.close(System.nanoTime() - 1);
    }
    for (FabricWorker<?> each : workers) {
      for (int pass = 0; pass < 1000 && !each.isFinished(); pass++) {
        each.doWork();
      }
      if (!each.isFinished()) {
        violation("close with no time left did not finish the worker within 1000 passes");
      }
      each.shutDown(null);
    }
    if (group != null) {
      group.close(); // the public close after the channels' (its waits are the callers' only)
    } else if (async != null) {
      async.close();
    }
    runDeferred();
    stepIndex = schedule.steps().size() + 1;
    for (Transfer transfer : transfers) {
      if (transfer.accepted && transfer.completions != 1) {
        violation(
            "accepted transfer " + transfer + " completed " + transfer.completions + " times");
      } else if (!transfer.accepted && transfer.completions != 0) {
        violation("refused transfer " + transfer + " completed");
      }
    }
    if (outstandingNow() != 0) {
      violation("outstanding() is " + outstandingNow() + " after the close");
    }
    List<String> touched = fabric.operandViolations();
    if (!touched.isEmpty()) {
      violation("operand touched after its completion: " + touched.getFirst());
    }
  }

  /** The most transfers any one client id was sent (accepted), whatever its address. */
  private int longestClientQueue() {
    int[] perClient = new int[targets.length];
    int longest = 0;
    for (Transfer transfer : transfers) {
      if (transfer.accepted) {
        longest = Math.max(longest, ++perClient[transfer.client]);
      }
    }
    return longest;
  }

  private int maxTx() {
    int depth = schedule.setup().maxTx();
    return depth == 0 ? Integer.MAX_VALUE : depth;
  }

  private int openTransfers() {
    int open = 0;
    for (Transfer transfer : transfers) {
      if (transfer.accepted && transfer.completions == 0) {
        open++;
      }
    }
    return open;
  }

  private void violation(String text) {
    String where =
        stepIndex < schedule.steps().size()
            ? "after step " + stepIndex + " " + schedule.steps().get(stepIndex)
            : "at the end";
    violations.add(where + ": " + text);
  }

  // ------------------------------------------------------------------------------ the parts

  /** How a transfer's context behaves. */
  enum Mode {
    PLAIN,
    OUT_OF_BOUNDS,
    SOURCE_RUNTIME,
    SOURCE_ERROR,
    ALLOCATE_RUNTIME,
    ALLOCATE_ERROR,
    SPAN_RUNTIME,
    SPAN_ERROR
  }

  /** One target endpoint with the memory it exposes; a restarted client gets a new one. */
  private static final class Target {
    final FakeEndpoint endpoint;
    final MemorySegment memory;
    final Advertisement ad;
    private long used;

    Target(FakeFabric fabric, Arena arena) {
      endpoint = fabric.openEndpoint();
      memory = arena.allocate(TARGET_BYTES, 4096);
      memory.fill(TARGET_FILL);
      ad = endpoint.expose(memory, RemoteAccess.READ_WRITE).advertisement();
    }

    /** A fresh range of {@code size} bytes, or -1 once the memory is used up. */
    long take(int size) {
      long start = (used + 63) & ~63L;
      if (start + size > TARGET_BYTES) {
        return -1;
      }
      used = start + size;
      return start;
    }
  }

  /** One submitted transfer, its own context: what it was, and what came back. */
  static final class Transfer implements Operands {
    final long id;
    final int client;
    final boolean write;
    final int size;
    final Target target;
    final long offset;
    final MemorySegment local;
    final @Nullable Arena ownArena;
    final Mode mode;
    final long submittedNs;
    boolean accepted;
    boolean checksummed;
    @Nullable CacheableSpan span;
    int expectedCrc;
    int completions;
    @Nullable Outcome outcome;

    Transfer(
        long id,
        int client,
        boolean write,
        int size,
        Target target,
        long offset,
        MemorySegment local,
        @Nullable Arena ownArena,
        Mode mode,
        long submittedNs) {
      this.id = id;
      this.client = client;
      this.write = write;
      this.size = size;
      this.target = target;
      this.offset = offset;
      this.local = local;
      this.ownArena = ownArena;
      this.mode = mode;
      this.submittedNs = submittedNs;
    }

    @Override
    public @Nullable MemorySegment source() {
      return switch (mode) {
        case SOURCE_RUNTIME -> throw new IllegalStateException("simulated source() bug");
        case SOURCE_ERROR -> throw new OutOfMemoryError("simulated source() Error");
        default -> write ? local : null;
      };
    }

    @Override
    public @Nullable MemorySegment allocate(long lengthBytes) {
      return switch (mode) {
        case ALLOCATE_RUNTIME -> throw new IllegalStateException("simulated allocate() bug");
        case ALLOCATE_ERROR -> throw new OutOfMemoryError("simulated allocate() Error");
        default -> write ? null : local;
      };
    }

    @Override
    public @Nullable CacheableSpan cacheableSpan() {
      return switch (mode) {
        case SPAN_RUNTIME -> throw new IllegalStateException("simulated cacheableSpan() bug");
        case SPAN_ERROR -> throw new OutOfMemoryError("simulated cacheableSpan() Error");
        default -> span;
      };
    }

    @Override
    public String toString() {
      return "#"
          + id
          + (write ? " write " : " read ")
          + size
          + "B client "
          + client
          + (mode == Mode.PLAIN ? "" : " " + mode);
    }
  }

  /** The worker's clock: moved only by the steps (and a slow completer). */
  private static final class ManualClock implements NanoClock {
    long now;

    @Override
    public long nanoTime() {
      return now;
    }

    void advance(long nanos) {
      now += nanos;
    }
  }
}
