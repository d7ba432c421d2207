package dev.dma.api;

import java.lang.foreign.MemorySegment;

/** {@link Operands#of(MemorySegment)}: one segment serves as source and landing buffer. */
record SegmentOperands(MemorySegment segment) implements Operands {
  SegmentOperands {
    if (segment == null) {
      throw new NullPointerException("segment");
    }
  }

  @Override
  public MemorySegment source() {
    return segment;
  }

  @Override
  public MemorySegment allocate(long lengthBytes) {
    return segment;
  }
}
