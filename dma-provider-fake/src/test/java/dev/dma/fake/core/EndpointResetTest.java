package dev.dma.fake.core;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
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
import java.util.Arrays;
import java.util.List;
import java.util.Set;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The worker's endpoint resets and what each does with every op it takes. The quiet one waits for
 * the current clients' transfers: asked for by the endpoint ({@code wantsQuietReset}, shm's, here a
 * {@link WrappedFakeEndpoint}), it posts nothing new meanwhile and resets once they completed;
 * wanted for a client that left with a write stuck, or asked for, it waits at most the progress
 * deadline, to the nanosecond. After any reset: a dead incarnation's op fails with its mark and its
 * peer is not inserted again, a read goes again at most twice, the client's count in flight and a
 * queued op's stall start afresh, and a new local address reaches the listener. The worker is
 * stepped on the test's thread with a manual clock ({@link SteppedWorker}).
 */
@Timeout(60)
class EndpointResetTest {
  private static final AtomicInteger FABRICS = new AtomicInteger();
  private static final Duration PROGRESS = Duration.ofMillis(500);
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
  private WrappedFakeEndpoint endpoint;
  private SteppedWorker<Buffer> service;

  @BeforeEach
  void openFabric() {
    fabric = FakeFabric.create("endpoint-reset-" + FABRICS.incrementAndGet());
    arena = Arena.ofShared();
    gone = fabric.openEndpoint();
    live = fabric.openEndpoint();
    goneAd = gone.expose(arena.allocate(4096), RemoteAccess.READ_WRITE).advertisement();
    liveAd = live.expose(arena.allocate(4096), RemoteAccess.READ_WRITE).advertisement();
    ticker.advance(Duration.ofSeconds(10));
  }

  private void start(Duration completionDeadline) {
    DmaConfiguration configuration =
        DmaConfiguration.builder()
            .providers("fake")
            .interfaces(List.of(fabric.name()))
            .progressDeadline(PROGRESS)
            .completionDeadline(completionDeadline)
            // What a test leaves in flight fails at close, without waiting out the default.
            .closeTimeout(Duration.ofMillis(100))
            .build();
    service =
        SteppedWorker.start(
            configuration,
            recorder,
            ticker,
            opened -> endpoint = new WrappedFakeEndpoint(opened, Set.of()));
    recorder.steppedBy(service);
  }

  @AfterEach
  void closeFabric() {
    fabric.script().reset();
    fabric.script().releaseCompletions();
    if (service != null) {
      service.close();
    }
    gone.close();
    live.close();
    fabric.close();
    arena.close();
  }

  private Buffer buffer(long id) {
    return new Buffer(id, arena.allocate(256));
  }

  /** Two live writes held, then the endpoint asks for a quiet reset and a third write comes. */
  private void askForAQuietResetBehindTwoWrites() {
    start(Duration.ofSeconds(30));
    fabric.script().holdCompletions();
    assertTrue(service.submit(TransferRequest.write(LIVE, liveAd, buffer(1))));
    assertTrue(service.submit(TransferRequest.write(LIVE + 1, liveAd, buffer(2))));
    service.stepUntil(() -> fabric.script().heldCompletions() == 2, "both writes posted");
    endpoint.wantQuietReset();
    assertTrue(service.submit(TransferRequest.write(LIVE, liveAd, buffer(3))));
    service.stepQuietly();
  }

  @Test
  void askedByTheEndpointItPostsNothingNewAndResetsOnceTheLiveWritesCompleted() throws Exception {
    askForAQuietResetBehindTwoWrites();
    // A nanosecond short of the progress deadline: still waiting, the third write not posted.
    ticker.advance(PROGRESS.minusNanos(1));
    assertNull(recorder.poll(0));
    assertEquals(2, fabric.counters().postAttempts());
    assertEquals(0, fabric.counters().resets());

    fabric.script().stopHolding();
    assertEquals(2, fabric.script().releaseCompletions());
    List<Completion<Buffer>> all = recorder.take(3);
    for (Completion<Buffer> completion : all) {
      assertTrue(completion.outcome().isDone(), () -> completion.outcome().error().toString());
      assertEquals(1, completion.posts());
    }
    assertEquals(3, all.get(2).context().id, "the third went out after the reset");
    assertEquals(1, fabric.counters().resets());
    assertEquals(0, fabric.counters().opsDiscardedByReset());
    assertEquals(0, fabric.counters().violations(), fabric.counters().lastViolation());
  }

  @Test
  void askedByTheEndpointItWaitsNoLongerThanTheProgressDeadline() throws Exception {
    askForAQuietResetBehindTwoWrites();
    fabric.script().stopHolding();
    ticker.advance(PROGRESS);
    List<Completion<Buffer>> all = recorder.take(3);
    assertEquals(1, fabric.counters().resets());
    assertEquals(2, fabric.counters().opsDiscardedByReset());
    for (Completion<Buffer> completion : all.subList(0, 2)) {
      DmaException error = completion.outcome().error();
      assertEquals(Reason.ENDPOINT_RESET, error.reason(), error::toString);
      assertTrue(
          error.getMessage().contains("the provider asked for a fresh endpoint"),
          error::getMessage);
    }
    assertEquals(3, all.get(2).context().id);
    assertTrue(all.get(2).outcome().isDone(), () -> all.get(2).outcome().error().toString());
  }

  /**
   * A client left with a write its provider will never complete: the quiet reset that makes its
   * operand safe waits for a live write, but only for the progress deadline from the first pass
   * that wanted it. At that instant it resets, and the live write, caught posted, fails as reset.
   */
  @Test
  void forAClientThatLeftItWaitsForTheLiveWriteForTheProgressDeadlineExactly() throws Exception {
    start(Duration.ofSeconds(30));
    fabric.script().loseCompletions(OpMatcher.toPeer(gone.localAddress()));
    fabric.script().holdCompletions(OpMatcher.toPeer(live.localAddress()));
    assertTrue(service.submit(TransferRequest.write(GONE, goneAd, buffer(1))));
    assertTrue(service.submit(TransferRequest.write(LIVE, liveAd, buffer(2))));
    service.stepUntil(() -> fabric.counters().posts() == 2, "both writes posted");
    service.advanceAndRead(ticker, Duration.ZERO);
    service.removePeer(GONE);

    // A second after it left, the gone client's write is judged; the quiet reset waits from here.
    ticker.advance(Duration.ofSeconds(1));
    assertNull(recorder.poll(0));
    ticker.advance(PROGRESS.minusNanos(1));
    assertNull(recorder.poll(0), "reset before the progress deadline");
    assertEquals(0, fabric.counters().resets());
    ticker.advance(Duration.ofNanos(1));
    List<Completion<Buffer>> both = recorder.take(2);
    assertEquals(1, fabric.counters().resets());
    for (Completion<Buffer> completion : both) {
      DmaException error = completion.outcome().error();
      if (completion.context().id == 1) {
        assertEquals(Reason.DEADLINE, error.reason(), error::toString);
        assertTrue(error.getMessage().contains("after the client left"), error::getMessage);
      } else {
        assertEquals(Reason.ENDPOINT_RESET, error.reason(), error::toString);
        assertTrue(error.getMessage().contains("a client left or went away"), error::getMessage);
      }
    }
    // The live client is served on the new endpoint.
    fabric.script().stopHolding();
    assertTrue(service.submit(TransferRequest.write(LIVE, liveAd, buffer(3))));
    assertTrue(recorder.take().outcome().isDone());
  }

  /** Asks for a quiet reset and lets the progress deadline pass: the reset takes what is posted. */
  private void quietResetAtTheProgressDeadline() {
    endpoint.wantQuietReset();
    service.stepQuietly();
    ticker.advance(PROGRESS);
    service.stepQuietly();
  }

  /**
   * A read the resets keep taking is posted again twice, then fails saying so: the retries are
   * counted.
   */
  @Test
  void aReadTakenByThreeResetsIsPostedAgainTwiceThenFails() throws Exception {
    start(Duration.ofSeconds(30));
    fabric.script().holdCompletions();
    assertTrue(service.submit(TransferRequest.read(LIVE, liveAd, 256, buffer(1))));
    service.stepUntil(() -> fabric.script().heldCompletions() == 1, "the read posted");
    for (int reset = 1; reset <= 2; reset++) {
      quietResetAtTheProgressDeadline();
      assertEquals(reset, fabric.counters().resets());
      assertEquals(1, fabric.script().heldCompletions(), "the read was not posted again");
      assertNull(recorder.poll(0));
    }
    quietResetAtTheProgressDeadline();
    Completion<Buffer> failed = recorder.take();
    assertEquals(3, failed.posts());
    DmaException error = failed.outcome().error();
    assertEquals(Reason.ENDPOINT_RESET, error.reason(), error::toString);
    assertTrue(error.getMessage().contains("after 2 retries"), error::getMessage);
    assertEquals(3, fabric.counters().resets());
  }

  /**
   * An op of an incarnation the deadline just marked dead, still posted but not itself past the
   * deadline, fails with the mark's error in the reset; the dead incarnation's peer is not inserted
   * again, the live one's is; and the reset settles the deadline's account, so no second reset
   * follows while the live read stays posted.
   */
  @Test
  void aDeadIncarnationsOtherOpFailsWithItsMarkAndItsPeerIsNotInsertedAgain() throws Exception {
    start(Duration.ofSeconds(2));
    fabric.script().holdCompletions();
    assertTrue(service.submit(TransferRequest.write(GONE, goneAd, buffer(1))));
    service.stepUntil(() -> fabric.script().heldCompletions() == 1, "the first write posted");
    service.advanceAndRead(ticker, Duration.ofSeconds(1));
    assertTrue(service.submit(TransferRequest.write(GONE, goneAd, buffer(2))));
    assertTrue(service.submit(TransferRequest.read(LIVE, liveAd, 256, buffer(3))));
    service.stepUntil(() -> fabric.script().heldCompletions() == 3, "all three posted");
    service.advanceAndRead(ticker, Duration.ZERO);
    long inserts = fabric.counters().inserts();

    ticker.advance(Duration.ofSeconds(1));
    List<Completion<Buffer>> failed = recorder.take(2);
    assertEquals(1, fabric.counters().resets());
    assertEquals(inserts + 1, fabric.counters().inserts(), "inserted again: the live peer only");
    for (Completion<Buffer> completion : failed) {
      DmaException error = completion.outcome().error();
      if (completion.context().id == 1) {
        assertEquals(Reason.DEADLINE, error.reason(), error::toString);
      } else {
        assertEquals(2, completion.context().id);
        assertEquals(Reason.PEER_UNREACHABLE, error.reason(), error::toString);
        assertTrue(
            error.getMessage().contains("is unreachable (no completion within the completion"),
            error::getMessage);
      }
    }
    // The read goes again and stays posted; a scan later, nothing is reset again.
    service.stepQuietly();
    assertEquals(1, fabric.script().heldCompletions());
    ticker.advance(Duration.ofMillis(200));
    assertNull(recorder.poll(0));
    assertEquals(1, fabric.counters().resets());
    fabric.script().stopHolding();
    assertEquals(1, fabric.script().releaseCompletions());
    Completion<Buffer> read = recorder.take();
    assertTrue(read.outcome().isDone(), () -> read.outcome().error().toString());
    assertEquals(2, read.posts());
  }

  /**
   * A client whose write the reset took has nothing in flight after it: its refused post is asked
   * about at a tenth of the progress deadline (only a client with nothing in flight is), and fails
   * as gone.
   */
  @Test
  void aClientWhoseWriteTheResetTookHasNothingInFlightAfterIt() throws Exception {
    start(Duration.ofSeconds(30));
    fabric.script().holdCompletions(OpMatcher.toPeer(gone.localAddress()));
    assertTrue(service.submit(TransferRequest.write(GONE, goneAd, buffer(1))));
    service.stepUntil(() -> fabric.script().heldCompletions() == 1, "the write posted");
    fabric.script().unreachable(gone.localAddress());
    long refusals = fabric.counters().againAnswers();
    assertTrue(service.submit(TransferRequest.write(GONE, goneAd, buffer(2))));
    service.stepUntil(() -> fabric.counters().againAnswers() > refusals, "a refused post");

    quietResetAtTheProgressDeadline();
    Completion<Buffer> taken = recorder.take();
    assertEquals(1, taken.context().id);
    assertEquals(Reason.ENDPOINT_RESET, taken.outcome().error().reason());
    gone.close();
    ticker.advance(PROGRESS.dividedBy(10));
    Completion<Buffer> refused = recorder.poll(0);
    assertTrue(refused != null, "not asked about at a tenth of the progress deadline");
    assertEquals(2, refused.context().id);
    DmaException error = refused.outcome().error();
    assertEquals(Reason.PEER_UNREACHABLE, error.reason(), error::toString);
    assertTrue(error.getMessage().contains("its endpoint is gone"), error::getMessage);
  }

  /**
   * A queued op refused since before the reset starts its stall afresh after it: beside a read
   * still in flight (posted again), it fails at the progress deadline from the reset, not from its
   * first refusal nor from its client's last post.
   */
  @Test
  void aQueuedOpsStallStartsAfreshAtTheReset() throws Exception {
    start(Duration.ZERO);
    fabric.script().holdCompletions();
    assertTrue(service.submit(TransferRequest.write(GONE, goneAd, buffer(1))));
    assertTrue(service.submit(TransferRequest.read(LIVE, liveAd, 256, buffer(2))));
    service.stepUntil(() -> fabric.script().heldCompletions() == 2, "both posted");
    fabric.script().unreachable(gone.localAddress());
    long refusals = fabric.counters().againAnswers();
    assertTrue(service.submit(TransferRequest.write(GONE, goneAd, buffer(3))));
    service.stepUntil(() -> fabric.counters().againAnswers() > refusals, "a refused post");
    service.advanceAndRead(ticker, Duration.ofSeconds(1));

    quietResetAtTheProgressDeadline();
    Completion<Buffer> taken = recorder.take();
    assertEquals(1, taken.context().id);
    assertEquals(Reason.ENDPOINT_RESET, taken.outcome().error().reason());
    assertEquals(1, fabric.script().heldCompletions(), "the read was not posted again");

    ticker.advance(PROGRESS.minusNanos(1));
    assertNull(recorder.poll(0), "failed before the progress deadline from the reset");
    ticker.advance(Duration.ofNanos(1));
    Completion<Buffer> refused = recorder.take();
    assertEquals(3, refused.context().id);
    DmaException error = refused.outcome().error();
    assertEquals(Reason.DEADLINE, error.reason(), error::toString);
    assertTrue(
        error.getMessage().contains("no post to it was accepted for 500ms while other transfers"),
        error::getMessage);
  }

  /** A reset that gives the endpoint a new address tells the listener, once per change. */
  @Test
  void aNewAddressAfterAResetReachesTheListener() throws Exception {
    start(Duration.ofSeconds(30));
    byte[] first = endpoint.localAddress();
    assertArrayEquals(first, service.localAddress());
    endpoint.newAddressOnReset();
    for (int reset = 1; reset <= 2; reset++) {
      fabric.script().holdCompletions();
      assertTrue(service.submit(TransferRequest.write(LIVE, liveAd, buffer(reset))));
      service.stepUntil(() -> fabric.script().heldCompletions() == 1, "the write posted");
      quietResetAtTheProgressDeadline();
      assertEquals(Reason.ENDPOINT_RESET, recorder.take().outcome().error().reason());
      byte[] now = endpoint.localAddress();
      assertFalse(Arrays.equals(first, now));
      assertArrayEquals(now, service.localAddress());
    }
  }

  /**
   * The quiet wait counts from a fresh reading of the clock in the pass that first wants the reset,
   * not from the worker's coarse clock, which may lag it by dozens of passes.
   */
  @Test
  void theQuietWaitCountsFromAFreshClockReading() throws Exception {
    start(Duration.ofSeconds(30));
    fabric.script().holdCompletions();
    assertTrue(service.submit(TransferRequest.write(LIVE, liveAd, buffer(1))));
    service.stepUntil(() -> fabric.script().heldCompletions() == 1, "the write posted");
    // Right after a reading of the coarse clock, which the next passes do not repeat.
    service.advanceAndRead(ticker, Duration.ZERO);
    endpoint.wantQuietReset();
    ticker.advance(Duration.ofMillis(300));
    service.step();
    // 500 ms after the coarse clock's last reading, but 200 ms into the wait.
    ticker.advance(Duration.ofMillis(200));
    assertNull(recorder.poll(0), "the wait counted from the coarse clock");
    assertEquals(0, fabric.counters().resets());
    ticker.advance(Duration.ofMillis(300));
    assertEquals(Reason.ENDPOINT_RESET, recorder.take().outcome().error().reason());
    assertEquals(1, fabric.counters().resets());
  }
}
