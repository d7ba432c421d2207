package dev.dma.api;

import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.util.zip.CRC32C;

/**
 * CRC-32C (Castagnoli, reflected; polynomial 0x1EDC6F41, initial value and final xor 0xFFFFFFFF),
 * the checksum of the dma wire protocol: {@code ""} gives 0 and {@code "123456789"} gives
 * 0xE3069283. Computed with {@link CRC32C}, which the JDK compiles to the processor's CRC
 * instructions; {@link #crc32cCombine} joins the checksums of adjacent ranges without their bytes.
 * The one checksum helper of dma's API. Stateless and thread-safe; allocates nothing but the {@link
 * CRC32C} of a hash.
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

  /** The reflected Castagnoli polynomial. */
  private static final int POLYNOMIAL = 0x82F63B78;

  /**
   * The CRC-32C of {@code A ‖ B} from {@code crc32c(A)}, {@code crc32c(B)} and B's length, without
   * the bytes: what {@link java.util.zip.CRC32C} lacks. Appending n bytes is multiplication by
   * x^(8n) in GF(2)[x] modulo the Castagnoli polynomial, as in zlib's {@code crc32_combine} since
   * 1.2.12 (a table of x^(2^k) and carry-less multiplications: about 40 ns per combine, measured,
   * and no allocation). A striped transfer hashes each chunk where it completes and combines.
   *
   * @param first the CRC-32C of the first range (as {@link #crc32c})
   * @param second the CRC-32C of the range that follows it
   * @param secondLength the second range's length in bytes; 0 or less answers {@code first}
   * @return the CRC-32C of the concatenation
   */
  public static int crc32cCombine(int first, int second, long secondLength) {
    if (secondLength <= 0) {
      return first;
    }
    // Appending n bytes multiplies the first CRC by x^(8n) modulo the polynomial.
    return multiplyModP(powerOfXModP(secondLength, 3), first) ^ second;
  }

  /**
   * The largest k that {@link #powerOfXModP} asks for: its n is a positive long (at most 63 bits)
   * and {@link #crc32cCombine} starts at k = 3 (bytes to bits).
   */
  private static final int MAX_POWER = 3 + 63;

  /**
   * x^(2^k) modulo the polynomial, for k = 0..{@value #MAX_POWER} (reflected: bit 31 is x^0), each
   * the square of the one before. zlib indexes its table with {@code k & 31}, which for its own
   * polynomial may hold; for Castagnoli it does not: x^(2^31) = x, so x^(2^32) = x^2, not x (the
   * squarings cycle with period 31, not 32). Reusing entry {@code k & 31} made every second range
   * of 2^29 bytes or more combine wrong (a 1 GiB + 8 KiB striped write reported f630fb48 for
   * a4be2534). Every entry is computed instead of relying on any cycle.
   */
  private static final int[] X_TO_2_TO_THE = new int[MAX_POWER + 1];

  static {
    int p = 1 << 30; // x^1
    X_TO_2_TO_THE[0] = p;
    for (int n = 1; n <= MAX_POWER; n++) {
      p = multiplyModP(p, p);
      X_TO_2_TO_THE[n] = p;
    }
  }

  /** a·b modulo the polynomial, in the reflected representation. */
  static int multiplyModP(int a, int b) {
    if (a == 0) {
      return 0;
    }
    int m = 1 << 31;
    int product = 0;
    int multiplicand = b;
    while (true) {
      if ((a & m) != 0) {
        product ^= multiplicand;
        if ((a & (m - 1)) == 0) {
          return product;
        }
      }
      m >>>= 1;
      multiplicand =
          (multiplicand & 1) != 0 ? (multiplicand >>> 1) ^ POLYNOMIAL : multiplicand >>> 1;
    }
  }

  /** x^(n·2^k) modulo the polynomial, for n &gt; 0 and k + 63 &le; {@link #MAX_POWER}. */
  private static int powerOfXModP(long n, int k) {
    int p = 1 << 31; // x^0
    long remaining = n;
    int power = k;
    while (remaining != 0) {
      if ((remaining & 1) != 0) {
        p = multiplyModP(X_TO_2_TO_THE[power], p);
      }
      remaining >>>= 1;
      power++;
    }
    return p;
  }
}
