package dev.dma.fake.core;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dma.api.Advertisement;
import dev.dma.api.Checksums;
import dev.dma.api.Completion;
import dev.dma.api.DmaConfiguration;
import dev.dma.api.DmaException;
import dev.dma.api.RemoteAccess;
import dev.dma.api.TransferRequest;
import dev.dma.fake.FakeEndpoint;
import dev.dma.fake.FakeFabric;
import dev.dma.fake.OpMatcher;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A client that leaves (removePeer) with a write posted that its provider never completes nor
 * flushes (shm from libfabric 2.5 with the target's endpoint closed): the write is judged a second
 * after the client left, not at the completion deadline, and the reset that makes its operand safe
 * waits for the live clients' transfers in flight, so none of them fails or is posted twice; a
 * transfer submitted meanwhile waits and then goes out on the new endpoint. The worker is stepped
 * on the test's thread ({@link SteppedWorker}).
 */
@Timeout(60)
class LeftClientQuietResetTest {
  private static final AtomicInteger FABRICS = new AtomicInteger();
  private static final long GONE = 1;
  private static final long LIVE = 2;

  private static Buffer pattern(Arena arena, long id, int seed) {
    MemorySegment segment = arena.allocate(1024);
    for (int i = 0; i < 1024; i++) {
      segment.set(ValueLayout.JAVA_BYTE, i, (byte) (seed + i * 13));
    }
    return new Buffer(id, segment);
  }

  @Test
  void aLeftClientsStuckWriteIsJudgedBesideLiveTransfersThatComplete() throws Exception {
    FakeFabric fabric = FakeFabric.create("left-quiet-" + FABRICS.incrementAndGet());
    ManualTicker ticker = new ManualTicker();
    Recorder<Buffer> recorder = new Recorder<>();
    try (Arena arena = Arena.ofShared();
        FakeEndpoint gone = fabric.openEndpoint();
        FakeEndpoint live = fabric.openEndpoint()) {
      Advertisement goneAd =
          gone.expose(arena.allocate(4096), RemoteAccess.READ_WRITE).advertisement();
      MemorySegment liveMemory = arena.allocate(4096);
      Advertisement liveAd = live.expose(liveMemory, RemoteAccess.READ_WRITE).advertisement();
      DmaConfiguration configuration =
          DmaConfiguration.builder()
              .providers("fake")
              .interfaces(List.of(fabric.name()))
              .completionDeadline(Duration.ofSeconds(30))
              .build();
      try (SteppedWorker<Buffer> service = SteppedWorker.start(configuration, recorder, ticker)) {
        recorder.steppedBy(service);
        fabric.script().loseCompletions(OpMatcher.toPeer(gone.localAddress()));
        fabric.script().holdCompletions(OpMatcher.toPeer(live.localAddress()));
        assertTrue(service.submit(TransferRequest.write(GONE, goneAd, pattern(arena, 1, 1))));
        Buffer first = pattern(arena, 10, 7);
        assertTrue(service.submit(TransferRequest.write(LIVE, liveAd, first)));
        service.stepUntil(() -> fabric.script().heldCompletions() == 1, "the live write held");
        service.removePeer(GONE);

        // Past the second of grace: the left client's write is judged, but the reset waits for
        // the live write still in flight, and a new live write waits for the reset.
        service.advanceAndRead(ticker, Duration.ofMillis(1_100));
        // The deadline scan runs in the pass after the worker read the new time, and reads the
        // clock itself: after three more reads the left client's write has been judged (stepped,
        // that is exact; ten reads, as when a worker thread ran beside the test).
        for (int i = 0; i < 10; i++) {
          service.advanceAndRead(ticker, Duration.ZERO);
        }
        Buffer second = pattern(arena, 11, 9);
        assertTrue(service.submit(TransferRequest.write(LIVE, liveAd, second)));
        assertNull(recorder.poll(300), "something completed while the live write was held");
        assertEquals(0, fabric.counters().resets());
        assertEquals(2, fabric.counters().posts(), "the new write was posted before the reset");

        fabric.script().stopHolding();
        fabric.script().releaseCompletions();
        List<Completion<Buffer>> all = recorder.take(3);
        for (Completion<Buffer> completion : all) {
          if (completion.context().id == 1) {
            DmaException error = completion.outcome().error();
            assertEquals(DmaException.Reason.DEADLINE, error.reason());
            assertTrue(error.getMessage().contains("after the client left"), error.getMessage());
          } else {
            assertTrue(
                completion.outcome().isDone(), () -> completion.outcome().error().toString());
            assertEquals(1, completion.posts(), "a live write was posted again");
          }
        }
        assertEquals(
            Checksums.crc32c(second.segment), Checksums.crc32c(liveMemory.asSlice(0, 1024)));
        assertEquals(1, fabric.counters().resets());
        assertEquals(0, fabric.counters().violations(), fabric.counters().lastViolation());
      } finally {
        fabric.script().reset();
        fabric.script().releaseCompletions();
      }
    } finally {
      fabric.close();
    }
  }
}
