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
import dev.dma.api.RemoteAccess;
import dev.dma.api.TransferDone;
import dev.dma.api.TransferRequest;
import dev.dma.core.FabricService;
import dev.dma.core.FabricServiceGroup;
import dev.dma.core.PassiveTarget;
import dev.dma.fake.FakeFabric;
import dev.dma.fake.FiErrno;
import dev.dma.fake.OpMatcher;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * Striping in {@link FabricServiceGroup} on the fake: three services are three endpoints on one
 * fake fabric (three devices on one network, so each reaches the target; separate fake fabrics are
 * separate networks), and the script's initiator matchers fault or hold one device's chunks.
 */
class StripedGroupFakeTest {
  private static final AtomicInteger FABRICS = new AtomicInteger();
  private static final long THRESHOLD = 64 * 1024;

  /** Not a multiple of the chunk alignment: the last chunk is short. */
  private static final long LENGTH = 1024 * 1024 + 12_345;

  private FakeFabric fabric;
  private Arena arena;
  private Collector<Buffer> completions;
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
            .completer(completions)
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
    assertEquals(LENGTH, read.outcome().done().bytes());
    assertEquals(Checksums.crc32c(local), read.outcome().done().checksum().orElseThrow());
    assertEquals(Checksums.crc32c(local), Checksums.crc32c(landing));
    assertNothingMore();
    for (int i = 0; i < 3; i++) {
      assertEquals(2, opsOn(i), "device " + i + " carried one chunk of each");
    }
  }

  /**
   * The group answers backpressure as one service does: FULL once no device has room, and a striped
   * transfer whose later chunk finds no room is accepted (its first chunk was) and then fails once,
   * with BACKPRESSURE, after that first chunk finished.
   */
  @Test
  void aFullGroupSaysFullAndAChunkWithNoRoomFailsItsTransferWithBackpressure() throws Exception {
    String name = fabric.name();
    // Two devices of room 2 each (1 in flight + 1 pending); held completions keep them taken.
    DmaConfiguration tightConfiguration =
        DmaConfiguration.builder()
            .providers("fake")
            .interfaces(List.of(name, name))
            .maxInFlight(1)
            .maxPending(1)
            .build();
    Collector<Buffer> tightCompletions = new Collector<>();
    try (FabricServiceGroup<Buffer> tight =
        FabricServiceGroup.<Buffer>builder(tightConfiguration)
            .completer(tightCompletions)
            .stripeThresholdBytes(THRESHOLD)
            .start()) {
      fabric.script().holdCompletions();
      MemorySegment small = arena.allocate(64);
      for (int i = 0; i < 3; i++) {
        assertEquals(FabricService.Offer.ACCEPTED, tight.offer(write(10 + i, small, i * 4096L)));
      }
      MemorySegment big = arena.allocate(2 * THRESHOLD, 4096);
      // Two chunks: the first takes the last room, the second finds none.
      assertEquals(FabricService.Offer.ACCEPTED, tight.offer(write(20, big, LENGTH)));
      assertEquals(FabricService.Offer.FULL, tight.offer(write(30, small, 0)));
      assertFalse(tight.submit(write(31, small, 0)));
      assertEquals(0, tightCompletions.pending(), "the striped transfer waits for its first chunk");

      fabric.script().stopHolding();
      fabric.script().releaseCompletions();
      Set<Integer> done = new HashSet<>();
      DmaException striped = null;
      for (Completion<Buffer> completion : tightCompletions.take(4)) {
        if (completion.context().id() == 20) {
          striped = completion.outcome().error();
        } else {
          assertTrue(completion.outcome().isDone(), () -> completion.outcome().toString());
          done.add(completion.context().id());
        }
      }
      assertEquals(Set.of(10, 11, 12), done);
      assertTrue(striped != null, "the striped transfer completed once");
      assertEquals(DmaException.Reason.BACKPRESSURE, striped.reason());
      assertTrue(
          striped.getMessage().startsWith("no device had room for chunk 1 of 2"),
          striped.getMessage());
      await(() -> tight.outstanding() == 0, "every chunk accounted for");
      assertEquals(0, tightCompletions.pending(), "one completion per transfer");
      // Room again: the group accepts.
      assertEquals(FabricService.Offer.ACCEPTED, tight.offer(write(40, small, 0)));
      assertTrue(tightCompletions.take().outcome().isDone());
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
}
