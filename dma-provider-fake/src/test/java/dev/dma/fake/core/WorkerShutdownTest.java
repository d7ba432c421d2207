package dev.dma.fake.core;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dma.api.Advertisement;
import dev.dma.api.Checksum;
import dev.dma.api.Checksums;
import dev.dma.api.Completion;
import dev.dma.api.DmaConfiguration;
import dev.dma.api.DmaException;
import dev.dma.api.MemoryKind;
import dev.dma.api.RemoteAccess;
import dev.dma.api.TransferRequest;
import dev.dma.core.internal.Commands;
import dev.dma.core.internal.FabricWorker;
import dev.dma.core.internal.Reply;
import dev.dma.core.internal.Traced;
import dev.dma.core.internal.peers.BoundPeer;
import dev.dma.fake.FakeEndpoint;
import dev.dma.fake.FakeFabric;
import dev.dma.spi.FabricEndpoint;
import io.opentelemetry.context.Context;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Proxy;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.UnaryOperator;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The worker's way out ({@code WorkerShutdown}), stepped ({@link SteppedWorker}): whatever it holds
 * when it stops (posted, queued, a checksummed completion not yet handed to the pool, messages
 * never taken in) completes exactly once, in one batch, with the failure that says what happened to
 * it (the worker's cause, the endpoint's failed close, the close timeout), every blocked command
 * caller wakes, the submit count returns to zero and the endpoint closes; an error that ended the
 * worker's loop is rethrown from it. Found unpinned by mutation testing (docs/mutation.md): these
 * paths run only when a worker stops with work left.
 */
@Timeout(60)
class WorkerShutdownTest {
  // A fabric name is the fabric's identity: one per test, also when an earlier one was not closed.
  private static final AtomicInteger FABRICS = new AtomicInteger();

  private final Recorder<Buffer> recorder = new Recorder<>();
  private FakeFabric fabric;
  private Arena arena;
  private FakeEndpoint target;
  private MemorySegment remote;
  private Advertisement ad;
  private SteppedWorker<Buffer> worker;
  private FakeEndpoint workersEndpoint;

  @BeforeEach
  void open() {
    fabric = FakeFabric.create("worker-shutdown-" + FABRICS.incrementAndGet());
    arena = Arena.ofShared();
    target = fabric.openEndpoint();
    remote = arena.allocate(4096);
    remote.fill((byte) 0x5a);
    ad = target.expose(remote, RemoteAccess.READ_WRITE).advertisement();
  }

  @AfterEach
  void close() {
    fabric.script().stopHolding();
    fabric.script().releaseCompletions();
    if (worker != null) {
      worker.close();
    }
    target.close();
    fabric.close();
    arena.close();
  }

  private void start(int maxInFlight, UnaryOperator<FabricEndpoint> wrap) {
    DmaConfiguration configuration =
        DmaConfiguration.builder()
            .providers("fake")
            .interfaces(List.of(fabric.name()))
            .maxInFlight(maxInFlight)
            .build();
    worker = SteppedWorker.start(configuration, recorder, new ManualTicker(), wrap);
    recorder.steppedBy(worker);
    workersEndpoint =
        fabric.endpoints().stream().filter(each -> each != target).findFirst().orElseThrow();
  }

  private TransferRequest<Buffer> write(int id) {
    MemorySegment source = arena.allocate(64);
    source.fill((byte) id);
    return TransferRequest.write(1, ad, new Buffer(id, source));
  }

  private TransferRequest<Buffer> read(int id) {
    return TransferRequest.read(1, ad, 64, new Buffer(id, arena.allocate(64)));
  }

  /** Every completion delivered so far, by context id; fails on a second one for an id. */
  private Map<Long, Completion<Buffer>> byId() {
    Map<Long, Completion<Buffer>> byId = new HashMap<>();
    for (Completion<Buffer> completion : recorder.queue) {
      assertNull(byId.put(completion.context().id, completion), "completed twice: " + completion);
    }
    return byId;
  }

  /**
   * Holds, when this returns: writes 0 (checksummed) and 1 and read 2 posted, write 0's completion
   * reaped into the checksum batch and not yet handed to the pool, writes 3 and 4 queued behind a
   * full window of three.
   */
  private void holdFiveTransfersInEveryState() {
    fabric.script().holdCompletions();
    assertTrue(worker.submit(write(0).withChecksum(Checksum.CRC32C)));
    assertTrue(worker.submit(write(1)));
    assertTrue(worker.submit(read(2)));
    assertTrue(worker.submit(write(3)));
    assertTrue(worker.submit(write(4)));
    worker.stepUntil(() -> fabric.script().heldCompletions() == 3, "three posted");
    // Slot 0 is the first the worker hands out: write 0's. The pass that reaps it keeps it
    // batched (a pass that reaped does not flush a partial checksum batch with more in flight).
    assertEquals(1, fabric.script().releaseCompletions(0));
    worker.step();
    assertEquals(2, fabric.script().heldCompletions());
    assertTrue(recorder.queue.isEmpty(), "something completed before the shut-down");
    // The checksummed one counts as finished once reaped.
    assertEquals(4, worker.outstanding());
  }

  /**
   * A worker stopped by a failure completes every transfer it holds, once and in one batch: the
   * checksummed one already reaped with its checksum (computed inline), the posted ones and the
   * queued ones failed as the worker gone with the failure as cause (a posted write may have
   * landed, nothing else touched the target), and the transfers still on the channel failed as
   * never taken in. A command caller blocked on a reply wakes with the worker gone.
   */
  @Test
  void aWorkerStoppedByAFailureCompletesEverythingItHeldOnceAndWakesEveryCaller() {
    start(3, UnaryOperator.identity());
    holdFiveTransfersInEveryState();
    // Never taken in: a transfer, a traced one, and commands with callers blocked on them.
    assertTrue(worker.offer(write(5)));
    assertTrue(worker.offer(new Traced(write(6), Context.root())));
    Reply<Void> added = new Reply<>();
    assertTrue(worker.offer(new Commands.AddPeer(new BoundPeer(2, ad.address()), added)));
    Reply<Void> pinned = new Reply<>();
    MemorySegment toPin = arena.allocate(4096);
    assertTrue(worker.offer(new Commands.Pin(toPin.address(), 4096, MemoryKind.HOST, pinned)));
    assertTrue(worker.offer(new Commands.RemovePeer(3)));
    assertEquals(6, worker.outstanding());

    IllegalStateException cause = new IllegalStateException("the pass threw (by the test)");
    worker.shutDownNow(cause);

    assertEquals(List.of(7), recorder.batchSizes, "one batch of every transfer held");
    Map<Long, Completion<Buffer>> byId = byId();
    assertEquals(7, byId.size());
    Completion<Buffer> checksummed = byId.get(0L);
    assertTrue(checksummed.outcome().isDone(), checksummed.toString());
    assertEquals(
        Checksums.crc32c(checksummed.context().segment),
        checksummed.outcome().done().checksum().getAsInt());
    assertEquals(64, checksummed.outcome().done().bytes());
    for (long id = 1; id <= 4; id++) {
      Completion<Buffer> completion = byId.get(id);
      DmaException error = completion.outcome().error();
      assertEquals(FabricWorker.WORKER_GONE, error.getMessage(), "transfer " + id);
      assertEquals(DmaException.Reason.CLOSED, error.reason(), "transfer " + id);
      assertSame(cause, error.getCause(), "transfer " + id);
      boolean posted = id <= 2;
      assertEquals(posted ? 1 : 0, completion.posts(), "transfer " + id);
      assertEquals(
          id == 1
              ? DmaException.TargetMemory.MAY_HAVE_CHANGED
              : DmaException.TargetMemory.UNCHANGED,
          error.targetMemory(),
          "transfer " + id);
    }
    for (long id = 5; id <= 6; id++) {
      Completion<Buffer> completion = byId.get(id);
      DmaException error = completion.outcome().error();
      assertEquals(FabricWorker.WORKER_GONE, error.getMessage(), "transfer " + id);
      assertEquals(DmaException.Reason.CLOSED, error.reason(), "transfer " + id);
      assertEquals(0, completion.posts(), "transfer " + id);
    }
    assertEquals(0, worker.outstanding());
    for (Reply<Void> reply : List.of(added, pinned)) {
      DmaException abandoned = assertThrows(DmaException.class, () -> reply.await("abandoned"));
      assertEquals("abandoned", abandoned.getMessage());
    }
    assertTrue(workersEndpoint.isClosed(), "the endpoint stayed open");
    assertEquals(0, fabric.counters().violations(), fabric.counters().lastViolation());
  }

  /** The endpoint, except that its close throws once it has closed it. */
  private static FabricEndpoint closeThrows(FabricEndpoint real) {
    return (FabricEndpoint)
        Proxy.newProxyInstance(
            FabricEndpoint.class.getClassLoader(),
            new Class<?>[] {FabricEndpoint.class},
            (proxy, method, args) -> {
              Object result;
              try {
                result = method.invoke(real, args);
              } catch (InvocationTargetException e) {
                throw e.getCause();
              }
              if (method.getName().equals("close")) {
                throw new IllegalStateException("fi_close: busy (by the test)");
              }
              return result;
            });
  }

  /**
   * The leases of the transfers a stopped worker held (registered operands, posted and queued) drop
   * after its endpoint closed, which closed their registrations too: none is deregistered on the
   * closed endpoint, which would close a handle twice (the fake counts that as a violation), and
   * every pinned byte is given back.
   */
  @Test
  void theLeasesOfWhatItHeldDropWithoutDeregisteringOnTheClosedEndpoint() {
    fabric.script().requireLocalRegistration(true);
    start(3, UnaryOperator.identity());
    holdFiveTransfersInEveryState();

    worker.shutDownNow(new IllegalStateException("the pass threw (by the test)"));

    assertEquals(5, byId().size());
    assertTrue(workersEndpoint.isClosed());
    assertEquals(0, fabric.counters().violations(), fabric.counters().lastViolation());
    assertEquals(0, worker.pinnedBytes(), "every lease dropped, every pinned byte given back");
  }

  /**
   * When the endpoint's close fails, what was posted may still be touched by the provider: its
   * failure says so with the close's error, and wins over the close timeout that ended the worker;
   * a transfer that was only queued never reached the provider and fails as the worker gone.
   */
  @Test
  void aFailedEndpointCloseFailsWhatWasPostedSayingTheProviderMayStillTouchIt() {
    start(2, WorkerShutdownTest::closeThrows);
    fabric.script().holdCompletions();
    assertTrue(worker.submit(write(0)));
    assertTrue(worker.submit(read(1)));
    assertTrue(worker.submit(write(2)));
    worker.stepUntil(() -> fabric.script().heldCompletions() == 2, "two posted");

    worker.close(Duration.ZERO);

    assertEquals(List.of(3), recorder.batchSizes);
    Map<Long, Completion<Buffer>> byId = byId();
    for (long id = 0; id <= 1; id++) {
      DmaException error = byId.get(id).outcome().error();
      assertEquals(
          "the provider could not be closed while this transfer was posted (fi_close: busy (by"
              + " the test)): it may still read or write the operand, so neither reuse nor free"
              + " it",
          error.getMessage(),
          "transfer " + id);
      assertEquals(DmaException.Reason.PROVIDER, error.reason());
      assertEquals(1, byId.get(id).posts());
    }
    assertEquals(
        DmaException.TargetMemory.MAY_HAVE_CHANGED, byId.get(0L).outcome().error().targetMemory());
    assertEquals(
        DmaException.TargetMemory.UNCHANGED, byId.get(1L).outcome().error().targetMemory());
    DmaException queued = byId.get(2L).outcome().error();
    assertEquals(FabricWorker.WORKER_GONE, queued.getMessage());
    assertNull(queued.getCause());
    assertEquals(0, byId.get(2L).posts());
    assertEquals(0, worker.outstanding());
    assertTrue(workersEndpoint.isClosed());
  }

  /**
   * A close whose timeout passes with transfers posted fails them as closed by the timeout; the
   * queued one behind them, never posted, as the worker gone; nothing is delivered twice.
   */
  @Test
  void aCloseTimeoutFailsWhatIsStillPostedAsTimedOut() {
    start(1, UnaryOperator.identity());
    fabric.script().holdCompletions();
    assertTrue(worker.submit(write(0)));
    assertTrue(worker.submit(write(1)));
    worker.stepUntil(() -> fabric.script().heldCompletions() == 1, "one posted");

    worker.close(Duration.ZERO);

    assertEquals(List.of(2), recorder.batchSizes);
    Map<Long, Completion<Buffer>> byId = byId();
    DmaException posted = byId.get(0L).outcome().error();
    assertEquals(
        "the service closed before this transfer completed: the close timeout passed with it"
            + " posted",
        posted.getMessage());
    assertEquals(DmaException.Reason.CLOSED, posted.reason());
    assertEquals(DmaException.TargetMemory.MAY_HAVE_CHANGED, posted.targetMemory());
    DmaException queued = byId.get(1L).outcome().error();
    assertEquals(FabricWorker.WORKER_GONE, queued.getMessage());
    assertEquals(DmaException.TargetMemory.UNCHANGED, queued.targetMemory());
    assertEquals(0, worker.outstanding());
    assertEquals(1, fabric.counters().opsInFlightAtClose());
  }

  /**
   * A worker that closes with nothing left delivers no batch at all (not an empty one), deregisters
   * the memory pinned through it before its endpoint closes, and its channel refuses what comes
   * after.
   */
  @Test
  void aCleanCloseDeliversNoEmptyBatchAndDeregistersWhatItPinnedFirst() {
    fabric.script().requireLocalRegistration(true);
    start(4, UnaryOperator.identity());
    Reply<Void> pinned = new Reply<>();
    MemorySegment toPin = arena.allocate(4096);
    assertTrue(worker.offer(new Commands.Pin(toPin.address(), 4096, MemoryKind.HOST, pinned)));
    worker.step();
    assertNull(pinned.await("the pin was abandoned"));
    assertEquals(1, fabric.counters().liveRegistrations());
    assertTrue(worker.submit(write(0)));
    worker.stepUntil(() -> recorder.queue.size() == 1, "the write");
    assertTrue(recorder.queue.peek().outcome().isDone());

    worker.shutDownNow(new IllegalStateException("unused: nothing is left to fail"));

    assertEquals(List.of(1), recorder.batchSizes, "a batch delivered at the shut-down");
    assertFalse(worker.offer(write(1)), "the channel took a transfer after the shut-down");
    assertEquals(0, worker.outstanding());
    assertEquals(0, fabric.counters().liveRegistrations());
    assertEquals(0, fabric.counters().registrationsOpenAtClose(), "left to the endpoint's close");
    assertTrue(workersEndpoint.isClosed());
  }

  /**
   * A worker whose pass throws an error (here its provider's reap overflowing the stack) fails what
   * it holds with that error as the cause, closes its endpoint, and rethrows it from its loop, so
   * the thread ends with it.
   */
  @Test
  void aWorkerWhoseLoopThrowsAnErrorFailsWhatItHeldAndRethrowsIt() {
    AtomicBoolean reapThrows = new AtomicBoolean();
    StackOverflowError overflow = new StackOverflowError("the provider's reap (by the test)");
    start(
        2,
        real ->
            (FabricEndpoint)
                Proxy.newProxyInstance(
                    FabricEndpoint.class.getClassLoader(),
                    new Class<?>[] {FabricEndpoint.class},
                    (proxy, method, args) -> {
                      if (method.getName().equals("reap") && reapThrows.get()) {
                        throw overflow;
                      }
                      try {
                        return method.invoke(real, args);
                      } catch (InvocationTargetException e) {
                        throw e.getCause();
                      }
                    }));
    fabric.script().holdCompletions();
    assertTrue(worker.submit(write(0)));
    worker.stepUntil(() -> fabric.script().heldCompletions() == 1, "the post");
    reapThrows.set(true);

    assertSame(overflow, assertThrows(StackOverflowError.class, worker::runOnThisThread));

    DmaException error = byId().get(0L).outcome().error();
    assertEquals(FabricWorker.WORKER_GONE, error.getMessage());
    assertSame(overflow, error.getCause());
    assertEquals(0, worker.outstanding());
    assertTrue(workersEndpoint.isClosed());
  }
}
