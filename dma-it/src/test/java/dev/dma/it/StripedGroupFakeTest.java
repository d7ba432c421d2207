package dev.dma.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dma.api.Advertisement;
import dev.dma.api.Checksum;
import dev.dma.api.Checksums;
import dev.dma.api.Completion;
import dev.dma.api.DmaConfiguration;
import dev.dma.api.DmaException;
import dev.dma.api.Operands;
import dev.dma.api.Peer;
import dev.dma.api.RemoteAccess;
import dev.dma.api.TransferDone;
import dev.dma.api.TransferRequest;
import dev.dma.core.FabricService;
import dev.dma.core.FabricServiceGroup;
import dev.dma.core.PassiveTarget;
import dev.dma.core.internal.Intake;
import dev.dma.fake.FakeFabric;
import dev.dma.fake.FiErrno;
import dev.dma.fake.OpMatcher;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.util.HashSet;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BooleanSupplier;
import org.jspecify.annotations.Nullable;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Striping in {@link FabricServiceGroup} on the fake: three services are three endpoints on one
 * fake fabric (three devices on one network, so each reaches the target; separate fake fabrics are
 * separate networks), and the script's initiator matchers fault or hold one device's chunks.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class StripedGroupFakeTest {
  private static final AtomicInteger FABRICS = new AtomicInteger();
  private static final long THRESHOLD = 64 * 1024;

  /** Not a multiple of the chunk alignment: the last chunk is short. */
  private static final long LENGTH = 1024 * 1024 + 12_345;

  private FakeFabric fabric;
  private Arena arena;
  private Collector<Buffer> completions;

  /** Every thread the group's completer ran on. */
  private final List<Thread> completerThreads = new CopyOnWriteArrayList<>();

  private FabricServiceGroup<Buffer> group;
  private PassiveTarget target;
  private Advertisement ad;
  private MemorySegment remote;

  /** Ops the fabric accepted, by initiator: every matcher sees every accepted op. */
  private final Map<ByteBuffer, AtomicInteger> opsByDevice = new ConcurrentHashMap<>();

  @BeforeEach
  void start() {
    fabric = FakeFabric.create("striped-" + FABRICS.incrementAndGet());
    arena = Arena.ofShared();
    completions = new Collector<>();
    String name = fabric.name();
    DmaConfiguration configuration =
        DmaConfiguration.builder().providers("fake").interfaces(List.of(name, name, name)).build();
    group =
        FabricServiceGroup.<Buffer>builder(configuration)
            .completer(
                batch -> {
                  completerThreads.add(Thread.currentThread());
                  completions.complete(batch);
                })
            .stripeThresholdBytes(THRESHOLD)
            .start();
    target =
        PassiveTarget.start(
            DmaConfiguration.builder().providers("fake").interfaces(List.of(name)).build());
    remote = arena.allocate(4 * LENGTH, 4096);
    ad = target.expose(remote, RemoteAccess.READ_WRITE).advertisement();
    fabric
        .script()
        .holdCompletions(
            op -> {
              opsByDevice
                  .computeIfAbsent(ByteBuffer.wrap(op.initiator()), k -> new AtomicInteger())
                  .incrementAndGet();
              return false;
            });
  }

  @AfterEach
  void stop() {
    group.close();
    target.close();
    assertEquals(0, fabric.counters().violations(), fabric.counters().lastViolation());
    fabric.close();
    arena.close();
  }

  private byte[] device(int i) {
    return group.services().get(i).localAddress();
  }

  private int opsOn(int i) {
    AtomicInteger count = opsByDevice.get(ByteBuffer.wrap(device(i)));
    return count == null ? 0 : count.get();
  }

  private static void await(BooleanSupplier condition, String what) {
    long deadline = System.nanoTime() + 10_000_000_000L;
    while (!condition.getAsBoolean()) {
      assertTrue(System.nanoTime() < deadline, "within 10 s: " + what);
      Thread.onSpinWait();
    }
  }

  private TransferRequest<Buffer> write(int id, MemorySegment local, long at) {
    Advertisement moved = new Advertisement(ad.address(), ad.remoteKey(), ad.remoteAddress() + at);
    return TransferRequest.write(1, moved, new Buffer(id, local)).withChecksum(Checksum.CRC32C);
  }

  private TransferRequest<Buffer> read(int id, MemorySegment landing, long at) {
    Advertisement moved = new Advertisement(ad.address(), ad.remoteKey(), ad.remoteAddress() + at);
    return TransferRequest.read(1, moved, landing.byteSize(), new Buffer(id, landing))
        .withChecksum(Checksum.CRC32C);
  }

  /** After the one expected completion: nothing else is in flight or queued. */
  private void assertNothingMore() {
    await(() -> group.outstanding() == 0, "every chunk accounted for");
    assertEquals(0, completions.pending(), "exactly one completion per striped transfer");
  }

  @Test
  void aStripedWriteAndReadLandExactlyWithOneChecksummedCompletionEach() throws Exception {
    MemorySegment local = arena.allocate(LENGTH, 4096);
    Patterns.fill(local, 14);
    assertTrue(group.submit(write(1, local, 0)));
    Completion<Buffer> written = completions.take();
    TransferDone done = written.outcome().done();
    assertEquals(1, written.context().id());
    assertEquals(3, written.chunks(), "split over the three devices");
    assertEquals(LENGTH, done.bytes());
    assertEquals(
        Checksums.crc32c(local),
        done.checksum().orElseThrow(),
        "one CRC-32C over the whole operand");
    assertEquals(Checksums.crc32c(local), Checksums.crc32c(remote.asSlice(0, LENGTH)));
    assertNothingMore();
    for (int i = 0; i < 3; i++) {
      assertEquals(1, opsOn(i), "device " + i + " carried one chunk");
    }

    MemorySegment landing = arena.allocate(LENGTH, 4096);
    assertTrue(group.submit(read(2, landing, 0)));
    Completion<Buffer> read = completions.take();
    assertEquals(2, read.context().id());
    assertEquals(3, read.chunks());
    assertEquals(LENGTH, read.outcome().done().bytes());
    assertEquals(Checksums.crc32c(local), read.outcome().done().checksum().orElseThrow());
    assertEquals(Checksums.crc32c(local), Checksums.crc32c(landing));
    assertNothingMore();
    for (int i = 0; i < 3; i++) {
      assertEquals(2, opsOn(i), "device " + i + " carried one chunk of each");
    }
  }

  /**
   * The peer a group's addPeer returns serves every device: a striped write's chunks (one per
   * device) and small transfers wherever they go land exactly, before and after removePeer.
   */
  @Test
  void aGroupsPeerCarriesStripedChunksAndSmallTransfersOnEveryDevice() throws Exception {
    Peer peer = group.addPeer(1, ad.address());
    MemorySegment local = arena.allocate(LENGTH, 4096);
    Patterns.fill(local, 41);
    assertTrue(
        group.submit(
            TransferRequest.write(peer, ad, new Buffer(1, local)).withChecksum(Checksum.CRC32C)));
    Completion<Buffer> striped = completions.take();
    assertEquals(3, striped.chunks());
    assertEquals(Checksums.crc32c(local), striped.outcome().done().checksum().orElseThrow());
    assertEquals(Checksums.crc32c(local), Checksums.crc32c(remote.asSlice(0, LENGTH)));
    assertNothingMore();
    MemorySegment small = arena.allocate(4096, 4096);
    for (int i = 0; i < 30; i++) {
      if (i == 15) {
        group.removePeer(1);
      }
      Patterns.fill(small, 50 + i);
      assertTrue(group.submit(TransferRequest.write(peer, ad, new Buffer(2 + i, small))));
      assertTrue(completions.take().outcome().isDone());
      assertEquals(
          Checksums.crc32c(small), Checksums.crc32c(remote.asSlice(0, 4096)), "write " + i);
    }
    assertNothingMore();
    for (int i = 0; i < 3; i++) {
      assertTrue(opsOn(i) >= 2, "device " + i + " carried a chunk and small writes: " + opsOn(i));
    }
  }

  /** A group of two devices with room for 2 transfers each (1 in flight + 1 pending). */
  private FabricServiceGroup<Buffer> tightGroup(Collector<Buffer> tightCompletions) {
    String name = fabric.name();
    DmaConfiguration tightConfiguration =
        DmaConfiguration.builder()
            .providers("fake")
            .interfaces(List.of(name, name))
            .maxInFlight(1)
            .maxPending(1)
            .build();
    return FabricServiceGroup.<Buffer>builder(tightConfiguration)
        .completer(tightCompletions)
        .stripeThresholdBytes(THRESHOLD)
        .start();
  }

  /**
   * The group answers backpressure as one service does, FULL once no device has room, and a striped
   * transfer is admitted whole: FULL while its chunks do not all find room, even when its first
   * would, with nothing of it posted; accepted once they do.
   */
  @Test
  void aFullGroupSaysFullAndAStripedTransferIsRefusedUnlessEveryChunkHasRoom() throws Exception {
    Collector<Buffer> tightCompletions = new Collector<>();
    try (FabricServiceGroup<Buffer> tight = tightGroup(tightCompletions)) {
      fabric.script().holdCompletions();
      MemorySegment small = arena.allocate(64);
      for (int i = 0; i < 3; i++) {
        assertEquals(FabricService.Offer.ACCEPTED, tight.offer(write(10 + i, small, i * 4096L)));
      }
      MemorySegment big = arena.allocate(2 * THRESHOLD, 4096);
      Patterns.fill(big, 20);
      // Two chunks, one room left: refused whole, and the room it briefly held is given back.
      assertEquals(FabricService.Offer.FULL, tight.offer(write(20, big, LENGTH)));
      assertEquals(3, tight.outstanding(), "the refused stripe holds no room");
      assertEquals(FabricService.Offer.ACCEPTED, tight.offer(write(13, small, 3 * 4096L)));
      assertEquals(FabricService.Offer.FULL, tight.offer(write(30, small, 0)));
      assertFalse(tight.submit(write(31, small, 0)));
      await(() -> fabric.script().heldCompletions() == 2, "the two in-flight smalls are held");

      fabric.script().stopHolding();
      assertEquals(2, fabric.script().releaseCompletions());
      Set<Integer> done = new HashSet<>();
      for (Completion<Buffer> completion : tightCompletions.take(4)) {
        assertTrue(completion.outcome().isDone(), () -> completion.outcome().toString());
        done.add(completion.context().id());
      }
      assertEquals(Set.of(10, 11, 12, 13), done);
      await(() -> tight.outstanding() == 0, "every transfer accounted for");
      assertEquals(0, tightCompletions.pending(), "the refused stripe never completes");
      assertEquals(
          Checksums.crc32c(arena.allocate(2 * THRESHOLD)),
          Checksums.crc32c(remote.asSlice(LENGTH, 2 * THRESHOLD)),
          "nothing of the refused stripe landed");
      // Room again: the caller's retry of the same request is accepted and lands.
      assertEquals(FabricService.Offer.ACCEPTED, tight.offer(write(20, big, LENGTH)));
      Completion<Buffer> striped = tightCompletions.take();
      assertEquals(20, striped.context().id());
      assertEquals(Checksums.crc32c(big), striped.outcome().done().checksum().orElseThrow());
      assertEquals(Checksums.crc32c(big), Checksums.crc32c(remote.asSlice(LENGTH, 2 * THRESHOLD)));
    }
  }

  /** A read context that counts its {@code allocate} calls and records the asking threads. */
  private static final class CountingLanding implements Operands {
    final AtomicInteger allocations = new AtomicInteger();
    private final @Nullable MemorySegment landing;

    CountingLanding(@Nullable MemorySegment landing) {
      this.landing = landing;
    }

    @Override
    public @Nullable MemorySegment allocate(long lengthBytes) {
      allocations.incrementAndGet();
      return landing;
    }
  }

  /**
   * A striped read asks {@code allocate} once per request: not when the group answers FULL, once
   * when the caller's resubmission is accepted, never again by the chunks' workers.
   */
  @Test
  void aStripedReadAllocatesExactlyOnceAcrossAFullRefusalAndItsResubmission() throws Exception {
    Collector<Operands> tightCompletions = new Collector<>();
    String name = fabric.name();
    DmaConfiguration tightConfiguration =
        DmaConfiguration.builder()
            .providers("fake")
            .interfaces(List.of(name, name))
            .maxInFlight(1)
            .maxPending(1)
            .build();
    try (FabricServiceGroup<Operands> tight =
        FabricServiceGroup.<Operands>builder(tightConfiguration)
            .completer(tightCompletions)
            .stripeThresholdBytes(THRESHOLD)
            .start()) {
      fabric.script().holdCompletions();
      MemorySegment small = arena.allocate(64);
      for (int i = 0; i < 3; i++) {
        Advertisement at =
            new Advertisement(ad.address(), ad.remoteKey(), ad.remoteAddress() + i * 4096L);
        assertEquals(
            FabricService.Offer.ACCEPTED,
            tight.offer(TransferRequest.write(1, at, Operands.of(small))));
      }
      MemorySegment source = remote.asSlice(LENGTH, 2 * THRESHOLD);
      Patterns.fill(source, 33);
      MemorySegment landing = arena.allocate(2 * THRESHOLD, 4096);
      CountingLanding context = new CountingLanding(landing);
      Advertisement from =
          new Advertisement(ad.address(), ad.remoteKey(), ad.remoteAddress() + LENGTH);
      TransferRequest<Operands> read =
          TransferRequest.<Operands>read(1, from, 2 * THRESHOLD, context)
              .withChecksum(Checksum.CRC32C);
      assertEquals(FabricService.Offer.FULL, tight.offer(read));
      assertEquals(0, context.allocations.get(), "a refused striped read was never asked");

      fabric.script().stopHolding();
      fabric.script().releaseCompletions();
      tightCompletions.take(3);
      await(() -> tight.outstanding() == 0, "room again");
      assertEquals(FabricService.Offer.ACCEPTED, tight.offer(read));
      Completion<Operands> completion = tightCompletions.take();
      assertEquals(context, completion.context());
      assertEquals(Checksums.crc32c(source), completion.outcome().done().checksum().orElseThrow());
      assertEquals(Checksums.crc32c(source), Checksums.crc32c(landing));
      assertEquals(1, context.allocations.get(), "allocate asked once for the accepted request");
    }
  }

  @Test
  void aTransferBelowTheThresholdIsOneOpOnOneDevice() throws Exception {
    MemorySegment local = arena.allocate(THRESHOLD - 1, 4096);
    Patterns.fill(local, 3);
    assertTrue(group.submit(write(1, local, 0)));
    Completion<Buffer> done = completions.take();
    assertEquals(Checksums.crc32c(local), done.outcome().done().checksum().orElseThrow());
    assertNothingMore();
    assertEquals(1, opsOn(0) + opsOn(1) + opsOn(2));
  }

  @Test
  void aFailingChunkFailsTheWholeTransferOnceAndOnlyAfterTheOthersFinished() throws Exception {
    fabric.script().failOp(OpMatcher.fromInitiator(device(1)), FiErrno.EIO, 5, "chunk one broke");
    fabric.script().holdCompletions(OpMatcher.fromInitiator(device(0)));
    fabric.script().holdCompletions(OpMatcher.fromInitiator(device(2)));
    MemorySegment local = arena.allocate(LENGTH, 4096);
    Patterns.fill(local, 5);
    assertTrue(group.submit(write(7, local, 0)));
    await(() -> fabric.script().heldCompletions() == 2, "devices 0 and 2 hold their chunks");
    await(() -> group.services().get(1).outstanding() == 0, "device 1's chunk failed");
    assertEquals(0, completions.pending(), "no completion while two chunks are still in flight");

    assertEquals(2, fabric.script().releaseCompletions());
    Completion<Buffer> failed = completions.take();
    assertEquals(7, failed.context().id());
    assertFalse(failed.outcome().isDone());
    DmaException error = failed.outcome().error();
    assertEquals(DmaException.Kind.TRANSFER, error.kind());
    assertTrue(error.getMessage().contains("chunk one broke"), error.getMessage());
    // Chunk i rides device (start + i) mod 3 for a random start, so which chunk broke varies.
    assertTrue(
        error
            .getMessage()
            .matches(
                "striped write of "
                    + LENGTH
                    + " bytes at remote address "
                    + Long.toUnsignedString(ad.remoteAddress())
                    + ", chunk [0-2] of 3: .*"),
        error.getMessage());
    assertTrue(
        error
            .getMessage()
            .endsWith("3 of 3 chunks were posted, so the target's memory may have changed"),
        error.getMessage());
    assertEquals(DmaException.TargetMemory.MAY_HAVE_CHANGED, error.targetMemory());
    assertNothingMore();
  }

  @Test
  void aHeldChunkDelaysTheCompletionOfAStripedRead() throws Exception {
    MemorySegment source = remote.asSlice(LENGTH, LENGTH);
    Patterns.fill(source, 21);
    fabric.script().holdCompletions(OpMatcher.fromInitiator(device(2)));
    MemorySegment landing = arena.allocate(LENGTH, 4096);
    assertTrue(group.submit(read(3, landing, LENGTH)));
    await(() -> fabric.script().heldCompletions() == 1, "device 2 holds its chunk");
    await(
        () ->
            group.services().get(0).outstanding() == 0
                && group.services().get(1).outstanding() == 0,
        "devices 0 and 1 finished their chunks");
    assertEquals(0, completions.pending(), "the held chunk holds the transfer");
    assertEquals(1, fabric.script().releaseCompletions());
    Completion<Buffer> done = completions.take();
    assertEquals(3, done.context().id());
    assertEquals(Checksums.crc32c(source), done.outcome().done().checksum().orElseThrow());
    assertEquals(Checksums.crc32c(source), Checksums.crc32c(landing));
    assertNothingMore();
  }

  @Test
  void reorderedChunkCompletionsStillGiveOneCorrectCompletionPerTransfer() throws Exception {
    fabric.script().holdCompletions();
    int transfers = 4;
    MemorySegment[] locals = new MemorySegment[transfers];
    for (int t = 0; t < transfers; t++) {
      locals[t] = arena.allocate(LENGTH, 4096);
      Patterns.fill(locals[t], 100 + t);
      assertTrue(group.submit(write(t, locals[t], t * LENGTH)));
    }
    await(() -> fabric.script().heldCompletions() == 3 * transfers, "every chunk held");
    assertEquals(0, completions.pending());
    assertEquals(3 * transfers, fabric.script().releaseCompletionsReversed());
    Set<Integer> seen = new HashSet<>();
    for (Completion<Buffer> each : completions.take(transfers)) {
      int id = each.context().id();
      assertTrue(seen.add(id), "one completion for transfer " + id);
      assertEquals(Checksums.crc32c(locals[id]), each.outcome().done().checksum().orElseThrow());
      assertEquals(
          Checksums.crc32c(locals[id]), Checksums.crc32c(remote.asSlice(id * LENGTH, LENGTH)));
    }
    assertNothingMore();
  }

  /**
   * A striped write past the advertised end is refused whole at intake: BAD_REQUEST with the text
   * an unstriped request gets, naming the request (its length and remote address) and the bounds,
   * not a chunk; no chunk is posted and the target is untouched, though its first chunks fit.
   */
  @Test
  void aStripedWritePastTheAdvertisedEndIsRefusedWholeAndWritesNothing() throws Exception {
    long advertised = 1024 * 1024;
    long length = advertised + advertised / 2;
    Patterns.fill(remote, 77);
    int before = Checksums.crc32c(remote);
    Advertisement bounded =
        new Advertisement(ad.address(), ad.remoteKey(), ad.remoteAddress(), advertised);
    MemorySegment local = arena.allocate(length, 4096);
    Patterns.fill(local, 78);
    TransferRequest<Buffer> request =
        TransferRequest.write(1, bounded, new Buffer(40, local)).withChecksum(Checksum.CRC32C);
    assertEquals(FabricService.Offer.ACCEPTED, group.offer(request));
    Completion<Buffer> refused = completions.take();
    assertEquals(40, refused.context().id());
    // Every chunk has finished once the completion is out: anything posted has landed by now.
    assertEquals(before, Checksums.crc32c(remote), "the target is untouched");
    DmaException error = refused.outcome().error();
    assertEquals(DmaException.Reason.BAD_REQUEST, error.reason());
    assertEquals(DmaException.TargetMemory.UNCHANGED, error.targetMemory());
    // The plain path's text: the client and its address first, then what lies outside.
    String prefix = "client 1 at " + HexFormat.of().formatHex(ad.address()) + ": ";
    assertEquals(prefix + request.outOfBoundsReason(length), error.getMessage());
    assertTrue(
        error
            .getMessage()
            .startsWith(
                prefix
                    + "transfer of "
                    + length
                    + " bytes at remote address "
                    + Long.toUnsignedString(ad.remoteAddress())
                    + " lies outside the advertised region of "
                    + advertised
                    + " bytes"),
        error.getMessage());
    assertNothingMore();
    assertEquals(0, opsOn(0) + opsOn(1) + opsOn(2), "no chunk reached the fabric");
    assertFalse(
        completerThreads.contains(Thread.currentThread()),
        "the refusal was delivered inline, on the submitting thread");
  }

  /**
   * A striped read whose landing buffer is heap memory, and a checksummed striped write over a
   * confined arena, are refused whole with the worker's own texts: no chunk posted, the target
   * untouched, the refusal delivered off the submitting thread.
   */
  @Test
  void operandRefusalsOfAStripedTransferAreWholeAndNeverDeliveredOnTheSubmitter() throws Exception {
    Patterns.fill(remote, 81);
    int before = Checksums.crc32c(remote);
    MemorySegment heap = MemorySegment.ofArray(new byte[(int) (2 * THRESHOLD)]);
    assertEquals(FabricService.Offer.ACCEPTED, group.offer(read(50, heap, 0)));
    DmaException heapRefused = completions.take().outcome().error();
    assertEquals(DmaException.Reason.BAD_REQUEST, heapRefused.reason());
    assertTrue(heapRefused.getMessage().contains("heap segment"), heapRefused.getMessage());

    try (Arena confined = Arena.ofConfined()) {
      MemorySegment local = confined.allocate(2 * THRESHOLD, 4096);
      Patterns.fill(local, 82);
      assertEquals(FabricService.Offer.ACCEPTED, group.offer(write(51, local, 0)));
      Completion<Buffer> refused = completions.take();
      assertEquals(51, refused.context().id());
      assertEquals(DmaException.Reason.BAD_REQUEST, refused.outcome().error().reason());
      assertEquals(Intake.CONFINED_CHECKSUM, refused.outcome().error().getMessage());
    }
    assertNothingMore();
    assertEquals(0, opsOn(0) + opsOn(1) + opsOn(2), "no chunk reached the fabric");
    assertEquals(before, Checksums.crc32c(remote), "the target is untouched");
    assertFalse(
        completerThreads.contains(Thread.currentThread()),
        "a refusal was delivered inline, on the submitting thread");
  }

  /**
   * The completer never runs on the thread that offered a striped transfer, whatever the order in
   * which its chunks finish: many small stripes, some finishing before offer returns.
   */
  @Test
  void aStripedCompletionNeverRunsOnTheSubmittingThread() throws Exception {
    MemorySegment local = arena.allocate(THRESHOLD, 4096);
    Patterns.fill(local, 90);
    int transfers = 200;
    for (int t = 0; t < transfers; t++) {
      assertTrue(group.submit(write(t, local, (t % 4) * THRESHOLD)));
    }
    for (Completion<Buffer> each : completions.take(transfers)) {
      assertTrue(each.outcome().isDone(), () -> each.outcome().toString());
    }
    assertNothingMore();
    assertFalse(completerThreads.isEmpty());
    assertFalse(
        completerThreads.contains(Thread.currentThread()),
        "a completion ran inside offer on the submitting thread");
  }
}
