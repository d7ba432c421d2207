package dev.dma.provider.efa;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/** Deterministic byte patterns, so a misplaced or torn transfer shows in the checksum. */
final class Patterns {
  private Patterns() {}

  static void fill(MemorySegment segment, long seed) {
    long state = seed * 0x9E3779B97F4A7C15L + 1;
    long size = segment.byteSize();
    long i = 0;
    for (; i + 8 <= size; i += 8) {
      state ^= state << 13;
      state ^= state >>> 7;
      state ^= state << 17;
      segment.set(ValueLayout.JAVA_LONG_UNALIGNED, i, state);
    }
    for (; i < size; i++) {
      segment.set(ValueLayout.JAVA_BYTE, i, (byte) (seed + i));
    }
  }
}
