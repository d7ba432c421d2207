package dev.dma.api;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;

class ChecksumsTest {
  private static int crc(String text) {
    return Checksums.crc32c(text.getBytes(StandardCharsets.US_ASCII));
  }

  @Test
  void matchesKnownCrc32cVectors() {
    assertEquals(0, crc(""));
    assertEquals(0xE3069283, crc("123456789"));
  }

  @Test
  void detectsASingleBitFlip() {
    assertNotEquals(crc("hello over the fabric"), crc("hallo over the fabric"));
  }

  @Test
  void isOrderSensitive() {
    assertNotEquals(crc("ab"), crc("ba"));
  }

  @Test
  void nativeHeapAndArrayAgree() {
    byte[] bytes = new byte[100_003];
    for (int i = 0; i < bytes.length; i++) {
      bytes[i] = (byte) (i * 31 + 7);
    }
    try (Arena arena = Arena.ofConfined()) {
      MemorySegment segment = arena.allocate(bytes.length);
      MemorySegment.copy(bytes, 0, segment, ValueLayout.JAVA_BYTE, 0, bytes.length);
      int expected = Checksums.crc32c(bytes);
      assertEquals(expected, Checksums.crc32c(segment));
      assertEquals(expected, Checksums.crc32c(MemorySegment.ofArray(bytes)));
      assertEquals(
          0xE3069283,
          Checksums.crc32c(MemorySegment.ofArray("123456789".getBytes(StandardCharsets.US_ASCII))));
    }
  }
}
