package dev.dma.provider.local;

import java.lang.foreign.MemorySegment;

/**
 * A region of a peer, as this server maps it: the bounds and access the target announced, the
 * mapping of its memfd, the header word ({@link LocalEndpoint#HEADER_KEY}) and the caller's bytes.
 *
 * <p>Immutable. Made and unmapped by its {@link Peer}, read by {@link LocalServer}'s post; both on
 * the owner thread only.
 */
@SuppressWarnings("restricted") // reinterpret: a mapping its peer made, of known length
final class Region {
  final long key;
  final long base;
  final long length;
  final boolean writable;
  final long mapped;
  final long fileBytes;
  final MemorySegment header;
  final MemorySegment data;

  Region(
      long key,
      long base,
      long length,
      boolean writable,
      long mapped,
      long fileBytes,
      long offset) {
    this.key = key;
    this.base = base;
    this.length = length;
    this.writable = writable;
    this.mapped = mapped;
    this.fileBytes = fileBytes;
    this.header = MemorySegment.ofAddress(mapped).reinterpret(LocalEndpoint.HEADER_BYTES);
    this.data = MemorySegment.ofAddress(mapped + offset).reinterpret(length);
  }
}
