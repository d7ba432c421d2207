package dev.dma.core;

import dev.dma.api.Advertisement;
import java.lang.foreign.MemorySegment;

/**
 * Memory a {@link PassiveTarget} exposed for remote access ({@link PassiveTarget#expose}): the
 * {@link Advertisement} to send to the server, and the registration to close before the memory is
 * freed.
 *
 * <p>Ownership: the caller owns the memory and this handle. {@link #close()} deregisters the memory
 * on the target's thread and returns once it is done, so the memory may be freed right after; the
 * target closes every region still open when it stops. Closing twice, or after the target closed,
 * is harmless. Thread-safe.
 */
public final class TargetRegion implements AutoCloseable {
  private final MemorySegment segment;
  private final Advertisement advertisement;
  private final Runnable deregister;
  private boolean closed;

  TargetRegion(MemorySegment segment, Advertisement advertisement, Runnable deregister) {
    this.segment = segment;
    this.advertisement = advertisement;
    this.deregister = deregister;
  }

  /**
   * What a server needs to read and write this memory: the target's address, the remote key, the
   * remote address and the exposed length. Send it over your control channel ({@link
   * Advertisement#toFields()}).
   *
   * @return the advertisement
   */
  public Advertisement advertisement() {
    return advertisement;
  }

  /**
   * The exposed memory.
   *
   * @return the segment that was exposed
   */
  public MemorySegment segment() {
    return segment;
  }

  /** Deregisters the memory: from now on the server's transfers to it fail. Idempotent. */
  @Override
  public void close() {
    synchronized (this) {
      if (closed) {
        return;
      }
      closed = true;
    }
    deregister.run();
  }

  @Override
  public String toString() {
    return "TargetRegion[base=0x"
        + Long.toHexString(segment.address())
        + ", length="
        + segment.byteSize()
        + "]";
  }
}
