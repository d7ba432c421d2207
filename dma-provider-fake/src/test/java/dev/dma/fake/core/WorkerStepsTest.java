package dev.dma.fake.core;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dma.api.Advertisement;
import dev.dma.api.Checksum;
import dev.dma.api.Checksums;
import dev.dma.api.Completion;
import dev.dma.api.DmaConfiguration;
import dev.dma.api.DmaException;
import dev.dma.api.RemoteAccess;
import dev.dma.api.TransferRequest;
import dev.dma.fake.FakeEndpoint;
import dev.dma.fake.FakeFabric;
import dev.dma.spi.CompletionSink;
import dev.dma.spi.FabricEndpoint;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Proxy;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.UnaryOperator;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Worker behaviours pinned pass by pass on the stepped harness ({@link SteppedWorker}), each found
 * unpinned by mutation testing (docs/mutation.md): when a full batch goes out, when a client's peer
 * leaves the address vector, that a completion for a slot holding no operation is ignored, how a
 * client's own transfers in flight and the reap that leaves nothing in flight decide when a refused
 * post fails, and what a pass counts as work.
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
  private final ManualTicker ticker = new ManualTicker();
  private SteppedWorker<Buffer> worker;

  @BeforeEach
  void open() {
    fabric = FakeFabric.create("worker-steps-" + FABRICS.incrementAndGet());
    arena = Arena.ofShared();
    target = fabric.openEndpoint();
    ad = target.expose(arena.allocate(4096), RemoteAccess.READ_WRITE).advertisement();
  }

  /**
   * Starts the worker with a cap of 16, the configuration {@code tweak} changes, over {@code
   * wrap}'s endpoint.
   */
  private void start(
      UnaryOperator<DmaConfiguration.Builder> tweak, UnaryOperator<FabricEndpoint> wrap) {
    DmaConfiguration configuration =
        tweak
            .apply(
                DmaConfiguration.builder()
                    .providers("fake")
                    .interfaces(List.of(fabric.name()))
                    .maxInFlight(16))
            .build();
    worker = SteppedWorker.start(configuration, recorder, ticker, wrap);
    recorder.steppedBy(worker);
  }

  private void start() {
    start(UnaryOperator.identity(), UnaryOperator.identity());
  }

  @AfterEach
  void close() {
    fabric.script().reset();
    fabric.script().stopHolding();
    fabric.script().releaseCompletions();
    if (worker != null) {
      worker.close();
    }
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
    start();
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
    start();
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
    start();
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

  /** Faults the fake cannot be scripted to make, each armed for one call. */
  private static final class Faults {
    // The next reap first reports four slots that hold no operation: below 0, the cap (16), past
    // it (as a failure), and a free slot inside it (5).
    final AtomicBoolean straySlots = new AtomicBoolean();
    // The next reap first fails slot 0 by errno (the overload with no reason).
    final AtomicBoolean failSlotZeroByErrno = new AtomicBoolean();
    // The next post throws, as a provider bug would.
    final AtomicBoolean postThrows = new AtomicBoolean();
  }

  /** The endpoint, with {@code faults} armed by the test. */
  private static FabricEndpoint faulty(FabricEndpoint real, Faults faults) {
    return (FabricEndpoint)
        Proxy.newProxyInstance(
            FabricEndpoint.class.getClassLoader(),
            new Class<?>[] {FabricEndpoint.class},
            (proxy, method, args) -> {
              String name = method.getName();
              if (name.equals("reap")) {
                CompletionSink sink = (CompletionSink) args[0];
                if (faults.straySlots.getAndSet(false)) {
                  sink.completed(-1);
                  sink.completed(16);
                  sink.failed(17, 5, 0, "a stray failure (by the test)");
                  sink.completed(5);
                }
                if (faults.failSlotZeroByErrno.getAndSet(false)) {
                  sink.failed(0, 5, 7, "failed by errno (by the test)");
                }
              }
              if ((name.equals("postWrite") || name.equals("postRead"))
                  && faults.postThrows.getAndSet(false)) {
                throw new IllegalStateException("a provider bug (by the test)");
              }
              try {
                return method.invoke(real, args);
              } catch (InvocationTargetException e) {
                throw e.getCause();
              }
            });
  }

  /**
   * A completion the provider reports for a slot that holds no operation (out of range either way,
   * or free) is ignored: the transfer in flight stays in flight and completes once, the slots stay
   * accounted, and the worker keeps posting into them.
   */
  @Test
  void aCompletionForASlotThatHoldsNoOperationIsIgnored() throws Exception {
    Faults faults = new Faults();
    AtomicBoolean strays = faults.straySlots;
    start(UnaryOperator.identity(), real -> faulty(real, faults));
    fabric.script().holdCompletions();
    assertTrue(worker.submit(write(1, 0)));
    worker.stepUntil(() -> fabric.script().heldCompletions() == 1, "the post");
    strays.set(true);
    worker.step();
    assertFalse(strays.get(), "no reap reported the stray slots");
    assertTrue(recorder.queue.isEmpty(), "a stray completion finished a transfer");
    assertEquals(1, worker.outstanding());
    assertNull(worker.accountingViolation());

    fabric.script().stopHolding();
    assertEquals(1, fabric.script().releaseCompletions());
    Completion<Buffer> first = recorder.take();
    assertEquals(0, first.context().id);
    assertTrue(first.outcome().isDone());
    for (int i = 1; i <= 16; i++) {
      assertTrue(worker.submit(write(1, i)));
    }
    List<Completion<Buffer>> rest = recorder.take(16);
    assertTrue(rest.stream().allMatch(each -> each.outcome().isDone()), rest.toString());
    worker.stepQuietly();
    assertTrue(recorder.queue.isEmpty(), "completed twice");
    assertEquals(0, worker.outstanding());
    assertNull(worker.accountingViolation());
  }

  /**
   * A client with a transfer in flight is judged by that transfer, not by its posts the provider
   * refuses meanwhile: one refused with -FI_EAGAIN for five times the progress deadline still waits
   * (the completion of the one in flight frees what the provider is short of), then goes out.
   */
  @Test
  void aRefusedPostWaitsWhileItsClientHasATransferInFlight() throws Exception {
    start(
        configuration -> configuration.completionDeadline(Duration.ZERO), UnaryOperator.identity());
    fabric.script().holdCompletions();
    assertTrue(worker.submit(write(1, 0)));
    worker.stepUntil(() -> fabric.script().heldCompletions() == 1, "the post");
    AtomicBoolean refuse = new AtomicBoolean(true);
    fabric.script().againWhile(refuse::get);
    assertTrue(worker.submit(write(1, 1)));
    worker.stepUntil(() -> fabric.counters().againAnswers() > 0, "a refused post");
    worker.advanceAndRead(ticker, Duration.ofSeconds(5));
    worker.stepQuietly();
    assertTrue(recorder.queue.isEmpty(), "failed with its client's transfer in flight");
    assertEquals(2, worker.outstanding());

    refuse.set(false);
    fabric.script().stopHolding();
    fabric.script().releaseCompletions();
    for (Completion<Buffer> completion : recorder.take(2)) {
      assertTrue(completion.outcome().isDone(), completion.toString());
      assertEquals(1, completion.posts());
    }
    assertEquals(0, worker.outstanding());
  }

  /**
   * Once a client's last transfer in flight is reaped, its posts the provider keeps refusing are
   * judged again (another client's transfer is still in flight): failed at the progress deadline as
   * refused while other transfers were in flight, the other client's transfer untouched.
   */
  @Test
  void aClientWhoseTransferInFlightWasReapedIsJudgedByItsRefusedPosts() throws Exception {
    start(
        configuration -> configuration.completionDeadline(Duration.ZERO), UnaryOperator.identity());
    fabric.script().holdCompletions();
    assertTrue(worker.submit(write(1, 0)));
    assertTrue(worker.submit(write(2, 1)));
    worker.stepUntil(() -> fabric.script().heldCompletions() == 2, "two posts");
    fabric.script().againWhile(() -> true);
    assertTrue(worker.submit(write(1, 2)));
    worker.stepUntil(() -> fabric.counters().againAnswers() > 0, "a refused post");
    // Slot 0: client 1's transfer, the first posted.
    assertEquals(1, fabric.script().releaseCompletions(0));
    Completion<Buffer> reaped = recorder.take();
    assertEquals(0, reaped.context().id);
    assertTrue(reaped.outcome().isDone());

    worker.advanceAndRead(ticker, Duration.ofSeconds(5));
    worker.stepQuietly();
    Completion<Buffer> refused = recorder.queue.poll();
    assertNotNull(refused, "a refused post of a client with nothing in flight never failed");
    assertEquals(2, refused.context().id);
    DmaException error = refused.outcome().error();
    assertEquals(DmaException.Reason.DEADLINE, error.reason());
    assertTrue(
        error.getMessage().contains("while other transfers were in flight"), error.getMessage());
    assertEquals(0, refused.posts());
    assertEquals(1, worker.outstanding(), "client 2's transfer");
    assertTrue(recorder.queue.isEmpty());
  }

  /**
   * With nothing in flight, a post refused since long before fails at the progress deadline counted
   * from the reap that left nothing in flight, not from its first refusal: until that reap, the
   * transfer in flight could have held what the provider was short of.
   */
  @Test
  void theIdleProgressDeadlineCountsFromTheReapThatLeftNothingInFlight() throws Exception {
    start(); // progress deadline 1 s; a refused post waits up to 30 s while others are in flight
    fabric.script().holdCompletions();
    assertTrue(worker.submit(write(2, 0)));
    worker.stepUntil(() -> fabric.script().heldCompletions() == 1, "the post");
    fabric.script().againWhile(() -> true);
    assertTrue(worker.submit(write(1, 1)));
    worker.stepUntil(() -> fabric.counters().againAnswers() > 0, "a refused post");
    worker.advanceAndRead(ticker, Duration.ofSeconds(10));
    assertEquals(1, fabric.script().releaseCompletions());
    Completion<Buffer> reaped = recorder.take();
    assertEquals(0, reaped.context().id);
    worker.stepQuietly();
    assertTrue(
        recorder.queue.isEmpty(), "failed at once when the last transfer in flight was reaped");

    worker.advanceAndRead(ticker, Duration.ofSeconds(2));
    worker.stepQuietly();
    Completion<Buffer> refused = recorder.queue.poll();
    assertNotNull(refused, "not failed a progress deadline after the reap");
    assertEquals(1, refused.context().id);
    assertTrue(
        refused.outcome().error().getMessage().contains("with nothing else in flight"),
        refused.outcome().error().getMessage());
    assertEquals(0, worker.outstanding());
  }

  /**
   * A checksummed completion handed to the checksum pool counts as work in the pass that hands it
   * over, as a plain one delivered does: one reaped plus one handed over, when nothing else is left
   * to post or reap.
   */
  @Test
  void aChecksummedCompletionHandedToThePoolCountsAsWork() throws Exception {
    start();
    fabric.script().holdCompletions();
    MemorySegment source = arena.allocate(64);
    source.fill((byte) 3);
    assertTrue(
        worker.submit(
            TransferRequest.write(1, ad, new Buffer(0, source)).withChecksum(Checksum.CRC32C)));
    worker.stepUntil(() -> fabric.script().heldCompletions() == 1, "the post");
    assertEquals(0, worker.step(), "a pass with the completion held did work");
    fabric.script().stopHolding();
    assertEquals(1, fabric.script().releaseCompletions());
    assertEquals(2, worker.step(), "one reaped and one handed to the pool");
    Completion<Buffer> completion = recorder.take();
    assertEquals(Checksums.crc32c(source), completion.outcome().done().checksum().getAsInt());
  }

  /**
   * A failure the provider reports by errno alone fails its transfer with that errno's reason and
   * the provider's text; the transfer is not posted again.
   */
  @Test
  void aFailureReportedByErrnoFailsItsTransfer() throws Exception {
    Faults faults = new Faults();
    start(UnaryOperator.identity(), real -> faulty(real, faults));
    fabric.script().holdCompletions();
    assertTrue(worker.submit(write(1, 0)));
    worker.stepUntil(() -> fabric.script().heldCompletions() == 1, "the post");
    faults.failSlotZeroByErrno.set(true);
    Completion<Buffer> failed = recorder.take();
    DmaException error = failed.outcome().error();
    assertEquals(DmaException.Reason.ofErrno(5), error.reason());
    assertTrue(error.getMessage().contains("failed by errno (by the test)"), error.getMessage());
    assertEquals(1, failed.posts());
    assertEquals(0, worker.outstanding());
    assertNull(worker.accountingViolation());
  }

  /**
   * A post that throws (a provider bug) fails that transfer alone and gives its slot back: the
   * slots stay accounted and the next transfers fill the whole window.
   */
  @Test
  void aPostThatThrowsFailsItsTransferAndGivesItsSlotBack() throws Exception {
    Faults faults = new Faults();
    start(configuration -> configuration.maxInFlight(2), real -> faulty(real, faults));
    faults.postThrows.set(true);
    assertTrue(worker.submit(write(1, 0)));
    Completion<Buffer> failed = recorder.take();
    assertTrue(
        failed.outcome().error().getMessage().contains("a provider bug (by the test)"),
        failed.outcome().error().getMessage());
    assertEquals(0, failed.posts());
    assertNull(worker.accountingViolation());
    fabric.script().holdCompletions();
    assertTrue(worker.submit(write(1, 1)));
    assertTrue(worker.submit(write(1, 2)));
    worker.stepUntil(() -> fabric.script().heldCompletions() == 2, "both posted");
    assertNull(worker.accountingViolation());
    fabric.script().stopHolding();
    fabric.script().releaseCompletions();
    for (Completion<Buffer> completion : recorder.take(2)) {
      assertTrue(completion.outcome().isDone(), completion.toString());
    }
  }

  /** A post the provider refuses outright fails its transfer, never posted, naming the post. */
  @Test
  void aPostRefusedOutrightFailsItsTransfer() throws Exception {
    start();
    fabric.script().failNextPosts(1, 2);
    assertTrue(worker.submit(write(1, 0)));
    Completion<Buffer> failed = recorder.take();
    DmaException error = failed.outcome().error();
    assertTrue(error.getMessage().contains("post: "), error.getMessage());
    assertEquals(DmaException.TargetMemory.UNCHANGED, error.targetMemory());
    assertEquals(0, failed.posts());
    assertEquals(0, worker.outstanding());
    assertNull(worker.accountingViolation());
  }

  /**
   * A post refused with -FI_EAGAIN holds back the rest of its client's queue for the pass: they are
   * not tried (each would be refused too), keep their order, and go out in the next pass.
   */
  @Test
  void aRefusedPostHoldsBackItsClientsOtherTransfersForThePass() throws Exception {
    start();
    fabric.script().againTimes(1);
    assertTrue(worker.submit(write(1, 0)));
    assertTrue(worker.submit(write(1, 1)));
    long attempts = fabric.counters().postAttempts();
    assertEquals(2, worker.step(), "two taken in, none posted");
    assertEquals(attempts + 1, fabric.counters().postAttempts(), "the second was tried too");
    List<Completion<Buffer>> done = recorder.take(2);
    assertEquals(List.of(0L, 1L), done.stream().map(each -> each.context().id).toList());
    assertTrue(done.stream().allMatch(each -> each.outcome().isDone()), done.toString());
    assertEquals(attempts + 3, fabric.counters().postAttempts());
  }

  /**
   * A refused client holds back only its own transfers: a pass ends early once every client with
   * anything outstanding was refused in it, not before, so another client's transfer queued behind
   * the refused ones still goes out in the same pass; the refused client's keep their order.
   */
  @Test
  void aRefusedClientDoesNotHoldBackAnotherClientQueuedBehindIt() throws Exception {
    start();
    fabric.script().againTimes(1);
    assertTrue(worker.submit(write(1, 0)));
    assertTrue(worker.submit(write(1, 1)));
    assertTrue(worker.submit(write(2, 2)));
    long attempts = fabric.counters().postAttempts();
    worker.step();
    assertEquals(
        attempts + 2, fabric.counters().postAttempts(), "client 1's first, then client 2's");
    assertEquals(2, recorder.take().context().id, "client 2's went out in the refused pass");
    List<Completion<Buffer>> done = recorder.take(2);
    assertEquals(List.of(0L, 1L), done.stream().map(each -> each.context().id).toList());
    assertTrue(done.stream().allMatch(each -> each.outcome().isDone()), done.toString());
  }

  /**
   * Once every client with a transfer queued was refused in a pass, the pass stops posting: the
   * transfers it did not reach are not tried, and go out in their order in later passes.
   */
  @Test
  void aPassStopsPostingOnceEveryClientWasRefused() throws Exception {
    start();
    fabric.script().againTimes(2);
    for (int id = 0; id < 6; id++) {
      assertTrue(worker.submit(write(1 + id % 2, id)));
    }
    long attempts = fabric.counters().postAttempts();
    worker.step();
    assertEquals(attempts + 2, fabric.counters().postAttempts(), "one post per client");
    List<Completion<Buffer>> done = recorder.take(6);
    assertEquals(
        List.of(0L, 2L, 4L),
        done.stream().map(each -> each.context().id).filter(id -> id % 2 == 0).toList());
    assertEquals(
        List.of(1L, 3L, 5L),
        done.stream().map(each -> each.context().id).filter(id -> id % 2 == 1).toList());
    assertTrue(done.stream().allMatch(each -> each.outcome().isDone()), done.toString());
  }

  /**
   * A pass counts what it took in and posted, and a completion deadline scan as one; a pass with
   * nothing to do counts nothing.
   */
  @Test
  void aPassCountsMessagesTakenInPostsAndADeadlineScan() throws Exception {
    start();
    fabric.script().holdCompletions();
    assertTrue(worker.submit(write(1, 0)));
    assertTrue(worker.submit(write(1, 1)));
    // The first pass with transfers in flight also runs the deadline scan (none ran before).
    assertEquals(5, worker.step(), "two taken in, two posted and a deadline scan");
    worker.advanceAndRead(ticker, Duration.ofSeconds(1));
    assertEquals(0, worker.step(), "a pass with both completions held");
    ticker.advance(Duration.ofSeconds(1));
    long reads = ticker.reads();
    int work = 0;
    for (int pass = 0; ticker.reads() == reads; pass++) {
      assertTrue(pass < 10_000, "the clock was not read");
      work += worker.step();
    }
    assertEquals(1, work, "the passes up to the clock's next reading: one deadline scan");
  }

  /**
   * A plain completion waits up to ten passes ({@code MAX_DRAIN_SPINS}) for company while another
   * transfer is in flight, and goes out in the eleventh.
   */
  @Test
  void aPartialBatchWaitsTenPassesForCompanyWhileOthersAreInFlight() throws Exception {
    start();
    fabric.script().holdCompletions();
    assertTrue(worker.submit(write(1, 0)));
    assertTrue(worker.submit(write(1, 1)));
    worker.stepUntil(() -> fabric.script().heldCompletions() == 2, "both posted");
    assertEquals(1, fabric.script().releaseCompletions(0));
    assertEquals(1, worker.step(), "reaped and held for company");
    for (int pass = 2; pass <= 10; pass++) {
      worker.step();
      assertTrue(recorder.queue.isEmpty(), "delivered in pass " + pass);
    }
    assertEquals(1, worker.step(), "delivered in the eleventh pass");
    assertEquals(0, recorder.queue.poll().context().id);
  }

  /**
   * A reaped checksummed completion stays with the worker in the pass that reaped it while another
   * transfer is in flight, and goes to the pool in the next pass that moves nothing.
   */
  @Test
  void aChecksummedCompletionGoesToThePoolInThePassAfterItsReap() throws Exception {
    start();
    fabric.script().holdCompletions();
    MemorySegment source = arena.allocate(64);
    source.fill((byte) 5);
    assertTrue(
        worker.submit(
            TransferRequest.write(1, ad, new Buffer(0, source)).withChecksum(Checksum.CRC32C)));
    assertTrue(worker.submit(write(1, 1)));
    worker.stepUntil(() -> fabric.script().heldCompletions() == 2, "both posted");
    assertEquals(1, fabric.script().releaseCompletions(0));
    assertEquals(1, worker.step(), "reaped, not yet handed over");
    assertEquals(1, worker.step(), "handed to the pool in a pass that moved nothing");
    Completion<Buffer> completion = recorder.take();
    assertEquals(0, completion.context().id);
    assertEquals(Checksums.crc32c(source), completion.outcome().done().checksum().getAsInt());
    assertEquals(1, fabric.script().heldCompletions());
  }

  /**
   * A group's failure hook that takes a failed transfer over gets it with the worker's count of
   * successes and its posts; the worker then delivers nothing for it, and keeps no count or client
   * record of it.
   */
  @Test
  void aFailureHookThatTakesATransferOverLeavesNothingBehind() throws Exception {
    start();
    List<String> told = new ArrayList<>();
    worker.failureHook(
        (request, operand, error, posts, succeeded) -> {
          told.add(request.context().id + " posts " + posts + " after " + succeeded);
          return true;
        });
    assertTrue(worker.submit(write(1, 0)));
    assertTrue(worker.submit(write(1, 1)));
    assertEquals(2, recorder.take(2).size());
    fabric.script().failNextOps(1, 13, 13, "refused (by the test)");
    assertTrue(worker.submit(write(1, 2)));
    worker.stepUntil(() -> !told.isEmpty(), "the hook told");
    worker.stepQuietly();
    assertEquals(List.of("2 posts 1 after 2"), told);
    assertTrue(recorder.queue.isEmpty(), "delivered a transfer the hook took over");
    assertEquals(0, worker.outstanding());
    assertNull(worker.accountingViolation());
  }
}
