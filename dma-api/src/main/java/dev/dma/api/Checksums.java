package dev.dma.api;

import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.util.zip.CRC32C;

/**
 * CRC-32C (Castagnoli, reflected; polynomial 0x1EDC6F41, initial value and final xor 0xFFFFFFFF),
 * the checksum of the dma wire protocol: {@code ""} gives 0 and {@code "123456789"} gives
 * 0xE3069283. Computed with {@link CRC32C}, which the JDK compiles to the processor's CRC
 * instructions. Stateless and thread-safe.
 */
public final class Checksums {
  /** ByteBuffer views are int-indexed, so large segments are hashed in chunks of this size. */
  private static final long CHUNK_BYTES = 1L << 30;

  private Checksums() {}

  /**
   * The CRC-32C of a segment's bytes (heap or native).
   *
   * @param segment the bytes
   * @return the checksum
   */
  public static int crc32c(MemorySegment segment) {
    CRC32C crc = new CRC32C();
    long size = segment.byteSize();
    for (long offset = 0; offset < size; offset += CHUNK_BYTES) {
      long chunk = Math.min(CHUNK_BYTES, size - offset);
      ByteBuffer view = segment.asSlice(offset, chunk).asByteBuffer();
      crc.update(view);
    }
    return (int) crc.getValue();
  }

  /**
   * The CRC-32C of a byte array.
   *
   * @param bytes the bytes
   * @return the checksum
   */
  public static int crc32c(byte[] bytes) {
    CRC32C crc = new CRC32C();
    crc.update(bytes, 0, bytes.length);
    return (int) crc.getValue();
  }
}
