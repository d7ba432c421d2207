package dev.dma.fake.core;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dma.api.Advertisement;
import dev.dma.api.Completion;
import dev.dma.api.DmaConfiguration;
import dev.dma.api.RemoteAccess;
import dev.dma.api.TransferRequest;
import dev.dma.fake.FakeEndpoint;
import dev.dma.fake.FakeFabric;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The worker's own accounting check ({@code WorkerAccounting.violation}), which the simulator asks
 * between passes: on a sound worker it reports nothing in every state a pass leaves it in (idle,
 * ops posted and queued for several clients, a client's ops draining, all drained), so that a
 * violation it reports is the worker's, never the check's. Stepped on the test's thread.
 */
@Timeout(60)
class AccountingCheckTest {
  // A fabric name is the fabric's identity: one per test, also when an earlier one was not closed.
  private static final AtomicInteger FABRICS = new AtomicInteger();

  @Test
  void aSoundWorkerReportsNoViolationInAnyStateItPassesThrough() throws Exception {
    Recorder<Buffer> recorder = new Recorder<>();
    try (FakeFabric fabric = FakeFabric.create("accounting-check-" + FABRICS.incrementAndGet());
        Arena arena = Arena.ofShared();
        FakeEndpoint target = fabric.openEndpoint()) {
      Advertisement ad =
          target.expose(arena.allocate(4096), RemoteAccess.READ_WRITE).advertisement();
      DmaConfiguration configuration =
          DmaConfiguration.builder()
              .providers("fake")
              .interfaces(List.of(fabric.name()))
              .maxInFlight(4)
              .build();
      try (SteppedWorker<Buffer> worker =
          SteppedWorker.start(configuration, recorder, new ManualTicker())) {
        recorder.steppedBy(worker);
        try {
          assertNull(worker.accountingViolation(), "a fresh worker");
          worker.step();
          assertNull(worker.accountingViolation(), "an idle worker after a pass");

          fabric.script().holdCompletions();
          // Ten writes for three clients against a cap of four: four posted, six queued behind
          // them.
          for (int i = 0; i < 10; i++) {
            MemorySegment source = arena.allocate(64);
            source.fill((byte) i);
            assertTrue(worker.submit(TransferRequest.write(1 + i % 3, ad, new Buffer(i, source))));
          }
          worker.stepUntil(() -> fabric.script().heldCompletions() == 4, "four posted");
          assertEquals(10, worker.outstanding());
          assertNull(worker.accountingViolation(), "four posted, six queued, three clients");
          worker.step();
          assertNull(worker.accountingViolation(), "a pass with every completion held");

          // Released pass by pass (the six queued post as room frees): each state between is
          // checked.
          int delivered = 0;
          fabric.script().stopHolding();
          for (int pass = 0; delivered < 10; pass++) {
            assertTrue(pass < 10_000, "only " + delivered + " delivered after " + pass + " passes");
            fabric.script().releaseCompletions();
            worker.step();
            assertNull(worker.accountingViolation(), "after " + delivered + " delivered");
            Completion<Buffer> completion;
            while ((completion = recorder.queue.poll()) != null) {
              assertTrue(completion.outcome().isDone(), completion.toString());
              delivered++;
            }
          }
          assertEquals(0, worker.outstanding());
          worker.stepQuietly();
          assertNull(worker.accountingViolation(), "all drained: no client record left");
          assertEquals(10, delivered);
        } finally {
          // A failed check leaves completions held: release them, so closing does not wait them
          // out.
          fabric.script().stopHolding();
          fabric.script().releaseCompletions();
        }
      }
    }
  }
}
