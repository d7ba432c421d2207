package dev.dma.fake.core;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dma.api.Advertisement;
import dev.dma.api.Completion;
import dev.dma.api.DmaConfiguration;
import dev.dma.api.DmaException;
import dev.dma.api.DmaException.Reason;
import dev.dma.api.RemoteAccess;
import dev.dma.api.TransferRequest;
import dev.dma.fake.FakeEndpoint;
import dev.dma.fake.FakeFabric;
import dev.dma.fake.OpMatcher;
import java.lang.foreign.Arena;
import java.time.Duration;
import java.util.List;
import java.util.Set;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The bounds on a post the provider keeps refusing ({@code -FI_EAGAIN}) or that does not fit under
 * {@code max_pinned_bytes}, each at exactly its bound: a nanosecond before it the transfer still
 * waits, at it and a nanosecond after it fails, with the reason and words of that bound. Which
 * instant each bound counts from matters as much: the first refusal, the client's last completion,
 * the worker's last completion. The worker is stepped on the test's thread with a manual clock
 * ({@link SteppedWorker}), which starts at 10 s so that no bound can pass for counting from zero.
 */
@Timeout(60)
class RefusedPostBoundsTest {
  private static final AtomicInteger FABRICS = new AtomicInteger();
  private static final Duration PROGRESS = Duration.ofMillis(50);
  private static final long STUCK = 1;
  private static final long LIVE = 2;
  private static final int OPERAND = 4096;

  private FakeFabric fabric;
  private FakeEndpoint stuck;
  private FakeEndpoint live;
  private Arena arena;
  private Advertisement stuckAd;
  private Advertisement liveAd;
  private final ManualTicker ticker = new ManualTicker();
  private final Recorder<Buffer> recorder = new Recorder<>();
  private SteppedWorker<Buffer> service;

  @BeforeEach
  void openFabric() {
    fabric = FakeFabric.create("refused-bounds-" + FABRICS.incrementAndGet());
    arena = Arena.ofShared();
    stuck = fabric.openEndpoint();
    live = fabric.openEndpoint();
    stuckAd = stuck.expose(arena.allocate(1 << 16), RemoteAccess.READ_WRITE).advertisement();
    liveAd = live.expose(arena.allocate(1 << 16), RemoteAccess.READ_WRITE).advertisement();
    ticker.advance(Duration.ofSeconds(10));
  }

  @AfterEach
  void closeFabric() {
    if (service != null) {
      fabric.script().reset();
      fabric.script().releaseCompletions();
      service.close();
    }
    stuck.close();
    live.close();
    fabric.close();
    arena.close();
  }

  private void start(Duration progress, Duration completion, long maxPinnedBytes) {
    DmaConfiguration configuration =
        DmaConfiguration.builder()
            .providers("fake")
            .interfaces(List.of(fabric.name()))
            .progressDeadline(progress)
            .completionDeadline(completion)
            .maxPinnedBytes(maxPinnedBytes)
            // What a test leaves in flight fails at close, without waiting out the default.
            .closeTimeout(Duration.ofMillis(100))
            .build();
    service = SteppedWorker.start(configuration, recorder, ticker);
    recorder.steppedBy(service);
  }

  private void start(Duration progress, Duration completion) {
    start(progress, completion, 0);
  }

  private Buffer buffer(long id) {
    return new Buffer(id, arena.allocate(OPERAND));
  }

  private void submit(long client, long id) {
    Advertisement ad = client == STUCK ? stuckAd : liveAd;
    assertTrue(service.submit(TransferRequest.write(client, ad, buffer(id))));
  }

  /** Submits a write to the stuck peer, which refuses every post, and steps until it was. */
  private void submitRefused(long id) {
    long refusals = fabric.counters().againAnswers();
    submit(STUCK, id);
    service.stepUntil(() -> fabric.counters().againAnswers() > refusals, "a refused post");
  }

  /** Steps until the worker has posted {@code count} ops in all. */
  private void awaitPosts(long count) {
    service.stepUntil(() -> fabric.counters().posts() == count, count + " posts");
  }

  /**
   * Advances the clock by {@code bound + offsetNs} and checks that the transfer {@code id} is still
   * waiting a nanosecond before the bound, and has failed at it or after it; returns its failure.
   */
  private DmaException failsAtTheBound(long id, Duration bound, long offsetNs)
      throws InterruptedException {
    ticker.advance(bound.plusNanos(offsetNs));
    if (offsetNs < 0) {
      assertNull(recorder.poll(0), "failed a nanosecond before its bound");
      ticker.advance(Duration.ofNanos(-offsetNs));
    }
    Completion<Buffer> failed = recorder.take();
    assertEquals(id, failed.context().id);
    assertEquals(0, failed.posts());
    return failed.outcome().error();
  }

  /** The stuck client was marked dead: its next transfer fails at intake, never posted. */
  private void assertStuckMarkedDead() throws InterruptedException {
    fabric.script().reachable(stuck.localAddress());
    long attempts = fabric.counters().postAttempts();
    submit(STUCK, 99);
    Completion<Buffer> refused = recorder.take();
    assertEquals(Reason.PEER_UNREACHABLE, refused.outcome().error().reason());
    assertEquals(attempts, fabric.counters().postAttempts());
  }

  @ParameterizedTest(name = "{0} ns past the progress deadline")
  @ValueSource(longs = {-1, 0, 1})
  void refusedWithNothingInFlightItFailsAtTheProgressDeadlineFromItsFirstRefusal(long offsetNs)
      throws Exception {
    start(PROGRESS, Duration.ZERO);
    // The client's last completion, and the worker's, a second before the refusals start.
    submit(STUCK, 1);
    assertTrue(recorder.take().outcome().isDone());
    service.advanceAndRead(ticker, Duration.ofSeconds(1));
    fabric.script().unreachable(stuck.localAddress());
    submitRefused(2);

    DmaException error = failsAtTheBound(2, PROGRESS, offsetNs);
    assertEquals(Reason.DEADLINE, error.reason(), error::toString);
    assertTrue(
        error.getMessage().contains("no post to it was accepted for 50ms with nothing else"),
        error::getMessage);
    assertEquals(11, error.fabricErrno());
    assertStuckMarkedDead();
  }

  @ParameterizedTest(name = "{0} ns past the progress deadline")
  @ValueSource(longs = {-1, 0, 1})
  void refusedWithNothingInFlightItFailsAtTheProgressDeadlineFromTheLastCompletion(long offsetNs)
      throws Exception {
    start(PROGRESS, Duration.ofSeconds(2));
    // Another client's write in flight: beside it, the refused one may wait 2 s.
    fabric.script().holdCompletions(OpMatcher.toPeer(live.localAddress()));
    submit(LIVE, 1);
    awaitPosts(1);
    fabric.script().unreachable(stuck.localAddress());
    submitRefused(2);
    service.advanceAndRead(ticker, Duration.ofSeconds(1));
    // The worker's last completion: the progress deadline counts from here.
    fabric.script().stopHolding();
    assertEquals(1, fabric.script().releaseCompletions());
    assertTrue(recorder.take().outcome().isDone());

    DmaException error = failsAtTheBound(2, PROGRESS, offsetNs);
    assertEquals(Reason.DEADLINE, error.reason(), error::toString);
    assertTrue(
        error.getMessage().contains("no post to it was accepted for 50ms with nothing else"),
        error::getMessage);
  }

  @ParameterizedTest(name = "{0} ns past the completion deadline")
  @ValueSource(longs = {-1, 0, 1})
  void besideTransfersInFlightItFailsAtTheLongerCompletionDeadline(long offsetNs) throws Exception {
    start(PROGRESS, Duration.ofSeconds(2));
    fabric.script().unreachable(stuck.localAddress());
    submitRefused(1);
    // 10 ms later, inside the progress deadline, another client's write goes in flight.
    service.advanceAndRead(ticker, Duration.ofMillis(10));
    fabric.script().holdCompletions(OpMatcher.toPeer(live.localAddress()));
    submit(LIVE, 2);
    awaitPosts(1);

    DmaException error = failsAtTheBound(1, Duration.ofMillis(1_990), offsetNs);
    assertEquals(Reason.DEADLINE, error.reason(), error::toString);
    assertTrue(
        error.getMessage().contains("no post to it was accepted for 2s while other transfers"),
        error::getMessage);
    // The write in flight is untouched, and completes.
    fabric.script().stopHolding();
    assertEquals(1, fabric.script().releaseCompletions());
    Completion<Buffer> other = recorder.take();
    assertEquals(2, other.context().id);
    assertTrue(other.outcome().isDone());
    assertStuckMarkedDead();
  }

  @ParameterizedTest(name = "{0} ns past the progress deadline")
  @ValueSource(longs = {-1, 0, 1})
  void besideTransfersInFlightItFailsAtTheProgressDeadlineFromItsClientsLastCompletion(
      long offsetNs) throws Exception {
    start(PROGRESS, Duration.ZERO);
    // Another client's write stays in flight for ever; the stuck client's own first one is held.
    fabric.script().loseCompletions(OpMatcher.toPeer(live.localAddress()));
    fabric.script().holdCompletions(OpMatcher.toPeer(stuck.localAddress()));
    submit(LIVE, 1);
    submit(STUCK, 2);
    awaitPosts(2);
    fabric.script().unreachable(stuck.localAddress());
    submitRefused(3);
    service.advanceAndRead(ticker, Duration.ofSeconds(1));
    // The stuck client's last sign of life: its first write completes, a second after the
    // refusals began. The stall counts from here, not from the first refusal.
    fabric.script().stopHolding();
    assertEquals(1, fabric.script().releaseCompletions());
    Completion<Buffer> first = recorder.take();
    assertEquals(2, first.context().id);
    assertTrue(first.outcome().isDone());

    DmaException error = failsAtTheBound(3, PROGRESS, offsetNs);
    assertEquals(Reason.DEADLINE, error.reason(), error::toString);
    assertTrue(
        error.getMessage().contains("no post to it was accepted for 50ms while other transfers"),
        error::getMessage);
  }

  @ParameterizedTest(name = "{0} ns past a tenth of the progress deadline")
  @ValueSource(longs = {-1, 0, 1})
  void aGonePeersRefusedPostFailsAsUnreachableAtATenthOfTheProgressDeadline(long offsetNs)
      throws Exception {
    start(Duration.ofSeconds(1), Duration.ZERO);
    stuck.close();
    submitRefused(1);

    ticker.advance(Duration.ofNanos(100_000_000L + offsetNs));
    if (offsetNs < 0) {
      assertNull(recorder.poll(0), "failed a nanosecond before its probe");
      assertEquals(0, fabric.counters().peerProbes());
      ticker.advance(Duration.ofNanos(-offsetNs));
    }
    Completion<Buffer> failed = recorder.take();
    assertEquals(1, fabric.counters().peerProbes());
    assertEquals(0, failed.posts());
    DmaException error = failed.outcome().error();
    assertEquals(Reason.PEER_UNREACHABLE, error.reason(), error::toString);
    assertTrue(
        error.getMessage().contains("its endpoint is gone: no open fake endpoint"),
        error::getMessage);
    assertEquals(11, error.fabricErrno());
    // Marked dead: the next one fails at intake, without a post or a probe.
    long attempts = fabric.counters().postAttempts();
    submit(STUCK, 2);
    assertEquals(Reason.PEER_UNREACHABLE, recorder.take().outcome().error().reason());
    assertEquals(attempts, fabric.counters().postAttempts());
    assertEquals(1, fabric.counters().peerProbes());
  }

  /** A partitioned peer is not gone: asked about once per tenth of the progress deadline. */
  @Test
  void aPartitionedPeerIsAskedAboutExactlyOncePerTenthOfTheProgressDeadline() throws Exception {
    start(Duration.ofSeconds(1), Duration.ZERO);
    fabric.script().unreachable(stuck.localAddress());
    submitRefused(1);
    long tenth = 100_000_000L;
    for (int probes = 1; probes <= 3; probes++) {
      ticker.advance(Duration.ofNanos(tenth - 1));
      service.stepQuietly();
      assertEquals(probes - 1, fabric.counters().peerProbes(), "asked a nanosecond early");
      ticker.advance(Duration.ofNanos(1));
      service.stepQuietly();
      assertEquals(probes, fabric.counters().peerProbes());
    }
    assertNull(recorder.poll(0));
  }

  @ParameterizedTest(name = "{0} ns past the progress deadline")
  @ValueSource(longs = {-1, 0, 1})
  void aTransferHeldUnderThePinnedBoundFailsAtTheProgressDeadline(long offsetNs) throws Exception {
    fabric.script().requireLocalRegistration(true);
    start(Duration.ofSeconds(1), Duration.ofSeconds(30), 4 * OPERAND);
    fabric.script().holdCompletions();
    for (int id = 0; id < 5; id++) {
      submit(LIVE, id);
    }
    awaitPosts(4);

    DmaException error = failsAtTheBound(4, Duration.ofSeconds(1), offsetNs);
    assertEquals(Reason.BACKPRESSURE, error.reason(), error::toString);
    assertTrue(error.getMessage().contains("for longer than progress_deadline"), error::getMessage);
    assertEquals(0, fabric.counters().peerProbes(), "the bound is ours, not the peer's");
    fabric.script().stopHolding();
    assertEquals(4, fabric.script().releaseCompletions());
    for (Completion<Buffer> completion : recorder.take(4)) {
      assertTrue(completion.outcome().isDone());
    }
    // Not marked dead: the same client is served.
    submit(LIVE, 5);
    assertTrue(recorder.take().outcome().isDone());
  }

  /**
   * A post that fails outright with a connection refusal fails its transfer at once and marks the
   * incarnation dead; one that fails with another error fails only its own transfer.
   */
  @Test
  void aPostRefusedAsUnreachableMarksItsPeerDeadAndOtherPostFailuresDoNot() throws Exception {
    start(PROGRESS, Duration.ZERO);
    fabric.script().failPostsTo(stuck.localAddress(), 5);
    submit(STUCK, 1);
    DmaException io = recorder.take().outcome().error();
    assertEquals(Reason.PROVIDER, io.reason(), io::toString);
    assertTrue(io.getMessage().contains("(-5)"), io::getMessage);
    // Not marked: the next post is tried.
    fabric.script().failPostsTo(stuck.localAddress(), 111);
    long attempts = fabric.counters().postAttempts();
    submit(STUCK, 2);
    Completion<Buffer> refused = recorder.take();
    assertEquals(attempts + 1, fabric.counters().postAttempts());
    assertEquals(0, refused.posts());
    DmaException unreachable = refused.outcome().error();
    assertEquals(Reason.PEER_UNREACHABLE, unreachable.reason(), unreachable::toString);
    assertTrue(unreachable.getMessage().contains("(-111)"), unreachable::getMessage);
    fabric.script().failPostsTo(stuck.localAddress(), 0);
    assertStuckMarkedDead();
  }

  /** A probe that throws is no answer: the refused transfer waits for the progress deadline. */
  @Test
  void aProbeThatThrowsIsTakenAsNoAnswer() throws Exception {
    AtomicReference<WrappedFakeEndpoint> wrapped = new AtomicReference<>();
    service =
        SteppedWorker.start(
            DmaConfiguration.builder()
                .providers("fake")
                .interfaces(List.of(fabric.name()))
                .progressDeadline(Duration.ofSeconds(1))
                .completionDeadline(Duration.ZERO)
                .closeTimeout(Duration.ofMillis(100))
                .build(),
            recorder,
            ticker,
            endpoint -> {
              wrapped.set(new WrappedFakeEndpoint(endpoint, Set.of()));
              return wrapped.get();
            });
    recorder.steppedBy(service);
    wrapped.get().probeThrows();
    stuck.close();
    submitRefused(1);
    // Well past the first probe: not judged gone.
    ticker.advance(Duration.ofMillis(500));
    assertNull(recorder.poll(0), "a probe that threw was taken as gone");
    ticker.advance(Duration.ofMillis(500));
    DmaException error = recorder.take().outcome().error();
    assertEquals(Reason.DEADLINE, error.reason(), error::toString);
  }

  /**
   * A client's op held under the pinned bound earlier in the same pass, already put aside, fails
   * with the client's mark when a later op of the client is refused as unreachable: marked dead,
   * the client's ops put aside this pass fail as its queued ones do.
   */
  @Test
  void anOpPutAsideEarlierInThePassFailsWithItsClientsMark() throws Exception {
    fabric.script().requireLocalRegistration(true);
    start(Duration.ofSeconds(1), Duration.ofSeconds(30), 3 * OPERAND);
    fabric.script().holdCompletions();
    // Another client's transfer in flight holds a third of the bound.
    assertTrue(
        service.submit(
            TransferRequest.write(LIVE, liveAd, new Buffer(1, arena.allocate(OPERAND, OPERAND)))));
    awaitPosts(1);
    fabric.script().failPostsTo(stuck.localAddress(), 111);
    // In one pass: the first does not fit and is put aside, the second fits and is refused.
    assertTrue(
        service.submit(
            TransferRequest.write(
                STUCK, stuckAd, new Buffer(2, arena.allocate(3 * OPERAND, OPERAND)))));
    assertTrue(
        service.submit(
            TransferRequest.write(
                STUCK, stuckAd, new Buffer(3, arena.allocate(OPERAND, OPERAND)))));
    Completion<Buffer> refused = recorder.take();
    assertEquals(3, refused.context().id);
    assertEquals(Reason.PEER_UNREACHABLE, refused.outcome().error().reason());
    // Within the same instant: not left to wait for room until the progress deadline.
    Completion<Buffer> putAside = recorder.poll(0);
    assertTrue(putAside != null, "the op put aside was not failed with its client's mark");
    assertEquals(2, putAside.context().id);
    DmaException marked = putAside.outcome().error();
    assertEquals(Reason.PEER_UNREACHABLE, marked.reason(), marked::toString);
    assertTrue(marked.getMessage().contains("is unreachable (post:"), marked::getMessage);
    assertEquals(1, fabric.counters().postErrors());
  }
}
