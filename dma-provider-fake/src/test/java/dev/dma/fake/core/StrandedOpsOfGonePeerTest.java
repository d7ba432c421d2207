package dev.dma.fake.core;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dma.api.Advertisement;
import dev.dma.api.Completion;
import dev.dma.api.DmaConfiguration;
import dev.dma.api.DmaException;
import dev.dma.api.RemoteAccess;
import dev.dma.api.TransferRequest;
import dev.dma.fake.FakeEndpoint;
import dev.dma.fake.FakeFabric;
import dev.dma.fake.OpMatcher;
import dev.dma.spi.FabricEndpoint.Capability;
import java.lang.foreign.Arena;
import java.time.Duration;
import java.util.List;
import java.util.Set;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Where the endpoint may strand a gone peer's posted ops (it declares {@code
 * STRANDS_OPERATIONS_OF_GONE_PEERS}, as shm does; here a {@link WrappedFakeEndpoint} around the
 * fake), the completion deadline's scan asks about the peer of an op in flight for a tenth of the
 * progress deadline, at exactly that age and not a nanosecond sooner: the gone incarnation's ops,
 * and only its, fail {@code PEER_UNREACHABLE} once a reset makes their operands safe, and it is
 * marked dead. Elsewhere the reset is a quiet one that waits for the other clients' ops; on an
 * endpoint that completes in post order it comes at once and posts theirs again. The worker is
 * stepped on the test's thread with a manual clock ({@link SteppedWorker}).
 */
@Timeout(60)
class StrandedOpsOfGonePeerTest {
  private static final AtomicInteger FABRICS = new AtomicInteger();
  private static final Duration PROGRESS_DEADLINE = Duration.ofSeconds(1);
  // A tenth of the progress deadline: when the scan first asks about an op's peer.
  private static final long PROBE_AFTER_NS = PROGRESS_DEADLINE.toNanos() / 10;
  private static final long GONE = 1;
  private static final long LIVE = 2;

  private FakeFabric fabric;
  private FakeEndpoint gone;
  private FakeEndpoint live;
  private Arena arena;
  private Advertisement goneAd;
  private Advertisement liveAd;
  private final ManualTicker ticker = new ManualTicker();
  private final Recorder<Buffer> recorder = new Recorder<>();
  private SteppedWorker<Buffer> service;

  @BeforeEach
  void openFabric() {
    fabric = FakeFabric.create("stranded-gone-" + FABRICS.incrementAndGet());
    arena = Arena.ofShared();
    gone = fabric.openEndpoint();
    live = fabric.openEndpoint();
    goneAd = gone.expose(arena.allocate(4096), RemoteAccess.READ_WRITE).advertisement();
    liveAd = live.expose(arena.allocate(4096), RemoteAccess.READ_WRITE).advertisement();
    // Not from zero: an age must be told from the sum of the times it is the difference of.
    ticker.advance(Duration.ofSeconds(10));
  }

  @AfterEach
  void closeFabric() {
    if (service != null) {
      fabric.script().reset();
      fabric.script().releaseCompletions();
      service.close();
    }
    gone.close();
    live.close();
    fabric.close();
    arena.close();
  }

  private void start(boolean inPostOrder) {
    fabric.script().completesInPostOrder(inPostOrder);
    DmaConfiguration configuration =
        DmaConfiguration.builder()
            .providers("fake")
            .interfaces(List.of(fabric.name()))
            .progressDeadline(PROGRESS_DEADLINE)
            .completionDeadline(Duration.ofSeconds(30))
            // What a test leaves stranded fails at close, without waiting out the default.
            .closeTimeout(Duration.ofMillis(100))
            .build();
    service =
        SteppedWorker.start(
            configuration,
            recorder,
            ticker,
            endpoint ->
                new WrappedFakeEndpoint(
                    endpoint, Set.of(Capability.STRANDS_OPERATIONS_OF_GONE_PEERS)));
    recorder.steppedBy(service);
  }

  private Buffer buffer(long id) {
    return new Buffer(id, arena.allocate(256));
  }

  /**
   * Posts {@code first}'s write, then {@code second}'s, at the clock's current time; the gone
   * client's completion is lost (stranded), the live one's held. Then closes the gone client's
   * endpoint.
   */
  private void strand(long first, long second) {
    fabric.script().loseCompletions(OpMatcher.toPeer(gone.localAddress()));
    fabric.script().holdCompletions(OpMatcher.toPeer(live.localAddress()));
    for (long client : new long[] {first, second}) {
      Advertisement ad = client == GONE ? goneAd : liveAd;
      assertTrue(service.submit(TransferRequest.write(client, ad, buffer(client * 10))));
    }
    service.stepUntil(() -> fabric.counters().posts() == 2, "both writes posted");
    // A clock reading after the posts: it is what the scan stamps them with.
    service.advanceAndRead(ticker, Duration.ZERO);
    gone.close();
  }

  private static void assertGoneFailure(Completion<Buffer> completion) {
    assertEquals(GONE * 10, completion.context().id);
    DmaException error = completion.outcome().error();
    assertEquals(DmaException.Reason.PEER_UNREACHABLE, error.reason(), error::toString);
    assertTrue(
        error.getMessage().contains("its endpoint is gone: no open fake endpoint"),
        error::getMessage);
    assertTrue(
        error.getMessage().contains("ask it for its current advertisement"), error::getMessage);
    assertEquals(1, completion.posts());
  }

  /** The gone client is marked dead: its next transfer fails at intake, never posted. */
  private void assertGoneClientMarkedDead() throws InterruptedException {
    long posts = fabric.counters().posts();
    assertTrue(service.submit(TransferRequest.write(GONE, goneAd, buffer(99))));
    Completion<Buffer> refused = recorder.take();
    DmaException error = refused.outcome().error();
    assertEquals(DmaException.Reason.PEER_UNREACHABLE, error.reason(), error::toString);
    assertTrue(error.getMessage().contains("its transfers fail at once"), error::getMessage);
    assertEquals(0, refused.posts());
    assertEquals(posts, fabric.counters().posts());
  }

  @ParameterizedTest(name = "probe age {0} ns past a tenth of the progress deadline")
  @ValueSource(longs = {-1, 0, 1})
  void aStrandedOpsPeerIsAskedAboutAtATenthOfTheProgressDeadline(long offsetNs) throws Exception {
    start(false);
    strand(GONE, LIVE);

    ticker.advance(Duration.ofNanos(PROBE_AFTER_NS + offsetNs));
    assertNull(recorder.poll(0), "a transfer finished before the live one was released");
    assertEquals(0, fabric.counters().resets());
    if (offsetNs < 0) {
      assertEquals(0, fabric.counters().peerProbes(), "asked before a tenth of the deadline");
      return;
    }
    // Both peers were asked about: the live one is not gone.
    assertEquals(2, fabric.counters().peerProbes());

    // The reset is a quiet one: it waits for the live client's write, which completes first.
    fabric.script().stopHolding();
    assertEquals(1, fabric.script().releaseCompletions());
    Completion<Buffer> first = recorder.take();
    assertEquals(LIVE * 10, first.context().id);
    assertTrue(first.outcome().isDone(), () -> first.outcome().error().toString());
    assertEquals(1, first.posts());
    assertGoneFailure(recorder.take());
    assertEquals(1, fabric.counters().resets());
    assertEquals(1, fabric.counters().opsDiscardedByReset());

    assertGoneClientMarkedDead();
    assertTrue(service.submit(TransferRequest.write(LIVE, liveAd, buffer(21))));
    assertTrue(recorder.take().outcome().isDone());
    assertEquals(0, fabric.counters().violations(), fabric.counters().lastViolation());
  }

  @ParameterizedTest(name = "probe age {0} ns past a tenth of the progress deadline")
  @ValueSource(longs = {-1, 0, 1})
  void inPostOrderTheOldestOpsGonePeerIsJudgedAndTheOthersGoAgainAtOnce(long offsetNs)
      throws Exception {
    start(true);
    strand(GONE, LIVE);
    // What is posted again after the reset completes.
    fabric.script().stopHolding();

    ticker.advance(Duration.ofNanos(PROBE_AFTER_NS + offsetNs));
    if (offsetNs < 0) {
      assertNull(recorder.poll(0));
      assertEquals(0, fabric.counters().peerProbes(), "asked before a tenth of the deadline");
      assertEquals(0, fabric.counters().resets());
      return;
    }
    // Reset at once, without waiting for the live write: it is posted again and lands.
    List<Completion<Buffer>> both = recorder.take(2);
    assertEquals(1, fabric.counters().resets());
    assertEquals(1, fabric.counters().peerProbes());
    for (Completion<Buffer> completion : both) {
      if (completion.context().id == LIVE * 10) {
        assertTrue(completion.outcome().isDone(), () -> completion.outcome().error().toString());
        assertEquals(2, completion.posts());
      } else {
        assertGoneFailure(completion);
      }
    }
    assertGoneClientMarkedDead();
    assertEquals(0, fabric.counters().violations(), fabric.counters().lastViolation());
  }

  /**
   * In post order only the oldest op in flight can be the cause, so only its peer is asked about: a
   * gone peer's op stuck behind a live one waits for the completion deadline.
   */
  @Test
  void inPostOrderAGonePeerBehindALiveOneIsNotAskedAbout() throws Exception {
    start(true);
    strand(LIVE, GONE);

    ticker.advance(Duration.ofNanos(PROBE_AFTER_NS));
    assertNull(recorder.poll(0));
    assertEquals(1, fabric.counters().peerProbes(), "the live peer only");
    assertEquals(0, fabric.counters().resets());
    assertEquals(1, fabric.script().heldCompletions(), "the live write is still held");
  }

  /**
   * The oldest op is told by its post order, not its slot: here the gone client's write sits in a
   * later slot than a live write posted after it into the slot an earlier write freed.
   */
  @Test
  void inPostOrderTheOldestOpIsToldByItsPostOrderNotItsSlot() throws Exception {
    start(true);
    fabric.script().loseCompletions(OpMatcher.toPeer(gone.localAddress()));
    fabric.script().holdCompletions(OpMatcher.toPeer(live.localAddress()));
    assertTrue(service.submit(TransferRequest.write(LIVE, liveAd, buffer(1))));
    assertTrue(service.submit(TransferRequest.write(GONE, goneAd, buffer(GONE * 10))));
    service.stepUntil(() -> fabric.counters().posts() == 2, "both writes posted");
    assertEquals(1, fabric.script().releaseCompletions());
    assertTrue(recorder.take().outcome().isDone());
    assertTrue(service.submit(TransferRequest.write(LIVE, liveAd, buffer(2))));
    service.stepUntil(() -> fabric.counters().posts() == 3, "the second live write posted");
    service.advanceAndRead(ticker, Duration.ZERO);
    gone.close();
    fabric.script().stopHolding();

    ticker.advance(Duration.ofNanos(PROBE_AFTER_NS));
    Completion<Buffer> failed = recorder.poll(0);
    assertTrue(failed != null, "the oldest op's peer was not asked about");
    assertGoneFailure(failed);
    Completion<Buffer> again = recorder.take();
    assertEquals(2, again.context().id);
    assertTrue(again.outcome().isDone());
    assertEquals(2, again.posts());
    assertEquals(1, fabric.counters().peerProbes());
    assertEquals(1, fabric.counters().resets());
  }
}
