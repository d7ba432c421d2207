package dev.dma.api;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import org.junit.jupiter.api.Test;

class OperandsTest {
  private static DmaException refused(Operands operands, Direction direction) {
    DmaException error =
        assertThrows(DmaException.class, () -> Operands.resolve(operands, direction));
    assertEquals(DmaException.Kind.FABRIC, error.kind());
    return error;
  }

  @Test
  void defaultsSupplyNothing() {
    Operands none = new Operands() {};
    assertEquals(
        "the caller context supplied no source bytes for a ToPeer transfer",
        refused(none, Direction.TO_PEER).getMessage());
    assertEquals(
        "the caller context allocated no landing buffer for a FromPeer transfer",
        refused(none, Direction.fromPeer(8)).getMessage());
    assertNull(none.cacheableSpan());
  }

  @Test
  void aShortLandingBufferIsRefused() {
    try (Arena arena = Arena.ofConfined()) {
      Operands shortBuffer = Operands.of(arena.allocate(10));
      assertEquals(
          "the caller context allocated 10 bytes for a 16 byte FromPeer transfer",
          refused(shortBuffer, Direction.fromPeer(16)).getMessage());
    }
  }

  @Test
  void aLongerLandingBufferIsFineAndTheLengthIsTheReads() {
    try (Arena arena = Arena.ofConfined()) {
      MemorySegment segment = arena.allocate(64);
      Operands operands = Operands.of(segment);
      Direction read = Direction.fromPeer(16);
      MemorySegment landing = Operands.resolve(operands, read);
      assertSame(segment, landing);
      assertEquals(16, Operands.lengthOf(read, landing));
      assertEquals(
          64, Operands.lengthOf(Direction.TO_PEER, Operands.resolve(operands, Direction.TO_PEER)));
    }
  }

  @Test
  void heapSegmentsAreRefusedNamingTheField() {
    Operands heap = Operands.of(MemorySegment.ofArray(new byte[8]));
    assertTrue(refused(heap, Direction.TO_PEER).getMessage().contains("source is a heap segment"));
    assertTrue(
        refused(heap, Direction.fromPeer(8))
            .getMessage()
            .contains("landing buffer is a heap segment"));
  }

  @Test
  void closedArenasAreRefused() {
    MemorySegment segment;
    try (Arena arena = Arena.ofConfined()) {
      segment = arena.allocate(8);
    }
    assertTrue(
        refused(Operands.of(segment), Direction.TO_PEER).getMessage().contains("already closed"));
  }

  @Test
  @SuppressWarnings("restricted") // builds a segment no arena could hand out, on purpose
  void overflowingRangesAreRefused() {
    MemorySegment wild = MemorySegment.ofAddress(Long.MAX_VALUE - 4).reinterpret(64);
    assertTrue(
        refused(Operands.of(wild), Direction.TO_PEER)
            .getMessage()
            .contains("source range at 0x7ffffffffffffffb of 64 bytes overflows"));
  }

  @Test
  void negativeReadLengthsAreRefused() {
    assertThrows(IllegalArgumentException.class, () -> Direction.fromPeer(-1));
  }

  @Test
  void cacheableSpans() {
    assertThrows(IllegalArgumentException.class, () -> CacheableSpan.of(Long.MAX_VALUE - 1, 2));
    assertThrows(IllegalArgumentException.class, () -> CacheableSpan.of(-1, 2));
    assertThrows(IllegalArgumentException.class, () -> CacheableSpan.of(0, -1));
    CacheableSpan span = CacheableSpan.of(4096, 8192);
    assertEquals(new CacheableSpan(4096, 12288), span);
    assertEquals(8192, span.lengthBytes());
    assertTrue(span.contains(4096, 12288));
    assertTrue(span.contains(5000, 6000));
    assertTrue(!span.contains(4095, 5000));
    assertTrue(!span.contains(5000, 12289));
    assertThrows(IllegalArgumentException.class, () -> new CacheableSpan(10, 9));
    assertThrows(
        IllegalArgumentException.class, () -> CacheableSpan.of(MemorySegment.ofArray(new byte[1])));
  }
}
