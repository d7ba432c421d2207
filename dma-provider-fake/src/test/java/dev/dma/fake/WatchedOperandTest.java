package dev.dma.fake;

import static dev.dma.spi.FabricEndpoint.POSTED;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * The detector behind {@link FakeFabric#watchOperand}, driven by hand with no worker: the test
 * plays a caller that got its completion too early and closes the operand's arena while the fake
 * still owns the op. Each way the fake could then touch or keep the operand must be recorded, and
 * no freed byte may move. The service-level tests ({@code
 * dev.dma.fake.core.OperandAfterDeliveryTest}) rely on exactly this to find a worker that delivers
 * too early.
 */
class WatchedOperandTest {

  @Test
  void aHeldWriteReleasedAfterItsOperandClosedIsRecordedAndMovesNothing() {
    try (Pair pair = new Pair(1, 4096)) {
      Arena operandArena = Arena.ofShared();
      MemorySegment source = operandArena.allocate(4096, 64).fill((byte) 7);
      pair.fabric.watchOperand(source);
      pair.fabric.script().holdCompletions();
      assertEquals(POSTED, pair.write(0, source, 0));
      operandArena.close(); // "delivered" while the op is still held
      assertEquals(1, pair.fabric.script().releaseCompletions());

      List<String> found = pair.fabric.operandViolations();
      assertEquals(1, found.size(), found::toString);
      assertTrue(found.getFirst().contains("write of 4096 bytes"), found.getFirst());
      assertTrue(found.getFirst().contains("read its source"), found.getFirst());
      assertEquals(1, pair.counters().violations());
      assertEquals(0, pair.counters().bytesWritten());
      assertEquals(0, pair.targetMemory.get(ValueLayout.JAVA_BYTE, 0), "a released source moved");
      assertEquals(FiErrno.EIO, pair.reapAll().only().errno());
    }
  }

  @Test
  void aHeldReadReleasedAfterItsLandingBufferClosedIsRecorded() {
    try (Pair pair = new Pair(1, 4096)) {
      Arena operandArena = Arena.ofShared();
      MemorySegment landing = operandArena.allocate(512, 64);
      pair.fabric.watchOperand(landing);
      pair.fabric.script().holdCompletions();
      assertEquals(POSTED, pair.read(0, landing, 0));
      operandArena.close();
      pair.fabric.script().releaseCompletions();

      List<String> found = pair.fabric.operandViolations();
      assertEquals(1, found.size(), found::toString);
      assertTrue(found.getFirst().contains("wrote its landing buffer"), found.getFirst());
      assertEquals(0, pair.counters().bytesRead());
    }
  }

  @Test
  void anOpStillOwnedWhenItsOperandClosedIsRecordedAtReapResetAndClose() {
    try (Pair pair = new Pair(3, 4096)) {
      Arena[] arenas = {Arena.ofShared(), Arena.ofShared(), Arena.ofShared()};
      MemorySegment[] operands = new MemorySegment[3];
      for (int i = 0; i < 3; i++) {
        operands[i] = arenas[i].allocate(64, 64);
        pair.fabric.watchOperand(operands[i]);
      }
      // Landed already, but closed before the provider gave the op back: found at reap.
      assertEquals(POSTED, pair.write(0, operands[0], 0));
      arenas[0].close();
      pair.reapAll();
      assertTrue(pair.fabric.operandViolations().getLast().endsWith("found at reap"));

      // Held (still on the wire): found when reset discards it.
      pair.fabric.script().holdCompletions();
      assertEquals(POSTED, pair.write(1, operands[1], 64));
      arenas[1].close();
      pair.initiator.reset();
      assertTrue(pair.fabric.operandViolations().getLast().endsWith("found at reset"));

      long peer = pair.initiator.insertPeer(pair.target.localAddress());
      assertEquals(
          POSTED,
          pair.initiator.postRead(
              2,
              peer,
              operands[2].address(),
              64,
              0,
              pair.remoteBase,
              pair.region.advertisement().remoteKey()));
      arenas[2].close();
      pair.initiator.close();
      assertTrue(pair.fabric.operandViolations().getLast().endsWith("found at close"));
      assertEquals(3, pair.fabric.operandViolations().size());
    }
  }

  @Test
  void anOperandClosedOnlyAfterItsCompletionWasReapedIsFine() {
    try (Pair pair = new Pair(1, 4096)) {
      Arena operandArena = Arena.ofShared();
      MemorySegment source = operandArena.allocate(256, 64).fill((byte) 3);
      pair.fabric.watchOperand(source);
      pair.fabric.script().holdCompletions();
      assertEquals(POSTED, pair.write(0, source, 0));
      pair.fabric.script().releaseCompletions();
      assertEquals(0, pair.reapAll().only().errno());
      operandArena.close();
      assertEquals(List.of(), pair.fabric.operandViolations());
      assertEquals(0, pair.counters().violations());
      assertEquals(3, pair.targetMemory.get(ValueLayout.JAVA_BYTE, 255));
    }
  }

  @Test
  void onlyMemoryAnyThreadMayTouchCanBeWatched() {
    try (FakeFabric fabric = FakeFabric.create("watch-confined");
        Arena confined = Arena.ofConfined()) {
      assertThrows(IllegalArgumentException.class, () -> fabric.watchOperand(confined.allocate(8)));
      assertThrows(
          IllegalArgumentException.class,
          () -> fabric.watchOperand(MemorySegment.ofArray(new byte[8])));
    }
  }
}
