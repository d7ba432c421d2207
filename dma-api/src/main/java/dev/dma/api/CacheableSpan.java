package dev.dma.api;

import java.lang.foreign.MemorySegment;

/**
 * A native address range {@code [base, end)} around an operand whose memory registration may be
 * cached and shared by every operand inside it.
 *
 * <p>Answering a span from {@link Operands#cacheableSpan()} is a promise: before any page in it is
 * unmapped, freed or given back to the OS, the owner calls the service's {@code invalidate(base,
 * end)}. Rewriting the bytes needs no invalidate. Immutable.
 *
 * @param base the first address; not negative
 * @param end one past the last address; not below {@code base}
 */
public record CacheableSpan(long base, long end) {

  /**
   * Checks the range.
   *
   * @throws IllegalArgumentException if {@code base} is negative or {@code end < base}
   */
  public CacheableSpan {
    if (base < 0) {
      throw new IllegalArgumentException("base is negative: " + base);
    }
    if (end < base) {
      throw new IllegalArgumentException("end " + end + " is below base " + base);
    }
  }

  /**
   * The span {@code [base, base + lengthBytes)}.
   *
   * @param base the first address; not negative
   * @param lengthBytes the length; not negative
   * @return the span
   * @throws IllegalArgumentException if either argument is negative or the range overflows the
   *     address space
   */
  public static CacheableSpan of(long base, long lengthBytes) {
    if (base < 0 || lengthBytes < 0 || base + lengthBytes < base) {
      throw new IllegalArgumentException(
          "no span of " + lengthBytes + " bytes at " + base + " fits the address space");
    }
    return new CacheableSpan(base, base + lengthBytes);
  }

  /**
   * The span covering a native segment.
   *
   * @param segment a native segment
   * @return its span
   * @throws IllegalArgumentException if the segment is not native
   */
  public static CacheableSpan of(MemorySegment segment) {
    if (!segment.isNative()) {
      throw new IllegalArgumentException("segment is not native: " + segment);
    }
    return new CacheableSpan(segment.address(), segment.address() + segment.byteSize());
  }

  /**
   * The span's length.
   *
   * @return {@code end - base}
   */
  public long lengthBytes() {
    return end - base;
  }

  /**
   * Whether {@code [start, limit)} lies inside this span.
   *
   * @param start the first address
   * @param limit one past the last address
   * @return {@code base <= start && limit <= end}
   */
  public boolean contains(long start, long limit) {
    return base <= start && limit <= end;
  }
}
