package dev.dma.fake.core;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dma.api.Advertisement;
import dev.dma.api.Checksums;
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
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The completion deadline on an endpoint that completes in post order (shm up to libfabric 2.4):
 * one op that never completes holds back every later completion, so only its client is judged and
 * the live clients' ops that waited behind it are posted again after the reset, with their bytes.
 * The fake models the stall by losing the culprit's completion and holding the live ones posted
 * after it (until the reset discards them). The worker is stepped on the test's thread ({@link
 * SteppedWorker}).
 */
@Timeout(60)
class InPostOrderDeadlineTest {
  private static final AtomicInteger FABRICS = new AtomicInteger();
  private static final Duration DEADLINE = Duration.ofSeconds(30);
  private static final long GONE = 1;
  private static final int LIVE_CLIENTS = 3;

  private FakeFabric fabric;
  private FakeEndpoint gone;
  private final List<FakeEndpoint> live = new ArrayList<>();
  private final List<MemorySegment> liveMemory = new ArrayList<>();
  private final List<Advertisement> liveAds = new ArrayList<>();
  private Arena arena;
  private Advertisement goneAd;
  private final ManualTicker ticker = new ManualTicker();
  private final Recorder<Buffer> recorder = new Recorder<>();
  private SteppedWorker<Buffer> service;

  @BeforeEach
  void openFabric() {
    fabric = FakeFabric.create("in-post-order-" + FABRICS.incrementAndGet());
    arena = Arena.ofShared();
    gone = fabric.openEndpoint();
    goneAd = gone.expose(arena.allocate(1 << 12), RemoteAccess.READ_WRITE).advertisement();
    for (int i = 0; i < LIVE_CLIENTS; i++) {
      FakeEndpoint endpoint = fabric.openEndpoint();
      MemorySegment memory = arena.allocate(1 << 12);
      live.add(endpoint);
      liveMemory.add(memory);
      liveAds.add(endpoint.expose(memory, RemoteAccess.READ_WRITE).advertisement());
    }
  }

  @AfterEach
  void closeFabric() {
    if (service != null) {
      fabric.script().reset();
      fabric.script().releaseCompletions();
      service.close();
    }
    gone.close();
    live.forEach(FakeEndpoint::close);
    fabric.close();
    arena.close();
  }

  private void start() {
    fabric.script().completesInPostOrder(true);
    DmaConfiguration configuration =
        DmaConfiguration.builder()
            .providers("fake")
            .interfaces(List.of(fabric.name()))
            .completionDeadline(DEADLINE)
            .build();
    service = SteppedWorker.start(configuration, recorder, ticker);
    recorder.steppedBy(service);
  }

  private Buffer pattern(long id, int size, int seed) {
    MemorySegment segment = arena.allocate(size);
    for (int i = 0; i < size; i++) {
      segment.set(ValueLayout.JAVA_BYTE, i, (byte) (seed + i * 13));
    }
    return new Buffer(id, segment);
  }

  private void waitUntil(BooleanSupplier condition) {
    service.stepUntil(condition, "condition");
  }

  /**
   * Posts one write to the gone client (its completion lost) and then one to each live client
   * (held, as if waiting behind it); returns the live writes, ids 10, 11, ...
   */
  private List<Buffer> stallBehindTheGoneClient() throws InterruptedException {
    fabric.script().loseCompletions(OpMatcher.toPeer(gone.localAddress()));
    fabric.script().holdCompletions();
    assertTrue(service.submit(TransferRequest.write(GONE, goneAd, pattern(1, 512, 1))));
    List<Buffer> writes = new ArrayList<>();
    for (int i = 0; i < LIVE_CLIENTS; i++) {
      Buffer buffer = pattern(10 + i, 1024, 7 + i);
      writes.add(buffer);
      assertTrue(service.submit(TransferRequest.write(100 + i, liveAds.get(i), buffer)));
    }
    waitUntil(() -> fabric.script().heldCompletions() == LIVE_CLIENTS);
    // What the provider accepts from now on completes: the reposts after the reset.
    fabric.script().stopHolding();
    return writes;
  }

  private void assertLiveWritesLanded(List<Completion<Buffer>> completions, List<Buffer> writes) {
    for (Completion<Buffer> completion : completions) {
      if (completion.context().id < 10) {
        continue;
      }
      assertTrue(completion.outcome().isDone(), () -> completion.outcome().error().toString());
      assertEquals(2, completion.posts(), "a live write is posted again after the reset");
      int i = (int) completion.context().id - 10;
      assertEquals(
          Checksums.crc32c(writes.get(i).segment),
          Checksums.crc32c(liveMemory.get(i).asSlice(0, 1024)));
    }
  }

  private static Completion<Buffer> goneOne(List<Completion<Buffer>> completions) {
    return completions.stream().filter(c -> c.context().id == 1).findFirst().orElseThrow();
  }

  @Test
  void aClientThatLeftWithAWritePostedFailsOnlyItsOwnWithinASecond() throws Exception {
    start();
    List<Buffer> writes = stallBehindTheGoneClient();
    service.removePeer(GONE);

    // Well inside the 30 s deadline: nothing is judged before the second of grace.
    ticker.advance(Duration.ofMillis(900));
    assertEquals(null, recorder.poll(200));
    ticker.advance(Duration.ofMillis(201));

    List<Completion<Buffer>> all = recorder.take(1 + LIVE_CLIENTS);
    DmaException error = goneOne(all).outcome().error();
    assertEquals(Reason.DEADLINE, error.reason());
    assertTrue(error.getMessage().contains("after the client left"), error.getMessage());
    assertTrue(error.getMessage().contains("client 1"), error.getMessage());
    assertLiveWritesLanded(all, writes);
    assertEquals(1, fabric.counters().resets());

    // No live client was marked: each is served at once.
    for (int i = 0; i < LIVE_CLIENTS; i++) {
      Buffer after = pattern(20 + i, 1024, 31 + i);
      assertTrue(service.submit(TransferRequest.write(100 + i, liveAds.get(i), after)));
      Completion<Buffer> done = recorder.take();
      assertTrue(done.outcome().isDone(), () -> done.outcome().error().toString());
    }
    assertEquals(0, fabric.counters().violations(), fabric.counters().lastViolation());
    assertEquals(0, service.outstanding());
  }

  @Test
  void atTheDeadlineOnlyTheOldestStuckClientIsJudged() throws Exception {
    start();
    List<Buffer> writes = stallBehindTheGoneClient();

    // The stuck client did not leave: its op is judged at the deadline, not before.
    ticker.advance(Duration.ofSeconds(2));
    assertEquals(null, recorder.poll(200));
    ticker.advance(DEADLINE);

    List<Completion<Buffer>> all = recorder.take(1 + LIVE_CLIENTS);
    DmaException error = goneOne(all).outcome().error();
    assertEquals(Reason.DEADLINE, error.reason());
    assertTrue(error.getMessage().contains("completion deadline of 30s"), error.getMessage());
    assertLiveWritesLanded(all, writes);
    assertEquals(1, fabric.counters().resets());

    // The culprit's incarnation is marked; the live ones are not.
    assertTrue(service.submit(TransferRequest.write(GONE, goneAd, pattern(2, 512, 3))));
    Completion<Buffer> refused = recorder.take();
    assertFalse(refused.outcome().isDone());
    assertEquals(Reason.PEER_UNREACHABLE, refused.outcome().error().reason());
    // Marked for the deadline it passed, not for leaving.
    String why = refused.outcome().error().getMessage();
    assertTrue(why.contains("is unreachable (no completion within the completion deadline"), why);
    for (int i = 0; i < LIVE_CLIENTS; i++) {
      assertTrue(
          service.submit(TransferRequest.write(100 + i, liveAds.get(i), pattern(30 + i, 64, i))));
      Completion<Buffer> done = recorder.take();
      assertTrue(done.outcome().isDone(), () -> done.outcome().error().toString());
    }
    assertEquals(0, fabric.counters().violations(), fabric.counters().lastViolation());
  }

  /**
   * Another client that left with a write as old as the oldest one's is judged with it, in the same
   * reset: its write fails as left behind, and its incarnation is marked dead too, so its next
   * transfer fails at intake instead of stalling every client again.
   */
  @Test
  void aSecondClientThatLeftWithAWriteAsOldIsJudgedInTheSameReset() throws Exception {
    start();
    long second = 3;
    fabric.script().loseCompletions(OpMatcher.toPeer(gone.localAddress()));
    fabric.script().holdCompletions();
    assertTrue(service.submit(TransferRequest.write(GONE, goneAd, pattern(1, 512, 1))));
    assertTrue(service.submit(TransferRequest.write(second, goneAd, pattern(2, 512, 2))));
    List<Buffer> writes = new ArrayList<>();
    for (int i = 0; i < LIVE_CLIENTS; i++) {
      Buffer buffer = pattern(10 + i, 1024, 7 + i);
      writes.add(buffer);
      assertTrue(service.submit(TransferRequest.write(100 + i, liveAds.get(i), buffer)));
    }
    waitUntil(() -> fabric.script().heldCompletions() == LIVE_CLIENTS);
    // A clock reading after the posts: it is what the scan stamps them with.
    service.advanceAndRead(ticker, Duration.ZERO);
    fabric.script().stopHolding();
    service.removePeer(GONE);
    service.removePeer(second);

    ticker.advance(Duration.ofMillis(1_001));
    // Everything due now, without waiting: a write not judged now would wait for another reset.
    List<Completion<Buffer>> all = new ArrayList<>();
    for (Completion<Buffer> next = recorder.poll(0); next != null; next = recorder.poll(0)) {
      all.add(next);
    }
    assertEquals(2 + LIVE_CLIENTS, all.size(), all::toString);
    assertEquals(1, fabric.counters().resets());
    for (Completion<Buffer> completion : all) {
      if (completion.context().id < 10) {
        DmaException error = completion.outcome().error();
        assertEquals(Reason.DEADLINE, error.reason(), error::toString);
        assertTrue(error.getMessage().contains("after the client left"), error.getMessage());
        assertEquals(1, completion.posts());
      }
    }
    assertLiveWritesLanded(all, writes);

    // Both incarnations are marked: their next writes fail at intake, never posted.
    long posts = fabric.counters().posts();
    for (long client : new long[] {GONE, second}) {
      assertTrue(service.submit(TransferRequest.write(client, goneAd, pattern(5, 64, 5))));
      Completion<Buffer> refused = recorder.take();
      assertEquals(Reason.PEER_UNREACHABLE, refused.outcome().error().reason());
      String why = refused.outcome().error().getMessage();
      assertTrue(why.contains("after the client left"), why);
      assertEquals(0, refused.posts());
    }
    assertEquals(posts, fabric.counters().posts());
    assertEquals(0, fabric.counters().violations(), fabric.counters().lastViolation());
  }
}
