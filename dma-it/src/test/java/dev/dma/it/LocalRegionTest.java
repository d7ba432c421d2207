package dev.dma.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dma.api.Advertisement;
import dev.dma.api.Checksums;
import dev.dma.api.Completion;
import dev.dma.api.DmaConfiguration;
import dev.dma.api.DmaException;
import dev.dma.api.RemoteAccess;
import dev.dma.api.TransferRequest;
import dev.dma.core.FabricService;
import dev.dma.core.PassiveTarget;
import dev.dma.core.TargetRegion;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * What {@code local} promises beyond the conformance suite, in one JVM: memory it cannot share is
 * refused at {@code expose} saying what to do; a withdrawn region is never written again, not even
 * when the target's next allocation lands at the same virtual address; and clients that come and go
 * under load never fail a live client's transfer.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class LocalRegionTest {
  private static final DmaConfiguration CONFIG =
      DmaConfiguration.builder()
          .providers("local")
          .completionDeadline(Duration.ofSeconds(2))
          .build();

  private Arena arena;
  private Collector<Buffer> completions;
  private FabricService<Buffer> service;
  private PassiveTarget target;

  @BeforeEach
  void open() {
    arena = Arena.ofShared();
    completions = new Collector<>();
    service = FabricService.<Buffer>builder(CONFIG).completer(completions).start();
    target = PassiveTarget.start(CONFIG);
  }

  @AfterEach
  void close() {
    service.close();
    target.close();
    arena.close();
  }

  @Test
  void exposingMemoryTheProviderDidNotMakeFailsAtExposeSayingWhatToDo() throws Exception {
    MemorySegment own = arena.allocate(4096, 4096);
    DmaException error =
        assertThrows(DmaException.class, () -> target.expose(own, RemoteAccess.READ_WRITE));
    assertEquals(DmaException.Reason.BAD_REQUEST, error.reason());
    assertTrue(error.getMessage().contains("PassiveTarget.allocate"), error::getMessage);
    // The target is unharmed: memory it allocated is exposed and served.
    MemorySegment memory = target.allocate(4096);
    Advertisement ad = target.expose(memory, RemoteAccess.READ_WRITE).advertisement();
    MemorySegment local = arena.allocate(4096);
    Patterns.fill(local, 3);
    assertTrue(service.submit(TransferRequest.write(1, ad, new Buffer(1, local))));
    assertTrue(completions.take().outcome().isDone());
    assertEquals(Checksums.crc32c(local), Checksums.crc32c(memory));
  }

  /**
   * The client withdraws its region and allocates again: the new memory is a new memfd, often at
   * the same virtual address. A write and a read with the old advertisement fail ACCESS_DENIED (as
   * a closed region's key does on tcp) and the new memory keeps its bytes; the old segment cannot
   * be touched any more.
   */
  @Test
  void aWithdrawnRegionIsNeverWrittenAgainAndItsMemoryIsNotReused() throws Exception {
    MemorySegment first = target.allocate(1 << 16);
    TargetRegion region = target.expose(first, RemoteAccess.READ_WRITE);
    Advertisement old = region.advertisement();
    MemorySegment local = arena.allocate(1 << 16);
    Patterns.fill(local, 9);
    assertTrue(service.submit(TransferRequest.write(1, old, new Buffer(1, local))));
    assertTrue(completions.take().outcome().isDone());
    region.close();
    assertThrows(IllegalStateException.class, () -> first.get(ValueLayout.JAVA_BYTE, 0));

    MemorySegment second = target.allocate(1 << 16);
    second.fill((byte) 0x77);
    Advertisement current = target.expose(second, RemoteAccess.READ_WRITE).advertisement();
    int before = Checksums.crc32c(second);
    for (int i = 0; i < 10; i++) {
      assertTrue(service.submit(TransferRequest.write(1, old, new Buffer(2, local))));
      Completion<Buffer> refused = completions.take();
      assertFalse(refused.outcome().isDone(), "a write with a withdrawn region's key succeeded");
      assertEquals(DmaException.Reason.ACCESS_DENIED, refused.outcome().error().reason());
    }
    MemorySegment landing = arena.allocate(1 << 16);
    assertTrue(service.submit(TransferRequest.read(1, old, 1 << 16, new Buffer(3, landing))));
    assertEquals(DmaException.Reason.ACCESS_DENIED, completions.take().outcome().error().reason());
    assertEquals(before, Checksums.crc32c(second), "the new memory was written");
    assertTrue(service.submit(TransferRequest.write(1, current, new Buffer(4, local))));
    assertTrue(completions.take().outcome().isDone());
    assertEquals(Checksums.crc32c(local), Checksums.crc32c(second));
  }

  /**
   * Four live clients are written and read continuously while 40 others join, are served once and
   * leave (closing their targets): every live transfer succeeds with the right bytes.
   */
  @Test
  void churningClientsNeverFailALiveClientsTransfer() throws Exception {
    int live = 4;
    List<PassiveTarget> targets = new ArrayList<>();
    List<MemorySegment> memories = new ArrayList<>();
    List<Advertisement> ads = new ArrayList<>();
    try {
      for (int c = 0; c < live; c++) {
        PassiveTarget t = PassiveTarget.start(CONFIG);
        targets.add(t);
        MemorySegment m = t.allocate(1 << 16);
        memories.add(m);
        ads.add(t.expose(m, RemoteAccess.READ_WRITE).advertisement());
      }
      MemorySegment local = arena.allocate(1 << 16);
      Patterns.fill(local, 5);
      int liveFailures = 0;
      int liveDone = 0;
      for (int round = 0; round < 40; round++) {
        for (int c = 0; c < live; c++) {
          assertTrue(service.submit(TransferRequest.write(c, ads.get(c), new Buffer(c, local))));
        }
        try (PassiveTarget visitor = PassiveTarget.start(CONFIG)) {
          MemorySegment m = visitor.allocate(4096);
          Advertisement ad = visitor.expose(m, RemoteAccess.READ_WRITE).advertisement();
          service.addPeer(1000 + round, ad.address());
          assertTrue(
              service.submit(
                  TransferRequest.write(1000 + round, ad, new Buffer(-1, local.asSlice(0, 4096)))));
          for (Completion<Buffer> done : completions.take(live + 1)) {
            if (done.context().id() >= 0) {
              if (done.outcome().isDone()) {
                liveDone++;
              } else {
                liveFailures++;
              }
            } else {
              assertTrue(done.outcome().isDone(), () -> done.outcome().error().toString());
            }
          }
          service.removePeer(1000 + round);
        }
      }
      assertEquals(0, liveFailures);
      assertEquals(40 * live, liveDone);
      for (MemorySegment m : memories) {
        assertEquals(Checksums.crc32c(local), Checksums.crc32c(m));
      }
    } finally {
      for (PassiveTarget t : targets) {
        t.close();
      }
    }
  }
}
