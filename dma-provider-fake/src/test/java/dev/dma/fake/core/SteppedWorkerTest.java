package dev.dma.fake.core;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dma.api.Advertisement;
import dev.dma.api.Checksums;
import dev.dma.api.DmaConfiguration;
import dev.dma.api.RemoteAccess;
import dev.dma.api.TransferRequest;
import dev.dma.fake.FakeEndpoint;
import dev.dma.fake.FakeFabric;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The worker's duty cycle, stepped ({@link SteppedWorker}): nothing happens between steps, a step
 * reports the work it did and 0 when nothing moved, and a close finishes the worker once what it
 * holds is done.
 */
@Timeout(60)
class SteppedWorkerTest {
  @Test
  void eachStepDoesThePassesWorkAndSaysHowMuch() throws Exception {
    Recorder<Buffer> recorder = new Recorder<>();
    ManualTicker ticker = new ManualTicker();
    try (FakeFabric fabric = FakeFabric.create("stepped-worker");
        Arena arena = Arena.ofShared();
        FakeEndpoint target = fabric.openEndpoint()) {
      MemorySegment remote = arena.allocate(4096);
      Advertisement ad = target.expose(remote, RemoteAccess.READ_WRITE).advertisement();
      DmaConfiguration configuration =
          DmaConfiguration.builder().providers("fake").interfaces(List.of(fabric.name())).build();
      SteppedWorker<Buffer> worker = SteppedWorker.start(configuration, recorder, ticker);
      try {
        assertEquals(0, worker.step(), "an idle worker did work");
        fabric.script().holdCompletions();
        MemorySegment source = arena.allocate(256);
        source.fill((byte) 7);
        assertTrue(worker.submit(TransferRequest.write(1, ad, new Buffer(1, source))));
        long posts = fabric.counters().posts();
        // The submit woke the worker (it stepped until its clock read), so the write is taken in
        // and posted by now, or by the next step.
        worker.stepUntil(() -> fabric.counters().posts() == posts + 1, "the post");
        assertEquals(1, fabric.script().heldCompletions());
        assertEquals(0, worker.step(), "a pass with the completion held did work");
        assertEquals(null, recorder.queue.poll(), "completed while its completion was held");

        fabric.script().stopHolding();
        assertEquals(1, fabric.script().releaseCompletions());
        // One pass reaps the completion and delivers it: two units of work.
        assertEquals(2, worker.step());
        assertTrue(recorder.queue.poll().outcome().isDone());
        assertEquals(Checksums.crc32c(source), Checksums.crc32c(remote.asSlice(0, 256)));
        assertEquals(0, worker.outstanding());

        worker.beginClose();
        assertFalse(worker.isFinished());
        worker.step();
        assertTrue(worker.isFinished(), "a closed, drained, idle worker did not finish");
      } finally {
        worker.close();
      }
      assertFalse(worker.isRunning());
    }
  }

  /**
   * A pass takes in at most 4,096 messages ({@code FabricWorker.INTAKE_LIMIT}): submitters whose
   * transfers all fail at intake get their room back at once, and must not keep one pass taking
   * them in for ever, their completions never delivered.
   */
  @Test
  void oneStepTakesInABoundedNumberOfMessages() throws Exception {
    Recorder<Buffer> recorder = new Recorder<>();
    try (FakeFabric fabric = FakeFabric.create("stepped-intake");
        Arena arena = Arena.ofShared();
        FakeEndpoint target = fabric.openEndpoint()) {
      Advertisement ad =
          target.expose(arena.allocate(4096), RemoteAccess.READ_WRITE).advertisement();
      DmaConfiguration configuration =
          DmaConfiguration.builder().providers("fake").interfaces(List.of(fabric.name())).build();
      try (SteppedWorker<Buffer> worker =
          SteppedWorker.start(configuration, recorder, new ManualTicker())) {
        int limit = 4096;
        // A heap operand fails at intake: nothing reaches the provider.
        for (int i = 0; i < limit + 10; i++) {
          Buffer onHeap = new Buffer(i, MemorySegment.ofArray(new byte[8]));
          assertTrue(worker.submit(TransferRequest.write(1, ad, onHeap)));
        }
        assertEquals(2 * limit, worker.step(), "taken in and delivered");
        assertEquals(limit, recorder.queue.size());
        assertEquals(20, worker.step());
        assertEquals(limit + 10, recorder.queue.size());
        assertEquals(0, fabric.counters().postAttempts());
        assertEquals(0, worker.outstanding());
      }
    }
  }
}
