package dev.dma.fake;

import dev.dma.api.Advertisement;
import dev.dma.api.RemoteAccess;
import dev.dma.spi.ExposedRegion;
import java.lang.foreign.MemorySegment;
import org.jspecify.annotations.Nullable;

/**
 * A region one {@link FakeEndpoint} exposed for remote access: the native range, the key the fabric
 * gave it, what it allows, and whether a remote range lies inside it. The fabric finds it by key
 * ({@link FakeFabric#region(long)}) when an initiator's bytes move.
 *
 * <p>Threads: {@link #close()} is thread-safe and idempotent (it takes the fabric's lock); the rest
 * is immutable or called with the lock held, by the owner closing or by an initiator's endpoint
 * checking an access against it.
 */
final class Region implements ExposedRegion {
  final FakeEndpoint owner;
  final long key;
  final long base;
  final long lengthBytes;
  final MemorySegment.Scope scope;
  final boolean virtual;
  final RemoteAccess access;
  private boolean closed;

  Region(
      FakeEndpoint owner, long key, MemorySegment segment, boolean virtual, RemoteAccess access) {
    this.owner = owner;
    this.key = key;
    this.base = segment.address();
    this.lengthBytes = segment.byteSize();
    this.scope = segment.scope();
    this.virtual = virtual;
    this.access = access;
  }

  @Override
  public Advertisement advertisement() {
    return new Advertisement(
        owner.addressUnsafe(),
        key,
        virtual ? base : 0,
        lengthBytes > 0 ? lengthBytes : Advertisement.UNKNOWN_LENGTH);
  }

  /**
   * The offset into the region that a remote address names: the address itself, or its distance
   * from the base under virtual addressing.
   */
  long offset(long remoteAddress) {
    return virtual ? remoteAddress - base : remoteAddress;
  }

  /**
   * Why this region refuses a remote write or read of {@code [remoteAddress, +length)}: the access
   * is not allowed, or the range is not inside it; null when it allows it.
   */
  @Nullable String refusal(boolean write, long remoteAddress, long length) {
    if (write ? !access.allowsWrite() : !access.allowsRead()) {
      return "the region of remote key "
          + key
          + " does not allow remote "
          + (write ? "writes" : "reads");
    }
    long offset = offset(remoteAddress);
    if (offset < 0 || offset > lengthBytes || length > lengthBytes - offset) {
      return "remote range ["
          + Long.toUnsignedString(remoteAddress)
          + ", +"
          + length
          + ") is outside the region of remote key "
          + key
          + " ("
          + lengthBytes
          + " bytes at "
          + (virtual ? "0x" + Long.toHexString(base) : "offset 0")
          + ")";
    }
    return null;
  }

  @Override
  public void close() {
    synchronized (owner.lock()) {
      closeUnlocked();
    }
  }

  /** Closes the region with the fabric's lock held, as its endpoint closes. */
  void closeUnlocked() {
    if (closed) {
      return;
    }
    closed = true;
    owner.regionClosed(this);
  }

  @Override
  public String toString() {
    return "ExposedRegion[key " + key + ", " + lengthBytes + " bytes]";
  }
}
