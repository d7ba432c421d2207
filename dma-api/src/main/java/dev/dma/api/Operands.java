package dev.dma.api;

import java.lang.foreign.MemorySegment;
import org.jspecify.annotations.Nullable;

/**
 * The local end of a transfer, implemented by the caller's context.
 *
 * <p>Every method has a default, so a context implements only the direction it serves. Operand
 * segments must be native memory ({@link MemorySegment#isNative()}) that stays alive and unmoved
 * until the transfer's {@link Completion} is produced: the provider reads or writes it
 * asynchronously.
 *
 * <p>Threads: the methods are called on the fabric worker thread, once per transfer, after the
 * request was submitted and before it is posted. They must be quick and must not block.
 */
public interface Operands {

  /** Failure text when {@link #source()} answers none. */
  String NO_SOURCE = "the caller context supplied no source bytes for a ToPeer transfer";

  /** Failure text when {@link #allocate(long)} answers none. */
  String NO_LANDING_BUFFER =
      "the caller context allocated no landing buffer for a FromPeer transfer";

  /** Failure text when {@link #memoryKind()} answers none. */
  String NO_MEMORY_KIND = "the caller context reported no memory kind (memoryKind() answered null)";

  /**
   * The bytes a {@link Direction.ToPeer} transfer sends; its whole size is the transfer length.
   *
   * @return a native segment, or {@code null} (the default) when this context sends nothing
   */
  default @Nullable MemorySegment source() {
    return null;
  }

  /**
   * The buffer a {@link Direction.FromPeer} transfer of {@code lengthBytes} lands in. Exactly
   * {@code lengthBytes} bytes land at its start; a longer segment's tail is untouched, a shorter
   * one is refused rather than overrun.
   *
   * @param lengthBytes the length of the read
   * @return a native segment of at least {@code lengthBytes}, or {@code null} (the default)
   */
  default @Nullable MemorySegment allocate(long lengthBytes) {
    return null;
  }

  /**
   * A span around the operand whose registration may be cached and reused, or {@code null} (the
   * default) to register the operand for this transfer only.
   *
   * <p>Asked on the worker, after the operand has resolved, and only on a registration-cache miss,
   * so per-extent set-up runs once per registration. A span that does not contain the operand is
   * ignored. Answering a span is a promise to invalidate it before its pages are given back (see
   * {@link CacheableSpan}). Memory registered with the service's {@code register} needs none of
   * this.
   *
   * @return the span, or {@code null}
   */
  default @Nullable CacheableSpan cacheableSpan() {
    return null;
  }

  /**
   * The kind of memory this context's operands are ({@link #source()} and {@link #allocate}'s
   * buffers alike); {@link MemoryKind#HOST} by default.
   *
   * <p>Asked on the fabric worker (or, for a striped transfer, on the submitting thread) through
   * {@link #kindOf(Operands)}: by the intake of a checksummed transfer, which is refused when the
   * CPU cannot read the kind, and by the registration of the operand, which hands the kind to the
   * provider's {@code register} (on a registration-cache miss, and on every transfer when the
   * provider needs no local registration, since memory other than system memory is registered
   * anyway). Must be quick, must not block, and must answer the same kind for every transfer of
   * this context.
   *
   * @return the kind, never {@code null}
   */
  default MemoryKind memoryKind() {
    return MemoryKind.HOST;
  }

  /**
   * The memory kind a context reports, checked: how the core asks, so that a context that answers
   * none or throws fails its transfer only, with one text.
   *
   * @param operands the caller context
   * @return its kind
   * @throws DmaException of reason {@link DmaException.Reason#BAD_REQUEST} when the context answers
   *     {@code null} or its {@link #memoryKind()} throws (an {@link Error} included)
   */
  static MemoryKind kindOf(Operands operands) {
    MemoryKind kind;
    try {
      kind = operands.memoryKind();
    } catch (Throwable callerBug) {
      throw new DmaException(
          DmaException.Kind.FABRIC,
          DmaException.Reason.BAD_REQUEST,
          "the caller context's memoryKind() threw: " + callerBug,
          DmaException.UNKNOWN_ERRNO,
          DmaException.UNKNOWN_ERRNO,
          callerBug);
    }
    if (kind == null) {
      throw DmaException.fabric(DmaException.Reason.BAD_REQUEST, NO_MEMORY_KIND);
    }
    return kind;
  }

  /**
   * A context whose one native segment is both its source and its landing buffer.
   *
   * @param segment a native segment
   * @return the context
   */
  static Operands of(MemorySegment segment) {
    return new SegmentOperands(segment);
  }

  /**
   * Resolves the local operand of a transfer: the source for a write, the landing buffer for a
   * read, checked to be native, alive, inside the address space and long enough.
   *
   * <p>Called by the fabric worker; public so that user tests and providers can apply the same
   * rule.
   *
   * @param operands the caller context
   * @param direction the transfer's direction
   * @return the segment; the transfer covers its first {@link #lengthOf(Direction, MemorySegment)}
   *     bytes
   * @throws DmaException of kind {@link DmaException.Kind#FABRIC}, naming what was wrong
   */
  static MemorySegment resolve(Operands operands, Direction direction) {
    if (direction instanceof Direction.FromPeer(long lengthBytes)) {
      MemorySegment landing = operands.allocate(lengthBytes);
      if (landing == null) {
        throw DmaException.fabric(DmaException.Reason.BAD_REQUEST, NO_LANDING_BUFFER);
      }
      checkNative(landing, "landing buffer");
      if (landing.byteSize() < lengthBytes) {
        throw DmaException.fabric(
            DmaException.Reason.BAD_REQUEST,
            "the caller context allocated "
                + landing.byteSize()
                + " bytes for a "
                + lengthBytes
                + " byte FromPeer transfer");
      }
      return landing;
    }
    MemorySegment source = operands.source();
    if (source == null) {
      throw DmaException.fabric(DmaException.Reason.BAD_REQUEST, NO_SOURCE);
    }
    checkNative(source, "source");
    return source;
  }

  /**
   * The number of bytes a transfer moves through its resolved operand.
   *
   * @param direction the transfer's direction
   * @param operand the segment {@link #resolve(Operands, Direction)} returned
   * @return the read length, or the source's size
   */
  static long lengthOf(Direction direction, MemorySegment operand) {
    return direction instanceof Direction.FromPeer(long lengthBytes)
        ? lengthBytes
        : operand.byteSize();
  }

  private static void checkNative(MemorySegment segment, String field) {
    if (!segment.isNative()) {
      throw DmaException.fabric(
          DmaException.Reason.BAD_REQUEST,
          "the caller context's " + field + " is a heap segment; operands must be native memory");
    }
    if (!segment.scope().isAlive()) {
      throw DmaException.fabric(
          DmaException.Reason.BAD_REQUEST,
          "the caller context's " + field + " belongs to an arena that is already closed");
    }
    long address = segment.address();
    if (address < 0 || address + segment.byteSize() < address) {
      throw DmaException.fabric(
          DmaException.Reason.BAD_REQUEST,
          "the caller context's "
              + field
              + " range at 0x"
              + Long.toHexString(address)
              + " of "
              + segment.byteSize()
              + " bytes overflows the address space");
    }
  }
}
