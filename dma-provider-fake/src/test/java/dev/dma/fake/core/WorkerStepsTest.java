package dev.dma.fake.core;

import static org.junit.jupiter.api.Assertions.assertEquals;
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
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Worker behaviours pinned pass by pass on the stepped harness ({@link SteppedWorker}), each found
 * unpinned by mutation testing (docs/mutation.md): when a full batch goes out, and when a client's
 * peer leaves the address vector.
 */
@Timeout(60)
class WorkerStepsTest {
  // A fabric name is the fabric's identity: one per test, also when an earlier one was not closed.
  private static final AtomicInteger FABRICS = new AtomicInteger();

  private final Recorder<Buffer> recorder = new Recorder<>();
  private FakeFabric fabric;
  private Arena arena;
  private FakeEndpoint target;
  private Advertisement ad;
  private SteppedWorker<Buffer> worker;

  @BeforeEach
  void open() {
    fabric = FakeFabric.create("worker-steps-" + FABRICS.incrementAndGet());
    arena = Arena.ofShared();
    target = fabric.openEndpoint();
    ad = target.expose(arena.allocate(4096), RemoteAccess.READ_WRITE).advertisement();
    DmaConfiguration configuration =
        DmaConfiguration.builder()
            .providers("fake")
            .interfaces(List.of(fabric.name()))
            .maxInFlight(16)
            .build();
    worker = SteppedWorker.start(configuration, recorder, new ManualTicker());
    recorder.steppedBy(worker);
  }

  @AfterEach
  void close() {
    fabric.script().reset();
    fabric.script().stopHolding();
    fabric.script().releaseCompletions();
    worker.close();
    target.close();
    fabric.close();
    arena.close();
  }

  private TransferRequest<Buffer> write(long client, int id) {
    return write(client, id, 64);
  }

  private TransferRequest<Buffer> write(long client, int id, int length) {
    MemorySegment source = arena.allocate(length);
    source.fill((byte) id);
    return TransferRequest.write(client, ad, new Buffer(id, source));
  }

  /**
   * A partial batch waits a few passes for company while more can complete; a full one (ten, {@code
   * FabricWorker.TARGET_COMPLETIONS}) goes out in the pass that reaped it, even with more in
   * flight.
   */
  @Test
  void aFullBatchIsDeliveredInThePassThatReapsItWhileMoreAreInFlight() throws Exception {
    fabric.script().holdCompletions();
    for (int i = 0; i < 11; i++) {
      assertTrue(worker.submit(write(1, i)));
    }
    worker.stepUntil(() -> fabric.script().heldCompletions() == 11, "eleven posted");
    worker.step();
    assertEquals(0, recorder.queue.size());
    // Release ten only (op slots 0 to 9, the first the worker hands out): one pass reaps ten (its
    // most) and delivers them, with the eleventh still held.
    assertEquals(10, fabric.script().releaseCompletions(0, 1, 2, 3, 4, 5, 6, 7, 8, 9));
    assertEquals(1, fabric.script().heldCompletions());
    int work = worker.step();
    assertEquals(10, recorder.queue.size(), "a full batch held back with one more in flight");
    assertEquals(20, work, "ten reaped and ten delivered");
    assertEquals(List.of(10), recorder.batchSizes);
    assertEquals(1, worker.outstanding());
  }

  /**
   * Each completion reports the length its own transfer posted, also when lengths change from one
   * transfer to the next (the worker shares one outcome while they repeat), and one post.
   */
  @Test
  void eachCompletionCarriesItsOwnLengthAndPostCount() throws Exception {
    int[] lengths = {64, 64, 128, 64, 256, 256};
    for (int i = 0; i < lengths.length; i++) {
      assertTrue(worker.submit(write(1 + i % 2, i, lengths[i])));
      Completion<Buffer> completion = recorder.take();
      assertEquals(i, completion.context().id);
      assertEquals(lengths[i], completion.outcome().done().bytes(), "transfer " + i);
      assertEquals(1, completion.posts(), "transfer " + i);
    }
    assertEquals(0, worker.outstanding());
  }

  /**
   * A client's peer stays in the address vector when its transfers finish (the next transfer reuses
   * it, inserting nothing), and leaves it only when it was removed with transfers posted, once the
   * last of them is done.
   */
  @Test
  void aPeerLeavesTheAddressVectorOnlyWhenRemovedAndItsLastTransferIsDone() throws Exception {
    worker.addPeer(1, ad.address());
    assertEquals(1, fabric.counters().inserts());
    assertTrue(worker.submit(write(1, 0)));
    Completion<Buffer> first = recorder.take();
    assertTrue(first.outcome().isDone());
    worker.stepQuietly();
    assertTrue(worker.submit(write(1, 1)));
    assertTrue(recorder.take().outcome().isDone());
    worker.stepQuietly();
    assertEquals(1, fabric.counters().inserts(), "the peer was inserted again");
    assertEquals(0, fabric.counters().removes(), "a finished transfer removed its peer");

    fabric.script().holdCompletions();
    assertTrue(worker.submit(write(1, 2)));
    worker.stepUntil(() -> fabric.script().heldCompletions() == 1, "the post");
    worker.removePeer(1);
    worker.stepQuietly();
    assertEquals(0, fabric.counters().removes(), "removed under a posted transfer");
    fabric.script().stopHolding();
    fabric.script().releaseCompletions();
    assertTrue(recorder.take().outcome().isDone());
    worker.stepUntil(() -> fabric.counters().removes() == 1, "the deferred removal");
    assertEquals(1, fabric.counters().inserts());
    assertEquals(0, worker.outstanding());
  }
}
