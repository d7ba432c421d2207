package dev.dma.fake.core;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dma.api.Advertisement;
import dev.dma.api.Checksum;
import dev.dma.api.Checksums;
import dev.dma.api.Completion;
import dev.dma.api.DmaConfiguration;
import dev.dma.api.DmaException;
import dev.dma.api.DmaException.Reason;
import dev.dma.api.RemoteAccess;
import dev.dma.api.TransferRequest;
import dev.dma.core.FabricServiceGroup;
import dev.dma.fake.FakeEndpoint;
import dev.dma.fake.FakeFabric;
import dev.dma.fake.FiErrno;
import dev.dma.fake.OpMatcher;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.time.Duration;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Nested;
import org.junit.jupiter.api.Test;

/**
 * dma's promise about local operands, checked on every path the fake can script: once a transfer's
 * completion is delivered, success or failure, nothing touches its operand again. Each operand is a
 * {@link Released}: its own arena, watched by the fake, closed by the completer on delivery; the
 * fake records any access after that (or any op it still owned then) in {@link
 * FakeFabric#operandViolations()}, which every test asserts is empty. Worth having because the
 * dangerous paths are the ones where the worker gives up on an op the provider still holds
 * (deadline, close) or where one transfer is several ops (striping).
 */
class OperandAfterDeliveryTest {
  private static final AtomicInteger FABRICS = new AtomicInteger();
  private static final Duration DEADLINE = Duration.ofSeconds(2);
  private static final long CLIENT = 1;
  private static final long REMOTE_BYTES = 8L << 20;

  private FakeFabric fabric;
  private Released.Factory operands;
  private Arena arena;
  private MemorySegment remote;
  private FakeEndpoint target;
  private Advertisement ad;
  private final Recorder<Released> delivered = new Recorder<>();

  @BeforeEach
  void openFabric() {
    fabric = FakeFabric.create("operand-after-delivery-" + FABRICS.incrementAndGet());
    operands = new Released.Factory(fabric);
    arena = Arena.ofShared();
    remote = arena.allocate(REMOTE_BYTES, 4096);
    target = fabric.openEndpoint();
    ad = target.expose(remote, RemoteAccess.READ_WRITE).advertisement();
  }

  @AfterEach
  void closeFabric() {
    try {
      assertEquals(List.of(), fabric.operandViolations());
      assertEquals(0, fabric.counters().violations(), fabric.counters().lastViolation());
    } finally {
      fabric.close();
      operands.closeAll();
      arena.close();
    }
  }

  private DmaConfiguration.Builder configuration(int devices) {
    return DmaConfiguration.builder()
        .providers("fake")
        .interfaces(java.util.Collections.nCopies(devices, fabric.name()))
        .completionDeadline(DEADLINE);
  }

  private Advertisement at(long offset) {
    return new Advertisement(ad.address(), ad.remoteKey(), ad.remoteAddress() + offset);
  }

  private static void waitUntil(BooleanSupplier condition, String what)
      throws InterruptedException {
    long deadline = System.nanoTime() + 30_000_000_000L;
    while (!condition.getAsBoolean()) {
      assertTrue(System.nanoTime() < deadline, "within 30 s: " + what);
      Thread.sleep(1);
    }
  }

  private static DmaException error(Completion<Released> completion) {
    assertFalse(completion.outcome().isDone(), () -> completion.context() + " succeeded");
    return completion.outcome().error();
  }

  private byte[] remoteBytes(long offset, long length) {
    return remote.asSlice(offset, length).toArray(ValueLayout.JAVA_BYTE);
  }

  private boolean remoteUntouched() {
    return remote.mismatch(arena.allocate(REMOTE_BYTES)) == -1;
  }

  /**
   * One worker on the fake, its operands released on delivery, its clock the test's, stepped on the
   * test's thread ({@link SteppedWorker}).
   */
  @Nested
  class OneService {
    private final ManualTicker ticker = new ManualTicker();
    private SteppedWorker<Released> service;

    @BeforeEach
    void start() {
      service =
          SteppedWorker.start(configuration(1).build(), Released.onDelivery(delivered), ticker);
      delivered.steppedBy(service);
    }

    private void waitUntil(BooleanSupplier condition, String what) {
      service.stepUntil(condition, what);
    }

    @AfterEach
    void stop() {
      fabric.script().reset();
      fabric.script().releaseCompletions();
      service.close();
    }

    private FakeEndpoint serviceEndpoint() {
      return Objects.requireNonNull(fabric.endpoint(service.localAddress()));
    }

    private void failByDeadline(int count) throws InterruptedException {
      // Deadlines are checked every deadline/16 (at most 100 ms) of the worker's clock.
      ticker.advance(DEADLINE.plusMillis(101));
      for (Completion<Released> completion : delivered.take(count)) {
        assertEquals(Reason.DEADLINE, error(completion).reason());
      }
    }

    @Test
    void successfulWritesAndReadsWithAndWithoutChecksum() throws Exception {
      long[] sizes = {64, 4096, 1 << 20};
      for (Checksum checksum : new Checksum[] {Checksum.NONE, Checksum.CRC32C}) {
        for (int i = 0; i < sizes.length; i++) {
          long offset = i * (1L << 20) + (checksum == Checksum.NONE ? 0 : 4L << 20);
          Released source = operands.filled(i, sizes[i], i + 1);
          assertTrue(
              service.submit(
                  TransferRequest.write(CLIENT, at(offset), source).withChecksum(checksum)));
          Completion<Released> written = delivered.take();
          assertTrue(written.outcome().isDone(), () -> written.outcome().toString());
          assertArrayEquals(Released.pattern(sizes[i], i + 1), remoteBytes(offset, sizes[i]));

          Released landing = operands.landing(10 + i, sizes[i]);
          assertTrue(
              service.submit(
                  TransferRequest.read(CLIENT, at(offset), sizes[i], landing)
                      .withChecksum(checksum)));
          Completion<Released> read = delivered.take();
          assertTrue(read.outcome().isDone(), () -> read.outcome().toString());
          assertArrayEquals(remoteBytes(offset, sizes[i]), landing.atDelivery());
          if (checksum == Checksum.CRC32C) {
            assertEquals(
                Checksums.crc32c(remote.asSlice(offset, sizes[i])),
                read.outcome().done().checksum().orElseThrow());
          }
        }
      }
      assertEquals(0, operands.undelivered());
    }

    @Test
    void errorCompletionsOfWritesAndReads() throws Exception {
      fabric.script().failNextOps(2, FiErrno.EIO, -5, "Input/output error");
      assertTrue(service.submit(TransferRequest.write(CLIENT, ad, operands.filled(1, 4096, 1))));
      assertTrue(service.submit(TransferRequest.read(CLIENT, ad, 4096, operands.landing(2, 4096))));
      for (Completion<Released> completion : delivered.take(2)) {
        assertEquals(DmaException.Kind.TRANSFER, error(completion).kind());
      }
      // A key the target never issued: refused at the target, after the post was accepted.
      Advertisement badKey = new Advertisement(ad.address(), ad.remoteKey() + 99, 0);
      assertTrue(service.submit(TransferRequest.write(CLIENT, badKey, operands.filled(3, 64, 3))));
      assertEquals(Reason.ACCESS_DENIED, error(delivered.take()).reason());
      assertTrue(remoteUntouched());
      assertEquals(3, fabric.counters().errorCompletions());
    }

    @Test
    void heldTransfersFailedByTheDeadlineAreNeverTouchedAgain() throws Exception {
      fabric.script().holdCompletions();
      assertTrue(service.submit(TransferRequest.write(CLIENT, ad, operands.filled(1, 8192, 1))));
      assertTrue(service.submit(TransferRequest.read(CLIENT, ad, 8192, operands.landing(2, 8192))));
      waitUntil(() -> fabric.script().heldCompletions() == 2, "both ops held");
      failByDeadline(2);
      assertEquals(1, fabric.counters().resets());
      // The late release models the wire finally answering: the reset left nothing to land.
      assertEquals(0, fabric.script().releaseCompletions());
      assertTrue(remoteUntouched());
    }

    @Test
    void opsAwaitingTheirTargetDoNotLandLateAfterTheDeadline() throws Exception {
      fabric.script().targetProgressRequired(true);
      remote.asSlice(0, 4096).fill((byte) 9);
      Released landing = operands.landing(2, 4096);
      assertTrue(
          service.submit(TransferRequest.write(CLIENT, at(8192), operands.filled(1, 64, 1))));
      assertTrue(service.submit(TransferRequest.read(CLIENT, ad, 4096, landing)));
      waitUntil(() -> serviceEndpoint().inFlight() == 2, "both ops wait for the target");
      failByDeadline(2);
      // The target progresses only now: whatever still waited would land in delivered memory.
      target.progress();
      assertEquals(0, fabric.counters().bytesCopied());
      assertArrayEquals(new byte[4096], landing.atDelivery());
    }

    @Test
    void lostCompletionsFailedByTheDeadline() throws Exception {
      fabric.script().loseCompletions(OpMatcher.any());
      assertTrue(service.submit(TransferRequest.write(CLIENT, ad, operands.filled(1, 256, 1))));
      assertTrue(service.submit(TransferRequest.read(CLIENT, ad, 256, operands.landing(2, 256))));
      waitUntil(() -> serviceEndpoint().inFlight() == 2, "both ops posted and lost");
      failByDeadline(2);
      assertEquals(2, fabric.counters().opsDiscardedByReset());
    }

    @Test
    void closeWithHeldCompletionsFailsThemOnceNothingCanTouchThem() throws Exception {
      fabric.script().holdCompletions();
      for (int i = 0; i < 3; i++) {
        assertTrue(service.submit(TransferRequest.write(CLIENT, ad, operands.filled(i, 512, i))));
      }
      assertTrue(service.submit(TransferRequest.read(CLIENT, ad, 512, operands.landing(3, 512))));
      waitUntil(() -> fabric.script().heldCompletions() == 4, "every op held");
      service.close(Duration.ofMillis(300));
      for (Completion<Released> completion : delivered.take(4)) {
        assertEquals(Reason.CLOSED, error(completion).reason());
      }
      assertEquals(0, fabric.script().releaseCompletions());
      assertTrue(remoteUntouched());
      assertNull(delivered.poll(50), "a transfer completed twice");
    }
  }

  /**
   * Striping: one transfer is one op per device, and its one completion must wait for every chunk,
   * or a chunk still on the wire touches an operand the caller already has back.
   */
  @Nested
  class StripedGroup {
    private static final long THRESHOLD = 64 * 1024;
    private static final long LENGTH = 1024 * 1024 + 12_345;
    private FabricServiceGroup<Released> group;

    private void start(Duration deadline) {
      group =
          FabricServiceGroup.<Released>builder(
                  configuration(3).completionDeadline(deadline).build())
              .completer(Released.onDelivery(delivered))
              .stripeThresholdBytes(THRESHOLD)
              .start();
    }

    @AfterEach
    void stop() {
      fabric.script().reset();
      fabric.script().releaseCompletions();
      if (group != null) {
        group.close();
      }
    }

    private byte[] device(int i) {
      return group.services().get(i).localAddress();
    }

    @Test
    void aStripedWriteAndRead() throws Exception {
      start(DEADLINE);
      Released source = operands.filled(1, LENGTH, 4);
      assertTrue(group.submit(TransferRequest.write(CLIENT, ad, source)));
      assertTrue(delivered.take().outcome().isDone());
      assertArrayEquals(Released.pattern(LENGTH, 4), remoteBytes(0, LENGTH));
      Released landing = operands.landing(2, LENGTH);
      assertTrue(
          group.submit(
              TransferRequest.read(CLIENT, ad, LENGTH, landing).withChecksum(Checksum.CRC32C)));
      assertTrue(delivered.take().outcome().isDone());
      assertArrayEquals(Released.pattern(LENGTH, 4), landing.atDelivery());
      assertEquals(6, fabric.counters().posts(), "three chunks each");
    }

    @Test
    void aFailedChunkDoesNotDeliverWhileTheOthersAreStillOnTheWire() throws Exception {
      start(DEADLINE);
      // A refusal, not a device fault: the group does not post the chunk again elsewhere (an EIO
      // would be, see the next test), so it ends failed here.
      fabric
          .script()
          .failOp(OpMatcher.fromInitiator(device(1)), FiErrno.EACCES, -13, "chunk broke");
      fabric.script().holdCompletions(OpMatcher.fromInitiator(device(0)));
      fabric.script().holdCompletions(OpMatcher.fromInitiator(device(2)));
      Released landing = operands.landing(1, LENGTH);
      assertTrue(group.submit(TransferRequest.read(CLIENT, ad, LENGTH, landing)));
      waitUntil(() -> fabric.script().heldCompletions() == 2, "devices 0 and 2 hold their chunks");
      waitUntil(() -> group.services().get(1).outstanding() == 0, "device 1's chunk failed");
      assertNull(delivered.poll(100), "delivered while two chunks were on the wire");
      assertEquals(2, fabric.script().releaseCompletions());
      assertTrue(error(delivered.take()).getMessage().contains("chunk broke"));
    }

    /**
     * A chunk that failed with a provider error is posted again at once on a device that has not
     * carried it; the transfer is delivered only once that post and the other chunks are in.
     */
    @Test
    void aChunkMovedOffAFailingDeviceDoesNotDeliverWhileAnyChunkIsOnTheWire() throws Exception {
      start(DEADLINE);
      fabric.script().failOp(OpMatcher.fromInitiator(device(1)), FiErrno.EIO, 5, "chunk broke");
      fabric.script().holdCompletions(OpMatcher.fromInitiator(device(0)));
      fabric.script().holdCompletions(OpMatcher.fromInitiator(device(2)));
      Released landing = operands.landing(1, LENGTH);
      assertTrue(group.submit(TransferRequest.read(CLIENT, ad, LENGTH, landing)));
      waitUntil(
          () -> fabric.script().heldCompletions() == 3,
          "devices 0 and 2 hold their chunks and device 1's, moved");
      assertNull(delivered.poll(100), "delivered while three chunks were on the wire");
      assertEquals(3, fabric.script().releaseCompletions());
      Completion<Released> done = delivered.take();
      assertTrue(done.outcome().isDone(), "the moved chunk completed the read");
      assertEquals(3, done.devices());
      assertEquals(4, done.posts(), "three chunks, one posted twice");
      assertArrayEquals(remoteBytes(0, LENGTH), landing.atDelivery());
    }

    @Test
    void aChunkHeldPastTheDeadlineIsDiscardedBeforeTheTransferFails() throws Exception {
      start(Duration.ofMillis(400));
      fabric.script().holdCompletions(OpMatcher.fromInitiator(device(2)));
      assertTrue(group.submit(TransferRequest.write(CLIENT, ad, operands.filled(1, LENGTH, 8))));
      assertEquals(Reason.DEADLINE, error(delivered.take()).reason());
      assertEquals(0, fabric.script().releaseCompletions(), "device 2's reset dropped its chunk");
      assertEquals(1, fabric.counters().resets());
    }
  }
}
