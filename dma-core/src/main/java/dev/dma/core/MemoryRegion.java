package dev.dma.core;

import dev.dma.core.internal.regions.RegionRegistry;
import java.lang.foreign.MemorySegment;

/**
 * Memory pinned with {@link FabricService#register(MemorySegment)}: operands inside it are
 * registration-cache hits on that service, registered once instead of per transfer.
 *
 * <p>Ownership: the caller owns the memory and this handle. Closing it invalidates the registration
 * on every service before returning, so the memory may be freed right after; transfers still in
 * flight keep their own lease until they complete. Keep the memory alive until those complete too.
 * Closing twice, or after the service closed, is harmless. Thread-safe.
 */
public final class MemoryRegion implements AutoCloseable {
  private final MemorySegment segment;
  private final RegionRegistry registry;
  private boolean closed;

  MemoryRegion(MemorySegment segment, RegionRegistry registry) {
    this.segment = segment;
    this.registry = registry;
  }

  /**
   * The pinned memory.
   *
   * @return the segment that was registered
   */
  public MemorySegment segment() {
    return segment;
  }

  /**
   * The pinned length.
   *
   * @return the segment's size in bytes
   */
  public long lengthBytes() {
    return segment.byteSize();
  }

  /** Closes this handle, invalidating the registration. Idempotent. */
  @Override
  public void close() {
    synchronized (this) {
      if (closed) {
        return;
      }
      closed = true;
    }
    registry.invalidate(segment.address(), segment.address() + segment.byteSize());
  }

  @Override
  public synchronized String toString() {
    return "MemoryRegion[base=0x"
        + Long.toHexString(segment.address())
        + ", length="
        + segment.byteSize()
        + ", closed="
        + closed
        + "]";
  }
}
