package dev.dma.provider.efa;

import dev.dma.api.Operands;
import java.lang.foreign.MemorySegment;

/** A test context: one native segment, sent from and landed in, with an id to match completions. */
record Buffer(int id, MemorySegment segment) implements Operands {
  @Override
  public MemorySegment source() {
    return segment;
  }

  @Override
  public MemorySegment allocate(long lengthBytes) {
    return segment;
  }
}
