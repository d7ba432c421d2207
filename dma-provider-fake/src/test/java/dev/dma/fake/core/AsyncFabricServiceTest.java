package dev.dma.fake.core;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dma.api.Advertisement;
import dev.dma.api.Checksum;
import dev.dma.api.Checksums;
import dev.dma.api.Completion;
import dev.dma.api.Direction;
import dev.dma.api.DmaConfiguration;
import dev.dma.api.DmaException;
import dev.dma.api.Operands;
import dev.dma.api.RemoteAccess;
import dev.dma.api.TransferRequest;
import dev.dma.core.AsyncFabricService;
import dev.dma.core.internal.Intake;
import dev.dma.fake.FakeEndpoint;
import dev.dma.fake.FakeFabric;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Executor;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

class AsyncFabricServiceTest {
  private FakeFabric fabric;
  private Arena arena;
  private FakeEndpoint target;
  private MemorySegment remote;
  private Advertisement ad;

  @BeforeEach
  void setUp() {
    fabric = FakeFabric.create("async-test");
    arena = Arena.ofShared();
    target = fabric.openEndpoint();
    remote = arena.allocate(4096);
    ad = target.expose(remote, RemoteAccess.READ_WRITE).advertisement();
  }

  @AfterEach
  void tearDown() {
    target.close();
    arena.close();
    fabric.close();
  }

  private DmaConfiguration.Builder configuration() {
    return DmaConfiguration.builder().providers("fake").interfaces(List.of(fabric.name()));
  }

  private AsyncFabricService<Buffer> start(Executor executor) {
    return AsyncFabricService.start(configuration().build(), null, null, executor);
  }

  /** The DmaException a future failed with, checking that it failed exceptionally. */
  private static DmaException failure(CompletableFuture<?> future) throws Exception {
    ExecutionException failed =
        assertThrows(ExecutionException.class, () -> future.get(10, TimeUnit.SECONDS));
    assertTrue(future.isCompletedExceptionally());
    return assertInstanceOf(DmaException.class, failed.getCause());
  }

  @Test
  void aFuturePerTransferAndCancellingNeverCancelsTheRma() throws Exception {
    AsyncFabricService<Buffer> service = AsyncFabricService.start(configuration().build());
    try {
      MemorySegment local = arena.allocate(4096);
      local.fill((byte) 0x42);
      Buffer buffer = new Buffer(1, local);
      Completion<Buffer> done =
          service
              .transfer(TransferRequest.write(1, ad, buffer).withChecksum(Checksum.CRC32C))
              .get(10, TimeUnit.SECONDS);
      assertEquals(buffer, done.context());
      assertEquals(Checksums.crc32c(local), done.outcome().done().checksum().orElseThrow());

      // Abandon a transfer whose completion is held: the bytes still land.
      fabric.script().holdCompletions();
      MemorySegment second = arena.allocate(4096);
      second.fill((byte) 0x17);
      CompletableFuture<Completion<Buffer>> abandoned =
          service.transfer(TransferRequest.write(1, ad, new Buffer(2, second)));
      assertTrue(abandoned.cancel(true));
      assertEquals(1, service.outstanding());
      fabric.script().stopHolding();
      fabric.script().releaseCompletions();
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
      while (service.outstanding() > 0 && System.nanoTime() < deadline) {
        Thread.sleep(1);
      }
      assertEquals(0, service.outstanding());
      assertEquals(Checksums.crc32c(second), Checksums.crc32c(remote));
    } finally {
      service.close();
    }
    // A closed service refuses at once: the future is already failed with CLOSED.
    Buffer late = new Buffer(3, arena.allocate(8));
    CompletableFuture<Completion<Buffer>> refused =
        service.transfer(TransferRequest.write(1, ad, late));
    assertTrue(refused.isDone());
    DmaException closed = failure(refused);
    assertEquals(DmaException.Reason.CLOSED, closed.reason());
    assertEquals("the service is closed", closed.getMessage());
  }

  @Test
  void aFailedTransferFailsItsFutureExceptionallyWithTheTypedError() throws Exception {
    try (AsyncFabricService<Buffer> service = AsyncFabricService.start(configuration().build())) {
      // No source: the worker fails it at intake.
      DmaException error =
          failure(service.transfer(TransferRequest.write(1, ad, new Buffer(1, null))));
      assertEquals(DmaException.Reason.BAD_REQUEST, error.reason());
      assertEquals(Operands.NO_SOURCE, error.getMessage());
    }
  }

  @Test
  void backpressureFailsTheFutureAtOnce() throws Exception {
    DmaConfiguration configuration = configuration().maxInFlight(1).maxPending(1).build();
    try (AsyncFabricService<Buffer> service = AsyncFabricService.start(configuration)) {
      fabric.script().holdCompletions();
      MemorySegment local = arena.allocate(64);
      List<CompletableFuture<Completion<Buffer>>> accepted =
          List.of(
              service.transfer(TransferRequest.write(1, ad, new Buffer(1, local))),
              service.transfer(TransferRequest.write(1, ad, new Buffer(2, local))));
      CompletableFuture<Completion<Buffer>> refused =
          service.transfer(TransferRequest.write(1, ad, new Buffer(3, local)));
      assertTrue(refused.isDone());
      DmaException full = failure(refused);
      assertEquals(DmaException.Reason.BACKPRESSURE, full.reason());
      assertTrue(full.retryable());
      assertEquals(2, service.outstanding());
      fabric.script().stopHolding();
      fabric.script().releaseCompletions();
      for (CompletableFuture<Completion<Buffer>> future : accepted) {
        assertTrue(future.get(10, TimeUnit.SECONDS).outcome().isDone());
      }
    }
  }

  @Test
  void dependentStagesRunOnTheExecutorNotTheFabricWorker() throws Exception {
    ExecutorService executor = Executors.newSingleThreadExecutor(r -> new Thread(r, "user-stages"));
    try (AsyncFabricService<Buffer> service = start(executor)) {
      for (boolean checksum : new boolean[] {false, true}) {
        fabric.script().holdCompletions();
        CompletableFuture<Completion<Buffer>> future =
            service.transfer(
                TransferRequest.write(1, ad, new Buffer(1, arena.allocate(64)))
                    .withChecksum(checksum ? Checksum.CRC32C : Checksum.NONE));
        // Attached while the completion is held, so it runs wherever the future is completed.
        CompletableFuture<String> stage =
            future.thenApply(done -> Thread.currentThread().getName());
        assertFalse(stage.isDone());
        fabric.script().stopHolding();
        fabric.script().releaseCompletions();
        assertEquals("user-stages", stage.get(10, TimeUnit.SECONDS), "checksum=" + checksum);
      }
    } finally {
      executor.shutdownNow();
    }
  }

  @Test
  void anInlineExecutorCompletesOnTheFabricWorker() throws Exception {
    try (AsyncFabricService<Buffer> service = start(Runnable::run)) {
      fabric.script().holdCompletions();
      CompletableFuture<Completion<Buffer>> future =
          service.transfer(TransferRequest.write(1, ad, new Buffer(1, arena.allocate(64))));
      CompletableFuture<String> stage = future.thenApply(done -> Thread.currentThread().getName());
      fabric.script().stopHolding();
      fabric.script().releaseCompletions();
      String thread = stage.get(10, TimeUnit.SECONDS);
      assertTrue(thread.startsWith("fabric-"), thread);
    }
  }

  @Test
  void aChecksummedTransferOfAConfinedSegmentIsRefusedBeforeTheRma() throws Exception {
    try (AsyncFabricService<Buffer> service = AsyncFabricService.start(configuration().build());
        Arena confined = Arena.ofConfined()) {
      MemorySegment local = confined.allocate(4096);
      local.fill((byte) 0x5A);
      int untouched = Checksums.crc32c(remote);
      for (Direction direction : List.of(Direction.TO_PEER, new Direction.FromPeer(4096))) {
        DmaException refused =
            failure(
                service.transfer(
                    TransferRequest.of(1, ad, direction, new Buffer(1, local))
                        .withChecksum(Checksum.CRC32C)));
        assertEquals(DmaException.Reason.BAD_REQUEST, refused.reason(), direction.toString());
        assertEquals(Intake.CONFINED_CHECKSUM, refused.getMessage());
        assertEquals(untouched, Checksums.crc32c(remote), "no RMA happened: " + direction);
        assertEquals((byte) 0x5A, local.get(java.lang.foreign.ValueLayout.JAVA_BYTE, 0));
      }
      // Without a checksum nothing reads it off its thread: the same segment transfers.
      assertTrue(
          service
              .transfer(TransferRequest.write(1, ad, new Buffer(2, local)))
              .get(10, TimeUnit.SECONDS)
              .outcome()
              .isDone());
      assertEquals(Checksums.crc32c(local), Checksums.crc32c(remote));
    }
  }

  @Test
  void futuresOverAStripingGroupCompleteOncePerTransferWithTheRightBytes() throws Exception {
    long length = 1024 * 1024 + 4321; // the last chunk is short
    MemorySegment big = arena.allocate(2 * length, 4096);
    Advertisement bigAd = target.expose(big, RemoteAccess.READ_WRITE).advertisement();
    DmaConfiguration configuration =
        configuration().interfaces(List.of(fabric.name(), fabric.name())).build();
    ExecutorService executor = Executors.newSingleThreadExecutor(r -> new Thread(r, "user-stages"));
    try (AsyncFabricService<Buffer> service =
        AsyncFabricService.<Buffer>builder(configuration)
            .stripeThresholdBytes(64 * 1024)
            .executor(executor)
            .start()) {
      assertEquals(List.of(fabric.name(), fabric.name()), service.devices());
      assertEquals(2, service.localAddresses().size());
      MemorySegment local = arena.allocate(length, 4096);
      for (long i = 0; i < length; i++) {
        local.set(java.lang.foreign.ValueLayout.JAVA_BYTE, i, (byte) (i * 31 + 7));
      }
      Buffer source = new Buffer(1, local);
      // Hold the executor until the stage is attached: a future completed before thenApply would
      // run the stage on this thread instead, whatever executor completed it.
      java.util.concurrent.CountDownLatch attached = new java.util.concurrent.CountDownLatch(1);
      executor.execute(
          () -> {
            try {
              attached.await(10, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
              Thread.currentThread().interrupt();
            }
          });
      CompletableFuture<String> stage =
          service
              .transfer(TransferRequest.write(1, bigAd, source).withChecksum(Checksum.CRC32C))
              .thenApply(done -> Thread.currentThread().getName() + " " + done.chunks());
      attached.countDown();
      assertEquals("user-stages 2", stage.get(10, TimeUnit.SECONDS));
      assertEquals(-1, big.asSlice(0, length).mismatch(local), "the striped write landed whole");

      MemorySegment landing = arena.allocate(length, 4096);
      Completion<Buffer> read =
          service
              .transfer(
                  TransferRequest.read(1, bigAd, length, new Buffer(2, landing))
                      .withChecksum(Checksum.CRC32C))
              .get(10, TimeUnit.SECONDS);
      assertEquals(2, read.chunks());
      assertTrue(read.striped());
      assertEquals(2, read.posts(), "one post per chunk");
      assertEquals(length, read.outcome().done().bytes());
      assertEquals(Checksums.crc32c(local), read.outcome().done().checksum().orElseThrow());
      assertEquals(-1, landing.mismatch(local), "the striped read brought the bytes back");

      // Below the threshold: one chunk, not striped.
      Completion<Buffer> small =
          service
              .transfer(TransferRequest.write(1, ad, new Buffer(3, arena.allocate(64))))
              .get(10, TimeUnit.SECONDS);
      assertEquals(1, small.chunks());
      assertFalse(small.striped());
      assertEquals(0, service.outstanding());
    } finally {
      executor.shutdownNow();
    }
  }
}
