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
import dev.dma.core.NanoClock;
import dev.dma.fake.FakeEndpoint;
import dev.dma.fake.FakeFabric;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Set;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The completion deadline judges the provider, not the worker's absence: a worker that stalls (a GC
 * pause, a slow completer, no CPU) past the deadline while completions wait in the queue fails none
 * of them and marks no client dead; and the flush grace of expired ops cannot be pushed back by
 * later expiries. The worker is stepped on the test's thread ({@link SteppedWorker}).
 */
class DeadlineJudgesTheProviderTest {
  private static final Duration DEADLINE = Duration.ofSeconds(2);

  /**
   * A clock the test steps by hand, which can also stall the worker inside one read: what happens
   * during the stall runs inside that read, and the reading after it is what the worker then judges
   * its deadlines by.
   */
  private static final class StallingClock implements NanoClock {
    private final AtomicLong nanos = new AtomicLong();
    private final AtomicReference<Runnable> stallNext = new AtomicReference<>();
    private final AtomicInteger stalls = new AtomicInteger();

    @Override
    public long nanoTime() {
      Runnable whileAway = stallNext.getAndSet(null);
      if (whileAway != null) {
        whileAway.run();
        stalls.incrementAndGet();
      }
      return nanos.get();
    }

    /** Stalls the worker in its next clock read, {@code whileAway} happening meanwhile. */
    void stallNextRead(Runnable whileAway) {
      stallNext.set(whileAway);
    }

    boolean stalled() {
      return stalls.get() > 0;
    }

    void advance(Duration duration) {
      nanos.addAndGet(duration.toNanos());
    }
  }

  @Test
  @Timeout(60)
  void aStalledWorkerReapsTheCompletionsWaitingBeforeItJudgesAnyDeadline() throws Exception {
    StallingClock clock = new StallingClock();
    Recorder<Buffer> recorder = new Recorder<>();
    int count = 40;
    try (FakeFabric fabric = FakeFabric.create("stalled-worker");
        Arena arena = Arena.ofShared()) {
      FakeEndpoint target = fabric.openEndpoint();
      MemorySegment memory = arena.allocate(count * 64L);
      Advertisement ad = target.expose(memory, RemoteAccess.READ_WRITE).advertisement();
      DmaConfiguration configuration =
          DmaConfiguration.builder()
              .providers("fake")
              .interfaces(List.of(fabric.name()))
              .maxInFlight(64)
              .completionDeadline(DEADLINE)
              .build();
      try (SteppedWorker<Buffer> service = SteppedWorker.start(configuration, recorder, clock)) {
        recorder.steppedBy(service);
        fabric.script().holdCompletions();
        for (int i = 0; i < count; i++) {
          Advertisement slot =
              new Advertisement(ad.address(), ad.remoteKey(), ad.remoteAddress() + i * 64L, 64);
          MemorySegment source = arena.allocate(64);
          source.fill((byte) (i + 1));
          assertTrue(service.submit(TransferRequest.write(7, slot, new Buffer(i, source))));
        }
        service.stepUntil(
            () -> fabric.script().heldCompletions() >= count, "not every write was posted");
        // Everything is in flight. Stall the worker inside its next clock read; while it is away,
        // the provider completes every write and twice the deadline passes.
        AtomicInteger released = new AtomicInteger();
        clock.stallNextRead(
            () -> {
              fabric.script().stopHolding();
              released.set(fabric.script().releaseCompletions());
              clock.advance(DEADLINE.multipliedBy(2));
            });
        service.stepUntil(clock::stalled, "the worker's next clock read");
        assertEquals(count, released.get());

        for (Completion<Buffer> completion : recorder.take(count)) {
          assertTrue(
              completion.outcome().isDone(),
              () -> "a completed write failed: " + completion.outcome().error());
        }
        assertEquals(0, fabric.counters().resets(), "reset the endpoint over a stall");
        // Nobody was marked dead: the same client is served at once.
        MemorySegment again = arena.allocate(64);
        again.fill((byte) 1);
        assertTrue(service.submit(TransferRequest.write(7, ad, new Buffer(99, again))));
        assertTrue(recorder.take().outcome().isDone(), "the client was marked dead");
        for (int i = 0; i < count; i++) {
          assertEquals(
              (byte) (i + 1), memory.get(java.lang.foreign.ValueLayout.JAVA_BYTE, i * 64L));
        }
      }
      target.close();
    }
  }

  @Test
  @Timeout(60)
  void laterExpiriesDoNotPushBackTheResetOfAFlushThatNeverCame() throws Exception {
    ManualTicker ticker = new ManualTicker();
    Recorder<Buffer> recorder = new Recorder<>();
    try (FakeFabric fabric = FakeFabric.create("flush-grace");
        Arena arena = Arena.ofShared()) {
      FakeEndpoint stuck = fabric.openEndpoint();
      Advertisement ad =
          stuck.expose(arena.allocate(4096), RemoteAccess.READ_WRITE).advertisement();
      DmaConfiguration configuration =
          DmaConfiguration.builder()
              .providers("fake")
              .interfaces(List.of(fabric.name()))
              .completionDeadline(DEADLINE)
              .build();
      // Before the start: the worker reads what the endpoint declares once, as it starts.
      fabric.script().flushOnRemove(true);
      try (SteppedWorker<Buffer> service = SteppedWorker.start(configuration, recorder, ticker)) {
        recorder.steppedBy(service);
        byte[] stuckAddress = stuck.localAddress();
        fabric.script().holdCompletions(op -> Arrays.equals(op.peer(), stuckAddress));
        // Three clients share the stuck peer's entry, so releasing one removes nothing and no
        // flush comes; their writes expire one after another, 0.8 s apart.
        service.addPeer(1, ad.address());
        service.addPeer(2, ad.address());
        service.addPeer(3, ad.address());
        for (int client = 1; client <= 3; client++) {
          assertTrue(
              service.submit(
                  TransferRequest.write(client, ad, new Buffer(client, arena.allocate(64)))));
          int posted = client;
          service.stepUntil(
              () -> fabric.script().heldCompletions() >= posted, "the write was not posted");
          // A reading after the post, so its time is known to the millisecond.
          service.advanceAndRead(ticker, Duration.ZERO);
          if (client < 3) {
            service.advanceAndRead(ticker, Duration.ofMillis(800));
          }
        }
        // 1.6 s. At 2.0 s client 1's write expires and arms a grace of 1 s; at 2.8 s client 2's
        // expires inside it (client 3's would at 3.6 s).
        service.advanceAndRead(ticker, Duration.ofMillis(400));
        assertNull(recorder.poll(200), "delivered before the provider let go of the operand");
        service.advanceAndRead(ticker, Duration.ofMillis(800));
        assertNull(recorder.poll(200), "delivered before the provider let go of the operand");
        service.advanceAndRead(ticker, Duration.ofMillis(300));
        // 3.1 s: the grace armed at 2.0 s has run out and the reset comes: the two expired writes
        // fail by the deadline, and client 3's, caught in flight, as reset (a write is not posted
        // again after a reset).
        List<Completion<Buffer>> failed = recorder.take(3);
        for (Completion<Buffer> completion : failed) {
          DmaException error = completion.outcome().error();
          DmaException.Reason expected =
              completion.context().id == 3
                  ? DmaException.Reason.ENDPOINT_RESET
                  : DmaException.Reason.DEADLINE;
          assertEquals(expected, error.reason(), error.getMessage());
          assertEquals(DmaException.TargetMemory.MAY_HAVE_CHANGED, error.targetMemory());
        }
        assertEquals(1, fabric.counters().resets());
        assertEquals(0, fabric.counters().flushedOps());
      }
      stuck.close();
    }
  }

  /**
   * A provider that keeps producing completions cannot hold the scan's reap for ever: the scan
   * reaps at most a full window plus one batch (20 + 10 here: three reaps of ten), then judges.
   */
  @Test
  @Timeout(value = 60, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
  void aProviderThatKeepsProducingHoldsTheScanForAWindowAndABatchOnly() throws Exception {
    ManualTicker ticker = new ManualTicker();
    Recorder<Buffer> recorder = new Recorder<>();
    AtomicReference<WrappedFakeEndpoint> wrapped = new AtomicReference<>();
    try (FakeFabric fabric = FakeFabric.create("flooding-provider");
        Arena arena = Arena.ofShared()) {
      FakeEndpoint target = fabric.openEndpoint();
      Advertisement ad =
          target.expose(arena.allocate(4096), RemoteAccess.READ_WRITE).advertisement();
      DmaConfiguration configuration =
          DmaConfiguration.builder()
              .providers("fake")
              .interfaces(List.of(fabric.name()))
              .maxInFlight(20)
              .completionDeadline(DEADLINE)
              .build();
      try (SteppedWorker<Buffer> service =
          SteppedWorker.start(
              configuration,
              recorder,
              ticker,
              endpoint -> {
                wrapped.set(new WrappedFakeEndpoint(endpoint, Set.of()));
                return wrapped.get();
              })) {
        recorder.steppedBy(service);
        WrappedFakeEndpoint endpoint = wrapped.get();
        fabric.script().holdCompletions();
        assertTrue(service.submit(TransferRequest.write(7, ad, new Buffer(1, arena.allocate(64)))));
        service.stepUntil(() -> fabric.script().heldCompletions() == 1, "the write posted");
        endpoint.floodStrayCompletions(true);
        // Past the scan interval (a sixteenth of the deadline, at most 100 ms): one scan is due.
        ticker.advance(Duration.ofMillis(200));
        List<Long> reapsPerPass = new ArrayList<>();
        for (int pass = 0; pass < 2 * SteppedWorker.QUIET_PASSES; pass++) {
          long before = endpoint.reaps();
          service.step();
          reapsPerPass.add(endpoint.reaps() - before);
        }
        // Every pass reaps once; the one with the scan three times more.
        assertEquals(
            1, reapsPerPass.stream().filter(reaps -> reaps == 4).count(), "" + reapsPerPass);
        assertEquals(
            reapsPerPass.size() - 1,
            reapsPerPass.stream().filter(reaps -> reaps == 1).count(),
            "" + reapsPerPass);

        endpoint.floodStrayCompletions(false);
        fabric.script().stopHolding();
        assertEquals(1, fabric.script().releaseCompletions());
        assertTrue(recorder.take().outcome().isDone());
        assertEquals(0, fabric.counters().resets());
      }
      target.close();
    }
  }
}
