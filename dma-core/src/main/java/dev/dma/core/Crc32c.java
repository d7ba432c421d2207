package dev.dma.core;

/**
 * CRC-32C arithmetic that {@link java.util.zip.CRC32C} lacks: combining the checksums of two
 * adjacent byte ranges into the checksum of their concatenation, without the bytes (zlib's {@code
 * crc32_combine}, GF(2) matrix method, for the Castagnoli polynomial). A striped transfer hashes
 * each chunk where it completes and combines the results in O(log n) per chunk.
 *
 * <p>Stateless and thread-safe; {@link #combine} allocates two 32-int tables per call.
 */
public final class Crc32c {
  /** The reflected Castagnoli polynomial. */
  private static final int POLYNOMIAL = 0x82F63B78;

  private Crc32c() {}

  /**
   * The CRC-32C of {@code A ‖ B} from {@code crc32c(A)}, {@code crc32c(B)} and B's length.
   *
   * @param first the CRC-32C of the first range (as {@link dev.dma.api.Checksums#crc32c})
   * @param second the CRC-32C of the range that follows it
   * @param secondLength the second range's length in bytes; 0 or less answers {@code first}
   * @return the CRC-32C of the concatenation
   */
  public static int combine(int first, int second, long secondLength) {
    if (secondLength <= 0) {
      return first;
    }
    int[] even = new int[32];
    int[] odd = new int[32];
    // The operator for one zero bit.
    odd[0] = POLYNOMIAL;
    int row = 1;
    for (int n = 1; n < 32; n++) {
      odd[n] = row;
      row <<= 1;
    }
    square(even, odd); // two zero bits
    square(odd, even); // four zero bits
    // Apply len2 zero bytes to the first CRC: the first squaring below gives one byte (eight bits).
    long remaining = secondLength;
    int crc = first;
    do {
      square(even, odd);
      if ((remaining & 1) != 0) {
        crc = times(even, crc);
      }
      remaining >>>= 1;
      if (remaining == 0) {
        break;
      }
      square(odd, even);
      if ((remaining & 1) != 0) {
        crc = times(odd, crc);
      }
      remaining >>>= 1;
    } while (remaining != 0);
    return crc ^ second;
  }

  private static int times(int[] matrix, int vector) {
    int sum = 0;
    int i = 0;
    int v = vector;
    while (v != 0) {
      if ((v & 1) != 0) {
        sum ^= matrix[i];
      }
      v >>>= 1;
      i++;
    }
    return sum;
  }

  private static void square(int[] square, int[] matrix) {
    for (int n = 0; n < 32; n++) {
      square[n] = times(matrix, matrix[n]);
    }
  }
}
