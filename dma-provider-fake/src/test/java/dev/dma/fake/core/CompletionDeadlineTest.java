package dev.dma.fake.core;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dma.api.Advertisement;
import dev.dma.api.BatchCompleter;
import dev.dma.api.Checksums;
import dev.dma.api.Completion;
import dev.dma.api.Direction;
import dev.dma.api.DmaConfiguration;
import dev.dma.api.DmaException;
import dev.dma.api.DmaException.Reason;
import dev.dma.api.RemoteAccess;
import dev.dma.api.TransferRequest;
import dev.dma.core.FabricService;
import dev.dma.fake.FakeEndpoint;
import dev.dma.fake.FakeFabric;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.BooleanSupplier;
import java.util.function.UnaryOperator;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Bounded lifetimes on the fake (issue "nothing waits forever"): the completion deadline and the
 * endpoint reset or flush behind it, dead peers failing fast, connection-level retries, the bounded
 * close, backpressure, and the backoff of a stuck worker. Two targets: {@code stuck}, whose
 * completions the script holds for ever, and {@code live}, which keeps serving.
 */
class CompletionDeadlineTest {
  private static final AtomicInteger FABRICS = new AtomicInteger();
  private static final Duration DEADLINE = Duration.ofSeconds(2);
  private static final long STUCK = 1;
  private static final long LIVE = 2;

  private FakeFabric fabric;
  private FakeEndpoint stuck;
  private FakeEndpoint live;
  private Arena arena;
  private MemorySegment stuckMemory;
  private MemorySegment liveMemory;
  private Advertisement stuckAd;
  private Advertisement liveAd;
  private final ManualTicker ticker = new ManualTicker();
  private final Recorder<Buffer> recorder = new Recorder<>();
  // Stepped on the test's thread (SteppedWorker), so no deadline assertion races a worker thread;
  // the tests of the service's own threads (close timeout, backpressure, idling) start one.
  private SteppedWorker<Buffer> service;
  private FabricService<Buffer> threaded;

  @BeforeEach
  void openFabric() {
    fabric = FakeFabric.create("deadline-test-" + FABRICS.incrementAndGet());
    stuck = fabric.openEndpoint();
    live = fabric.openEndpoint();
    arena = Arena.ofShared();
    stuckMemory = arena.allocate(1 << 16);
    liveMemory = arena.allocate(1 << 16);
    stuckAd = stuck.expose(stuckMemory, RemoteAccess.READ_WRITE).advertisement();
    liveAd = live.expose(liveMemory, RemoteAccess.READ_WRITE).advertisement();
  }

  @AfterEach
  void closeFabric() {
    if (service != null || threaded != null) {
      fabric.script().reset();
      fabric.script().releaseCompletions();
    }
    if (service != null) {
      service.close();
    }
    if (threaded != null) {
      threaded.close();
    }
    stuck.close();
    live.close();
    fabric.close();
    arena.close();
  }

  private DmaConfiguration configuration(UnaryOperator<DmaConfiguration.Builder> tweak) {
    return tweak
        .apply(
            DmaConfiguration.builder()
                .providers("fake")
                .interfaces(List.of(fabric.name()))
                .completionDeadline(DEADLINE))
        .build();
  }

  /** A worker stepped on the test's thread, its completions recorded. */
  private SteppedWorker<Buffer> start(UnaryOperator<DmaConfiguration.Builder> tweak) {
    service = SteppedWorker.start(configuration(tweak), recorder, ticker);
    recorder.steppedBy(service);
    return service;
  }

  /** A service with its own worker thread, for what only a running thread shows. */
  private FabricService<Buffer> startThreaded(UnaryOperator<DmaConfiguration.Builder> tweak) {
    return startThreaded(tweak, recorder);
  }

  private FabricService<Buffer> startThreaded(
      UnaryOperator<DmaConfiguration.Builder> tweak, BatchCompleter<Buffer> completer) {
    threaded =
        FabricService.<Buffer>builder(configuration(tweak))
            .completer(completer)
            .clock(ticker)
            .start();
    return threaded;
  }

  /** Holds every op whose target is the stuck endpoint; the live one completes at once. */
  private void holdStuck() {
    byte[] stuckAddress = stuck.localAddress();
    fabric.script().holdCompletions(op -> Arrays.equals(op.peer(), stuckAddress));
  }

  private Buffer pattern(long id, int size, int seed) {
    MemorySegment segment = arena.allocate(size);
    for (int i = 0; i < size; i++) {
      segment.set(ValueLayout.JAVA_BYTE, i, (byte) (seed + i * 13));
    }
    return new Buffer(id, segment);
  }

  private static TransferRequest<Buffer> write(long client, Advertisement ad, Buffer buffer) {
    return TransferRequest.write(client, ad, buffer);
  }

  private void waitUntil(BooleanSupplier condition) throws InterruptedException {
    if (service != null) {
      service.stepUntil(condition, "condition");
      return;
    }
    long deadline = System.nanoTime() + 30_000_000_000L;
    while (!condition.getAsBoolean()) {
      assertTrue(System.nanoTime() < deadline, "condition not met within 30 s");
      Thread.sleep(1);
    }
  }

  private static boolean allZero(MemorySegment memory) {
    for (long i = 0; i < memory.byteSize(); i++) {
      if (memory.get(ValueLayout.JAVA_BYTE, i) != 0) {
        return false;
      }
    }
    return true;
  }

  private static DmaException error(Completion<Buffer> completion) {
    assertFalse(completion.outcome().isDone(), "expected a failure");
    return completion.outcome().error();
  }

  // ------------------------------------------------------------------- deadline, by reset

  @Test
  void aHeldOpFailsAtTheDeadlineOnlyOnceTheResetMadeItsOperandSafe() throws Exception {
    start(builder -> builder);
    holdStuck();
    for (int i = 0; i < 3; i++) {
      assertTrue(service.submit(write(STUCK, stuckAd, pattern(i, 4096, i))));
    }
    waitUntil(() -> fabric.script().heldCompletions() == 3);
    // Not yet due: nothing fails, nothing is reset.
    ticker.advance(DEADLINE.minusMillis(1));
    assertNull(recorder.poll(200));
    assertEquals(0, fabric.counters().resets());

    // Deadlines are checked every deadline/16 (at most 100 ms) of the worker's clock.
    ticker.advance(Duration.ofMillis(101));
    List<Completion<Buffer>> failed = recorder.take(3);
    for (Completion<Buffer> completion : failed) {
      DmaException error = error(completion);
      assertEquals(Reason.DEADLINE, error.reason());
      assertTrue(error.getMessage().contains("completion deadline of 2s"), error.getMessage());
      assertTrue(error.getMessage().contains("client 1"), error.getMessage());
    }
    // Delivered only after the endpoint discarded the three ops: the provider can no longer move
    // their bytes, and a late release finds nothing.
    assertEquals(1, fabric.counters().resets());
    assertEquals(3, fabric.counters().opsDiscardedByReset());
    assertEquals(0, fabric.script().releaseCompletions());
    assertTrue(allZero(stuckMemory), "a discarded write landed");
    assertEquals(0, fabric.counters().bytesWritten());
    assertEquals(0, fabric.counters().violations(), fabric.counters().lastViolation());
    assertEquals(0, service.outstanding());
  }

  @Test
  void otherClientsKeepCompletingAcrossTheResetWithTheirBytes() throws Exception {
    start(builder -> builder);
    holdStuck();
    assertTrue(service.submit(write(STUCK, stuckAd, pattern(100, 512, 1))));
    waitUntil(() -> fabric.script().heldCompletions() == 1);
    Buffer before = pattern(1, 1024, 3);
    assertTrue(service.submit(write(LIVE, liveAd, before)));
    assertTrue(recorder.take().outcome().isDone());

    ticker.advance(DEADLINE.plusMillis(1));
    assertEquals(Reason.DEADLINE, error(recorder.take()).reason());

    // The live client's peer was inserted again on the new endpoint; its bytes arrive.
    Buffer after = pattern(2, 1024, 9);
    assertTrue(service.submit(write(LIVE, liveAd, after)));
    Completion<Buffer> done = recorder.take();
    assertTrue(done.outcome().isDone(), () -> done.outcome().error().toString());
    assertEquals(Checksums.crc32c(after.segment), Checksums.crc32c(liveMemory.asSlice(0, 1024)));
    assertEquals(1, fabric.counters().resets());
    assertEquals(0, fabric.counters().violations(), fabric.counters().lastViolation());
  }

  @Test
  void writesOfHealthyClientsCaughtInTheResetFailSayingTheyMayHaveLanded() throws Exception {
    start(builder -> builder);
    holdStuck();
    assertTrue(service.submit(write(STUCK, stuckAd, pattern(100, 512, 1))));
    waitUntil(() -> fabric.script().heldCompletions() == 1);
    service.advanceAndRead(ticker, Duration.ofSeconds(1));
    // Hold the live client's op too, posted a second later, so the reset catches it in flight
    // before its own deadline.
    fabric.script().holdCompletions();
    Buffer caught = pattern(7, 2048, 5);
    assertTrue(service.submit(write(LIVE, liveAd, caught)));
    waitUntil(() -> fabric.script().heldCompletions() == 2);
    fabric.script().stopHolding();
    holdStuck();

    ticker.advance(Duration.ofMillis(1_101));
    List<Completion<Buffer>> both = recorder.take(2);
    // A write caught by the reset is not posted again: the old connection may still deliver it
    // after a repost had succeeded. It fails, saying it may have landed.
    Completion<Buffer> notRetried =
        both.stream().filter(c -> c.context().id == 7).findFirst().orElseThrow();
    DmaException reset = error(notRetried);
    assertEquals(Reason.ENDPOINT_RESET, reset.reason());
    assertEquals(DmaException.TargetMemory.MAY_HAVE_CHANGED, reset.targetMemory());
    assertEquals(1, notRetried.posts());
    assertEquals(1, fabric.counters().resets());
  }

  @Test
  void readsOfHealthyClientsCaughtInTheResetArePostedAgainAndSucceed() throws Exception {
    start(builder -> builder);
    holdStuck();
    assertTrue(service.submit(write(STUCK, stuckAd, pattern(100, 512, 1))));
    waitUntil(() -> fabric.script().heldCompletions() == 1);
    service.advanceAndRead(ticker, Duration.ofSeconds(1));
    liveMemory.asSlice(0, 2048).fill((byte) 0x3C);
    fabric.script().holdCompletions();
    Buffer landing = new Buffer(7, arena.allocate(2048));
    assertTrue(service.submit(TransferRequest.read(LIVE, liveAd, 2048, landing)));
    waitUntil(() -> fabric.script().heldCompletions() == 2);
    fabric.script().stopHolding();
    holdStuck();

    ticker.advance(Duration.ofMillis(1_101));
    List<Completion<Buffer>> both = recorder.take(2);
    Completion<Buffer> retried =
        both.stream().filter(c -> c.context().id == 7).findFirst().orElseThrow();
    assertTrue(retried.outcome().isDone(), () -> retried.outcome().error().toString());
    assertEquals(2, retried.posts());
    assertEquals(Checksums.crc32c(liveMemory.asSlice(0, 2048)), Checksums.crc32c(landing.segment));
    assertEquals(1, fabric.counters().resets());
  }

  // ------------------------------------------------------------------- deadline, by flush

  @Test
  void whereRemovalFlushesTheDeadlineFailsOpsThroughTheFlushWithoutAReset() throws Exception {
    // Before the start: the worker reads what the endpoint declares once, as it starts.
    fabric.script().flushOnRemove(true);
    start(builder -> builder);
    holdStuck();
    for (int i = 0; i < 3; i++) {
      assertTrue(service.submit(write(STUCK, stuckAd, pattern(i, 256, i))));
    }
    waitUntil(() -> fabric.script().heldCompletions() == 3);
    ticker.advance(DEADLINE.plusMillis(1));
    for (Completion<Buffer> completion : recorder.take(3)) {
      assertEquals(Reason.DEADLINE, error(completion).reason());
    }
    assertEquals(0, fabric.counters().resets());
    assertEquals(3, fabric.counters().flushedOps());
    assertTrue(allZero(stuckMemory));
  }

  @Test
  void aFlushThatNeverComesFallsBackToTheResetAfterItsGrace() throws Exception {
    // Before the start: the worker reads what the endpoint declares once, as it starts.
    fabric.script().flushOnRemove(true);
    start(builder -> builder);
    holdStuck();
    // A second client shares the stuck peer's entry, so releasing the first removes nothing and
    // no flush comes.
    service.addPeer(3, stuckAd.address());
    assertTrue(service.submit(write(STUCK, stuckAd, pattern(1, 256, 1))));
    waitUntil(() -> fabric.script().heldCompletions() == 1);
    ticker.advance(DEADLINE.plusMillis(1));
    assertNull(recorder.poll(300), "delivered before the provider let go of the operand");
    ticker.advance(Duration.ofMillis(1_001));
    assertEquals(Reason.DEADLINE, error(recorder.take()).reason());
    assertEquals(1, fabric.counters().resets());
    assertEquals(0, fabric.counters().flushedOps());
  }

  // ------------------------------------------------------------------------ dead peers

  @Test
  void aDeadPeersQueuedAndNewTransfersFailAtOnceUntilItIsAddedAgain() throws Exception {
    start(builder -> builder.maxInFlight(2));
    holdStuck();
    for (int i = 0; i < 5; i++) {
      assertTrue(service.submit(write(STUCK, stuckAd, pattern(i, 128, i))));
    }
    waitUntil(() -> fabric.script().heldCompletions() == 2);
    ticker.advance(DEADLINE.plusMillis(1));
    List<Completion<Buffer>> failed = recorder.take(5);
    long deadlines = failed.stream().filter(c -> error(c).reason() == Reason.DEADLINE).count();
    long unreachable =
        failed.stream().filter(c -> error(c).reason() == Reason.PEER_UNREACHABLE).count();
    assertEquals(2, deadlines);
    assertEquals(3, unreachable);

    // New transfers fail at intake, without waiting for any deadline (the clock stands still).
    assertTrue(service.submit(write(STUCK, stuckAd, pattern(9, 128, 9))));
    DmaException fast = error(recorder.take());
    assertEquals(Reason.PEER_UNREACHABLE, fast.reason());
    assertTrue(
        fast.getMessage().matches("client 1 at [0-9a-f]+ is unreachable .*"), fast.getMessage());
    long postsBefore = fabric.counters().posts();

    fabric.script().stopHolding();
    service.addPeer(STUCK, stuckAd.address());
    Buffer back = pattern(10, 128, 4);
    assertTrue(service.submit(write(STUCK, stuckAd, back)));
    assertTrue(recorder.take().outcome().isDone());
    assertEquals(postsBefore + 1, fabric.counters().posts());
    assertEquals(Checksums.crc32c(back.segment), Checksums.crc32c(stuckMemory.asSlice(0, 128)));
    assertEquals(0, service.outstanding());
  }

  /**
   * What a group sends a device it paused (issue 32): every dead mark dropped, so a marked client's
   * next transfer is posted and judged afresh, with no addPeer.
   */
  @Test
  void forgettingTheDeadMarksServesAMarkedClientAgain() throws Exception {
    start(builder -> builder.maxInFlight(2));
    holdStuck();
    assertTrue(service.submit(write(STUCK, stuckAd, pattern(0, 128, 0))));
    waitUntil(() -> fabric.script().heldCompletions() == 1);
    ticker.advance(DEADLINE.plusMillis(1));
    assertEquals(Reason.DEADLINE, error(recorder.take()).reason());
    assertTrue(service.submit(write(STUCK, stuckAd, pattern(1, 128, 1))));
    assertEquals(Reason.PEER_UNREACHABLE, error(recorder.take()).reason(), "marked");

    fabric.script().stopHolding();
    service.forgetDeadPeers();
    Buffer back = pattern(2, 128, 7);
    long postsBefore = fabric.counters().posts();
    assertTrue(service.submit(write(STUCK, stuckAd, back)));
    assertTrue(recorder.take().outcome().isDone(), "posted and completed, no addPeer");
    assertEquals(postsBefore + 1, fabric.counters().posts());
    assertEquals(Checksums.crc32c(back.segment), Checksums.crc32c(stuckMemory.asSlice(0, 128)));
    assertEquals(0, service.outstanding());
  }

  @Test
  void aPeerRefusingPostsPastTheProgressDeadlineIsMarkedDeadToo() throws Exception {
    start(builder -> builder.progressDeadline(Duration.ofMillis(50)));
    fabric.script().unreachable(stuck.localAddress());
    assertTrue(service.submit(write(STUCK, stuckAd, pattern(1, 64, 1))));
    waitUntil(() -> fabric.counters().againAnswers() > 0);
    ticker.advance(Duration.ofMillis(51));
    DmaException first = error(recorder.take());
    assertEquals(Reason.DEADLINE, first.reason());
    assertTrue(
        first.getMessage().contains("no post to it was accepted for 50ms"), first.getMessage());
    assertTrue(service.submit(write(STUCK, stuckAd, pattern(2, 64, 1))));
    assertEquals(Reason.PEER_UNREACHABLE, error(recorder.take()).reason());
  }

  @Test
  void aFullQueueBesideTransfersInFlightIsNotADeadPeer() throws Exception {
    start(builder -> builder.maxInFlight(4));
    holdStuck();
    Buffer first = pattern(1, 256, 1);
    Buffer second = pattern(2, 256, 2);
    assertTrue(service.submit(write(STUCK, stuckAd, first)));
    assertTrue(service.submit(write(STUCK, stuckAd, second)));
    waitUntil(() -> fabric.script().heldCompletions() == 2);
    // The live peer's queue is full (every post answers -FI_EAGAIN) for longer than the progress
    // deadline, while the stuck peer's transfers are in flight: congestion, not a dead peer.
    fabric.script().unreachable(live.localAddress());
    Buffer toLive = pattern(3, 256, 3);
    assertTrue(service.submit(write(LIVE, liveAd, toLive)));
    waitUntil(() -> fabric.counters().againAnswers() > 1);
    ticker.advance(Duration.ofMillis(1_500));
    long again = fabric.counters().againAnswers();
    waitUntil(() -> fabric.counters().againAnswers() > again + 1);
    assertNull(recorder.poll(200), "a full queue beside transfers in flight failed a transfer");
    fabric.script().reachable(live.localAddress());
    Completion<Buffer> served = recorder.take();
    assertTrue(served.outcome().isDone(), () -> String.valueOf(served.outcome()));
    assertEquals(Checksums.crc32c(toLive.segment), Checksums.crc32c(liveMemory.asSlice(0, 256)));
    fabric.script().stopHolding();
    fabric.script().releaseCompletions();
    for (Completion<Buffer> completion : recorder.take(2)) {
      assertTrue(completion.outcome().isDone(), () -> String.valueOf(completion.outcome()));
    }
    assertEquals(0, service.outstanding());
  }

  @Test
  void aClientRejoiningUnderItsIdWithANewAddressIsServedAtOnce() throws Exception {
    start(builder -> builder);
    holdStuck();
    assertTrue(service.submit(write(STUCK, stuckAd, pattern(1, 128, 1))));
    waitUntil(() -> fabric.script().heldCompletions() == 1);
    ticker.advance(DEADLINE.plusMillis(1));
    assertEquals(Reason.DEADLINE, error(recorder.take()).reason());
    // The old incarnation is dead: a transfer to it fails at once.
    assertTrue(service.submit(write(STUCK, stuckAd, pattern(2, 128, 2))));
    assertEquals(Reason.PEER_UNREACHABLE, error(recorder.take()).reason());

    // The client restarted on a new endpoint and advertised it under the same id.
    FakeEndpoint reborn = fabric.openEndpoint();
    try {
      MemorySegment rebornMemory = arena.allocate(1 << 12);
      Advertisement rebornAd = reborn.expose(rebornMemory, RemoteAccess.READ_WRITE).advertisement();
      Buffer hello = pattern(3, 128, 7);
      assertTrue(service.submit(write(STUCK, rebornAd, hello)));
      Completion<Buffer> served = recorder.take();
      assertTrue(served.outcome().isDone(), () -> String.valueOf(served.outcome()));
      assertEquals(Checksums.crc32c(hello.segment), Checksums.crc32c(rebornMemory.asSlice(0, 128)));
      // The mark went when the new incarnation came: a transfer to the old address is posted
      // (the reset forgot that address), not refused with the mark.
      long posts = fabric.counters().posts();
      assertTrue(service.submit(write(STUCK, stuckAd, pattern(4, 128, 4))));
      assertNull(recorder.poll(0), "refused with the dropped mark");
      assertEquals(posts + 1, fabric.counters().posts());
    } finally {
      fabric.script().reset();
      fabric.script().releaseCompletions();
      service.close();
      service = null;
      reborn.close();
    }
  }

  @Test
  void anOldIncarnationsDeadlineDoesNotMarkTheNewOneDead() throws Exception {
    start(builder -> builder);
    holdStuck();
    assertTrue(service.submit(write(STUCK, stuckAd, pattern(1, 128, 1))));
    waitUntil(() -> fabric.script().heldCompletions() == 1);
    FakeEndpoint reborn = fabric.openEndpoint();
    try {
      MemorySegment rebornMemory = arena.allocate(1 << 12);
      Advertisement rebornAd = reborn.expose(rebornMemory, RemoteAccess.READ_WRITE).advertisement();
      assertTrue(service.submit(write(STUCK, rebornAd, pattern(2, 128, 2))));
      assertTrue(recorder.take().outcome().isDone());
      // The write to the old incarnation passes its deadline after the client moved.
      ticker.advance(DEADLINE.plusMillis(1));
      assertEquals(Reason.DEADLINE, error(recorder.take()).reason());
      Buffer later = pattern(3, 128, 9);
      assertTrue(service.submit(write(STUCK, rebornAd, later)));
      Completion<Buffer> served = recorder.take();
      assertTrue(served.outcome().isDone(), () -> String.valueOf(served.outcome()));
      assertEquals(Checksums.crc32c(later.segment), Checksums.crc32c(rebornMemory.asSlice(0, 128)));
    } finally {
      fabric.script().reset();
      fabric.script().releaseCompletions();
      service.close();
      service = null;
      reborn.close();
    }
  }

  @Test
  void whereRemovalFlushesAnOldIncarnationsDeadlineLeavesTheNewOnesTransfersPosted()
      throws Exception {
    // Before the start: the worker reads what the endpoint declares once, as it starts.
    fabric.script().flushOnRemove(true);
    start(builder -> builder);
    fabric.script().holdCompletions();
    assertTrue(service.submit(write(STUCK, stuckAd, pattern(1, 128, 1))));
    waitUntil(() -> fabric.script().heldCompletions() == 1);
    service.advanceAndRead(ticker, Duration.ofSeconds(1));
    FakeEndpoint reborn = fabric.openEndpoint();
    try {
      Advertisement rebornAd =
          reborn.expose(arena.allocate(1 << 12), RemoteAccess.READ_WRITE).advertisement();
      assertTrue(service.submit(write(STUCK, rebornAd, pattern(2, 128, 2))));
      waitUntil(() -> fabric.script().heldCompletions() == 2);
      // The write to the old incarnation passes its deadline after the client moved: the client's
      // peer, now its new incarnation's, is not released, so nothing of the new one is flushed.
      ticker.advance(DEADLINE.minusSeconds(1).plusMillis(1));
      assertNull(recorder.poll(0), "the new incarnation's write was flushed");
      assertEquals(0, fabric.counters().flushedOps());
      assertEquals(0, fabric.counters().removes());
      assertEquals(2, fabric.script().heldCompletions());
    } finally {
      fabric.script().reset();
      fabric.script().releaseCompletions();
      service.close();
      service = null;
      reborn.close();
    }
  }

  // ----------------------------------------------------------------- connection retries

  @Test
  void aWriteAllowedToRetryWhoseConnectionWasTornDownUnderItIsPostedAgain() throws Exception {
    start(builder -> builder);
    fabric.script().failNextOps(1, 107, 32, "Broken pipe");
    Buffer buffer = pattern(1, 4096, 2);
    assertTrue(service.submit(write(LIVE, liveAd, buffer).withRetryWrite(true)));
    Completion<Buffer> done = recorder.take();
    assertTrue(done.outcome().isDone(), () -> done.outcome().error().toString());
    assertEquals(2, done.posts());
    assertEquals(2, fabric.counters().posts());
    assertEquals(Checksums.crc32c(buffer.segment), Checksums.crc32c(liveMemory.asSlice(0, 4096)));
  }

  @Test
  void aWriteIsNotPostedAgainByDefaultAndSaysItMayHaveLanded() throws Exception {
    start(builder -> builder);
    fabric.script().failNextOps(1, 107, 32, "Broken pipe");
    assertTrue(service.submit(write(LIVE, liveAd, pattern(1, 4096, 2))));
    Completion<Buffer> failed = recorder.take();
    DmaException error = error(failed);
    assertEquals(Reason.PEER_UNREACHABLE, error.reason());
    assertEquals(DmaException.TargetMemory.MAY_HAVE_CHANGED, error.targetMemory());
    assertEquals(1, failed.posts());
    assertEquals(1, fabric.counters().posts());
  }

  @Test
  void aReadWhoseConnectionWasTornDownIsPostedAgainWithoutAsking() throws Exception {
    start(builder -> builder);
    liveMemory.asSlice(0, 512).fill((byte) 0x5A);
    fabric.script().failNextOps(1, 107, 32, "Broken pipe");
    Buffer landing = new Buffer(1, arena.allocate(512));
    assertTrue(
        service.submit(TransferRequest.read(LIVE, liveAd, 512, landing)), "the read was refused");
    Completion<Buffer> done = recorder.take();
    assertTrue(done.outcome().isDone(), () -> done.outcome().error().toString());
    assertEquals(2, done.posts());
    assertEquals(Checksums.crc32c(liveMemory.asSlice(0, 512)), Checksums.crc32c(landing.segment));
  }

  @Test
  void retriesAreBoundedAndAFaultOfItsOwnIsNotRetried() throws Exception {
    start(builder -> builder);
    fabric.script().failNextOps(10, 107, 32, "Broken pipe");
    assertTrue(service.submit(write(LIVE, liveAd, pattern(1, 64, 2)).withRetryWrite(true)));
    Completion<Buffer> gaveUpCompletion = recorder.take();
    DmaException gaveUp = error(gaveUpCompletion);
    assertEquals(Reason.PEER_UNREACHABLE, gaveUp.reason());
    assertEquals(107, gaveUp.fabricErrno());
    assertEquals(3, fabric.counters().posts());
    assertEquals(3, gaveUpCompletion.posts());

    fabric.script().clearFaults().failNextOps(1, 13, -13, "remote key rejected");
    assertTrue(service.submit(write(LIVE, liveAd, pattern(2, 64, 2)).withRetryWrite(true)));
    DmaException denied = error(recorder.take());
    assertEquals(Reason.ACCESS_DENIED, denied.reason());
    assertEquals(4, fabric.counters().posts());
  }

  // ------------------------------------------------------------------------ bounded close

  @Test
  void closeReturnsWithinItsTimeoutAndFailsWhatIsStillPosted() throws Exception {
    startThreaded(builder -> builder.completionDeadline(Duration.ZERO));
    holdStuck();
    for (int i = 0; i < 4; i++) {
      assertTrue(threaded.submit(write(STUCK, stuckAd, pattern(i, 256, i))));
    }
    waitUntil(() -> fabric.script().heldCompletions() == 4);
    long started = System.nanoTime();
    threaded.close(Duration.ofMillis(300));
    long tookMs = (System.nanoTime() - started) / 1_000_000;
    assertTrue(tookMs >= 250 && tookMs < 3_000, "close took " + tookMs + " ms");
    assertFalse(threaded.isRunning());
    List<Completion<Buffer>> closed = recorder.take(4);
    for (Completion<Buffer> completion : closed) {
      assertEquals(Reason.CLOSED, error(completion).reason());
    }
    assertNull(recorder.poll(100), "a transfer completed twice");
    assertEquals(0, threaded.outstanding());
    assertEquals(0, fabric.script().releaseCompletions());
    assertTrue(allZero(stuckMemory));
    threaded = null;
  }

  @Test
  void closeFromTheCompleterOnTheWorkerThreadIsRefusedWithTheRule() throws Exception {
    AtomicReference<FabricService<Buffer>> self = new AtomicReference<>();
    List<Throwable> thrown = new CopyOnWriteArrayList<>();
    startThreaded(
        builder -> builder,
        batch -> {
          try {
            self.get().close();
          } catch (IllegalStateException refused) {
            thrown.add(refused);
          }
          recorder.complete(batch);
        });
    self.set(threaded);
    assertTrue(threaded.submit(write(LIVE, liveAd, pattern(1, 64, 1))));
    recorder.take();
    assertEquals(1, thrown.size());
    assertTrue(thrown.getFirst().getMessage().contains("fabric worker thread"));
    assertTrue(threaded.isRunning());
  }

  // ------------------------------------------------------------------------- backpressure

  @Test
  void submitsBeyondMaxPendingAreRefusedAsFullThenClosed() throws Exception {
    startThreaded(
        builder -> builder.maxInFlight(2).maxPending(3).completionDeadline(Duration.ZERO));
    holdStuck();
    List<FabricService.Offer> offers = new ArrayList<>();
    for (int i = 0; i < 7; i++) {
      offers.add(threaded.offer(write(STUCK, stuckAd, pattern(i, 64, i))));
    }
    assertEquals(5, offers.stream().filter(o -> o == FabricService.Offer.ACCEPTED).count());
    assertEquals(FabricService.Offer.FULL, offers.get(5));
    assertEquals(FabricService.Offer.FULL, offers.get(6));
    assertEquals(5, threaded.outstanding());
    threaded.close(Duration.ofMillis(100));
    assertEquals(5, recorder.take(5).size());
    assertEquals(
        FabricService.Offer.CLOSED, threaded.offer(write(LIVE, liveAd, pattern(9, 64, 1))));
    threaded = null;
  }

  // -------------------------------------------------------------------------- post path

  @Test
  void aTransferOutsideTheAdvertisedLengthFailsBeforePosting() throws Exception {
    start(builder -> builder);
    assertEquals(1 << 16, liveAd.lengthBytes());
    Advertisement nearEnd =
        new Advertisement(
            liveAd.address(), liveAd.remoteKey(), liveAd.remoteAddress(), liveAd.lengthBytes());
    TransferRequest<Buffer> straddling =
        TransferRequest.builder(pattern(1, 4096, 1))
            .clientId(LIVE)
            .advertisement(nearEnd)
            .remoteAddress(liveAd.remoteAddress() + (1 << 16) - 100)
            .direction(Direction.TO_PEER)
            .build();
    long postsBefore = fabric.counters().postAttempts();
    assertTrue(service.submit(straddling));
    DmaException error = error(recorder.take());
    assertEquals(Reason.BAD_REQUEST, error.reason());
    assertTrue(error.getMessage().contains("outside the advertised region"), error.getMessage());
    assertEquals(postsBefore, fabric.counters().postAttempts());
    assertTrue(allZero(liveMemory));
    // The client is not marked dead by its own bad request.
    assertTrue(service.submit(write(LIVE, liveAd, pattern(2, 64, 1))));
    assertTrue(recorder.take().outcome().isDone());
  }

  @Test
  void aRuntimeExceptionFromThePostPathStillCompletesThatTransferOnly() throws Exception {
    start(builder -> builder);
    fabric
        .script()
        .holdCompletions(
            op -> {
              if (op.lengthBytes() == 77) {
                throw new IllegalStateException("provider bug");
              }
              return false;
            });
    assertTrue(service.submit(write(LIVE, liveAd, pattern(1, 77, 1))));
    DmaException error = error(recorder.take());
    assertEquals(Reason.PROVIDER, error.reason());
    assertTrue(error.getMessage().contains("provider bug"), error.getMessage());
    assertTrue(service.submit(write(LIVE, liveAd, pattern(2, 64, 1))));
    assertTrue(recorder.take().outcome().isDone());
    assertEquals(0, service.outstanding());
  }

  @Test
  void anUncachedOperandIsRegisteredOnceAcrossAgainRetries() throws Exception {
    fabric.script().requireLocalRegistration(true);
    start(builder -> builder);
    fabric.script().againTimes(50);
    long before = fabric.counters().registrations();
    assertTrue(service.submit(write(LIVE, liveAd, pattern(1, 4096, 1))));
    Completion<Buffer> done = recorder.take();
    assertTrue(done.outcome().isDone(), () -> done.outcome().error().toString());
    assertEquals(1, fabric.counters().registrations() - before);
  }

  // -------------------------------------------------------------------------- backoff

  @Test
  void aWorkerWithOpsStuckInFlightSleepsAfterASecond() throws Exception {
    startThreaded(builder -> builder.completionDeadline(Duration.ZERO));
    holdStuck();
    assertTrue(threaded.submit(write(STUCK, stuckAd, pattern(1, 64, 1))));
    waitUntil(() -> fabric.script().heldCompletions() == 1);
    ThreadMXBean threads = ManagementFactory.getThreadMXBean();
    long worker = workerThread().threadId();
    Thread.sleep(1_000);
    long cpuBefore = threads.getThreadCpuTime(worker);
    long wallBefore = System.nanoTime();
    Thread.sleep(1_000);
    long cpu = threads.getThreadCpuTime(worker) - cpuBefore;
    long wall = System.nanoTime() - wallBefore;
    assertTrue(cpu >= 0, "no CPU time for the worker");
    assertTrue(cpu < wall / 20, "the stuck worker used " + (100.0 * cpu / wall) + " % of a core");
    // And it still reacts: the held completion is delivered once released.
    fabric.script().releaseCompletions();
    assertNotNull(recorder.take());
  }

  @Test
  @Timeout(60)
  void aWorkerWaitingOutACloseWithOpsStuckInFlightSleeps() throws Exception {
    // The manual ticker never reaches the completion deadline: only close(timeout) ends the wait.
    startThreaded(builder -> builder);
    holdStuck();
    for (int i = 0; i < 4; i++) {
      assertTrue(threaded.submit(write(STUCK, stuckAd, pattern(i, 256, i))));
    }
    waitUntil(() -> fabric.script().heldCompletions() == 4);
    ThreadMXBean threads = ManagementFactory.getThreadMXBean();
    Thread worker = workerThread();
    FabricService<Buffer> closing = threaded;
    Thread closer = new Thread(() -> closing.close(Duration.ofSeconds(4)), "closer");
    long cpuBefore = threads.getThreadCpuTime(worker.threadId());
    long wallBefore = System.nanoTime();
    closer.start();
    // Most of the close, measured while the worker is still waiting in it (a thread that has
    // ended has no CPU time to read).
    Thread.sleep(3_000);
    long cpu = threads.getThreadCpuTime(worker.threadId()) - cpuBefore;
    long wall = System.nanoTime() - wallBefore;
    assertTrue(worker.isAlive(), "the worker ended before the close timeout");
    assertTrue(cpuBefore >= 0 && cpu >= 0, "no CPU time for the worker");
    // CPU time, not wall time: a worker spinning through the close shows its CPU whatever the
    // machine's load, while a parked one shows next to none.
    assertTrue(
        cpu < wall / 20,
        "the worker waiting out close(4 s) used " + (100.0 * cpu / wall) + " % of a core");
    closer.join(30_000);
    assertFalse(closer.isAlive(), "close(4 s) did not return");
    for (Completion<Buffer> completion : recorder.take(4)) {
      assertEquals(Reason.CLOSED, error(completion).reason());
    }
    threaded = null;
  }

  /** The service's fabric worker thread (the only one running FabricWorker in this test). */
  private static Thread workerThread() {
    return Thread.getAllStackTraces().keySet().stream()
        .filter(t -> t.getName().startsWith("fabric-") && t.isAlive())
        .filter(
            t ->
                Arrays.stream(t.getStackTrace())
                    .anyMatch(f -> f.getClassName().contains("FabricWorker")))
        .findFirst()
        .orElseThrow();
  }
}
