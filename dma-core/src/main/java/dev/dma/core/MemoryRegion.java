package dev.dma.core;

import dev.dma.core.internal.regions.RegionRegistry;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Memory pinned with {@link FabricService#register(MemorySegment)}: operands inside it are
 * registration-cache hits on that service, registered once instead of per transfer.
 *
 * <p>Ownership: the caller owns the memory and this handle. Closing the last handle (see {@link
 * #share()}) invalidates the registration on every service before returning, so the memory may be
 * freed right after; transfers still in flight keep their own lease until they complete. Keep the
 * memory alive until those complete too. Closing twice, or after the service closed, is harmless.
 * Thread-safe.
 */
public final class MemoryRegion implements AutoCloseable {
  private final MemorySegment segment;
  private final RegionRegistry registry;
  private final AtomicInteger holders;
  private boolean closed;

  MemoryRegion(MemorySegment segment, RegionRegistry registry) {
    this(segment, registry, new AtomicInteger(1));
  }

  private MemoryRegion(MemorySegment segment, RegionRegistry registry, AtomicInteger holders) {
    this.segment = segment;
    this.registry = registry;
    this.holders = holders;
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

  /**
   * Another handle to the same region, for a holder that closes independently (for example one per
   * transfer whose operand lives inside). The registration is invalidated when every handle is
   * closed.
   *
   * @return a new handle
   * @throws IllegalStateException if every handle is already closed
   */
  public MemoryRegion share() {
    int current;
    do {
      current = holders.get();
      if (current == 0) {
        throw new IllegalStateException("the region is closed");
      }
    } while (!holders.compareAndSet(current, current + 1));
    return new MemoryRegion(segment, registry, holders);
  }

  /**
   * The number of open handles.
   *
   * @return how many handles are open
   */
  public int holders() {
    return holders.get();
  }

  /** Closes this handle; the last one invalidates the registration. Idempotent per handle. */
  @Override
  public void close() {
    synchronized (this) {
      if (closed) {
        return;
      }
      closed = true;
    }
    if (holders.decrementAndGet() == 0) {
      registry.invalidate(segment.address(), segment.address() + segment.byteSize());
    }
  }

  @Override
  public String toString() {
    return "MemoryRegion[base=0x"
        + Long.toHexString(segment.address())
        + ", length="
        + segment.byteSize()
        + ", holders="
        + holders.get()
        + "]";
  }
}
