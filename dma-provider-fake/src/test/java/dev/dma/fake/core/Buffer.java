package dev.dma.fake.core;

import dev.dma.api.CacheableSpan;
import dev.dma.api.Operands;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.atomic.AtomicInteger;

/** A test context: one native segment with an id, counting how often its span was asked. */
final class Buffer implements Operands {
  final long id;
  final MemorySegment segment;
  final CacheableSpan span;
  final AtomicInteger spanAsked = new AtomicInteger();

  Buffer(long id, MemorySegment segment) {
    this(id, segment, null);
  }

  Buffer(long id, MemorySegment segment, CacheableSpan span) {
    this.id = id;
    this.segment = segment;
    this.span = span;
  }

  @Override
  public MemorySegment source() {
    return segment;
  }

  @Override
  public MemorySegment allocate(long lengthBytes) {
    return segment;
  }

  @Override
  public CacheableSpan cacheableSpan() {
    spanAsked.incrementAndGet();
    return span;
  }

  @Override
  public String toString() {
    return "Buffer#" + id;
  }
}
