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
import dev.dma.core.FabricService;
import dev.dma.core.MemoryRegion;
import dev.dma.fake.FakeEndpoint;
import dev.dma.fake.FakeFabric;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A window whose operands pin more than {@code max_pinned_bytes} (local registration required, as
 * on EFA): the transfers that do not fit wait in the worker for a lease to drop, within the
 * progress deadline, and fail as retryable, naming the bound, only when nothing in flight can make
 * room.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class PinnedBoundHoldTest {
  private static final AtomicInteger FABRICS = new AtomicInteger();
  private static final int OPERAND = 4096;
  private static final long BOUND = 4 * OPERAND;

  private FakeFabric fabric;
  private FakeEndpoint target;
  private Arena arena;
  private MemorySegment remote;
  private Advertisement ad;
  private final ManualTicker ticker = new ManualTicker();
  private final Recorder<Buffer> recorder = new Recorder<>();
  private FabricService<Buffer> service;
  // The test that steers the clock steps its worker on the test's thread instead.
  private SteppedWorker<Buffer> stepped;

  @BeforeEach
  void openFabric() {
    fabric = FakeFabric.create("pinned-bound-" + FABRICS.incrementAndGet());
    target = fabric.openEndpoint();
    arena = Arena.ofShared();
    remote = arena.allocate(1 << 20);
    ad = target.expose(remote, RemoteAccess.READ_WRITE).advertisement();
    fabric.script().requireLocalRegistration(true);
  }

  private DmaConfiguration configuration() {
    return DmaConfiguration.builder()
        .providers("fake")
        .interfaces(List.of(fabric.name()))
        .maxPinnedBytes(BOUND)
        .build();
  }

  private void startService() {
    service =
        FabricService.<Buffer>builder(configuration()).completer(recorder).clock(ticker).start();
  }

  private void startStepped() {
    stepped = SteppedWorker.start(configuration(), recorder, ticker);
    recorder.steppedBy(stepped);
  }

  @AfterEach
  void closeFabric() {
    fabric.script().reset();
    fabric.script().releaseCompletions();
    if (service != null) {
      service.close();
    }
    if (stepped != null) {
      stepped.close();
    }
    target.close();
    fabric.close();
    arena.close();
  }

  /** An operand of its own (no cacheable span): registered for its transfer only. */
  private Buffer operand(int id) {
    MemorySegment segment = arena.allocate(OPERAND);
    segment.fill((byte) id);
    return new Buffer(id, segment);
  }

  private TransferRequest<Buffer> write(Buffer buffer) {
    // Each into a slice of its own, so every transfer's bytes can be checked at the target.
    Advertisement slice =
        new Advertisement(
            ad.address(), ad.remoteKey(), ad.remoteAddress() + buffer.id * OPERAND, OPERAND);
    return TransferRequest.write(1, slice, buffer);
  }

  private void waitUntil(BooleanSupplier condition) throws InterruptedException {
    if (stepped != null) {
      stepped.stepUntil(condition, "condition");
      return;
    }
    long deadline = System.nanoTime() + 30_000_000_000L;
    while (!condition.getAsBoolean()) {
      assertTrue(System.nanoTime() < deadline, "condition not met within 30 s");
      Thread.sleep(1);
    }
  }

  @Test
  void transfersBeyondTheBoundWaitForALeaseAndAllSucceed() throws Exception {
    startService();
    fabric.script().holdCompletions();
    int transfers = 12;
    for (int i = 0; i < transfers; i++) {
      assertTrue(service.submit(write(operand(i))));
    }
    // Four operands fill the bound; the other eight wait, neither posted nor failed.
    waitUntil(() -> fabric.script().heldCompletions() == 4);
    assertNull(recorder.poll(50), "a transfer over the bound completed instead of waiting");
    assertEquals(4, fabric.script().heldCompletions());
    assertEquals(4, fabric.counters().registrations());

    fabric.script().stopHolding();
    fabric.script().releaseCompletions();
    for (Completion<Buffer> completion : recorder.take(transfers)) {
      assertTrue(completion.outcome().isDone(), completion.toString());
    }
    for (int i = 0; i < transfers; i++) {
      assertEquals((byte) i, remote.get(ValueLayout.JAVA_BYTE, (long) i * OPERAND + 100));
    }
    assertEquals(transfers, fabric.counters().registrations());
    waitUntil(() -> fabric.counters().deregistrations() == transfers);
    assertEquals(0, fabric.counters().violations(), fabric.counters().lastViolation());
  }

  @Test
  void aTransferHeldPastTheProgressDeadlineFailsRetryablyNamingTheBound() throws Exception {
    startStepped();
    fabric.script().holdCompletions();
    for (int i = 0; i < 5; i++) {
      assertTrue(stepped.submit(write(operand(i))));
    }
    waitUntil(() -> fabric.script().heldCompletions() == 4);

    stepped.advanceAndRead(ticker, Duration.ofSeconds(2)); // past the 1 s progress deadline

    Completion<Buffer> failed = recorder.take();
    assertEquals(4, failed.context().id, "the one that did not fit");
    DmaException error = failed.outcome().error();
    assertEquals(DmaException.Reason.BACKPRESSURE, error.reason());
    assertTrue(error.retryable());
    assertEquals(DmaException.TargetMemory.UNCHANGED, error.targetMemory());
    assertTrue(
        error.getMessage().contains("above max_pinned_bytes (" + BOUND + " bytes"),
        error.getMessage());
    assertTrue(error.getMessage().contains("for longer than progress_deadline"));
    assertTrue(error.getMessage().contains("raise the max_pinned_bytes configuration key"));

    // Not the peer's fault: its next transfer is served once room is back.
    fabric.script().stopHolding();
    fabric.script().releaseCompletions();
    for (Completion<Buffer> completion : recorder.take(4)) {
      assertTrue(completion.outcome().isDone(), completion.toString());
    }
    assertTrue(stepped.submit(write(operand(5))));
    assertTrue(recorder.take().outcome().isDone());
  }

  @Test
  void withNothingInFlightToMakeRoomATransferFailsAtOnceAsRetryable() throws Exception {
    startService();
    // A registered region fills the bound: no transfer's lease can make room.
    try (MemoryRegion region = service.register(arena.allocate(BOUND))) {
      assertTrue(service.submit(write(operand(0))));
      DmaException error = recorder.take().outcome().error();
      assertEquals(DmaException.Reason.BACKPRESSURE, error.reason());
      assertTrue(
          error.getMessage().contains("with no transfer in flight left to release one"),
          error.getMessage());
      assertEquals(1, fabric.counters().registrations(), "the region only");
      assertTrue(region.lengthBytes() == BOUND);
    }
    // The region is gone: the same transfer succeeds.
    assertTrue(service.submit(write(operand(0))));
    assertTrue(recorder.take().outcome().isDone());
  }
}
