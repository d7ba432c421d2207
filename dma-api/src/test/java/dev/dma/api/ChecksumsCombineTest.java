package dev.dma.api;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.Random;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import java.util.zip.CRC32C;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** {@link Checksums#crc32cCombine} against {@link CRC32C} over the concatenation. */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class ChecksumsCombineTest {
  private static int crc(byte[] bytes, int offset, int length) {
    CRC32C crc = new CRC32C();
    crc.update(bytes, offset, length);
    return (int) crc.getValue();
  }

  @Test
  void combiningTwoRangesGivesTheChecksumOfTheirConcatenation() {
    Random random = new Random(14);
    for (int length : new int[] {0, 1, 2, 3, 7, 8, 9, 63, 64, 1000, 4096, 65_537, 1 << 20}) {
      byte[] bytes = new byte[length];
      random.nextBytes(bytes);
      for (int split : new int[] {0, 1, length / 3, length / 2, length - 1, length}) {
        if (split < 0 || split > length) {
          continue;
        }
        int combined =
            Checksums.crc32cCombine(
                crc(bytes, 0, split), crc(bytes, split, length - split), length - split);
        assertEquals(crc(bytes, 0, length), combined, "length " + length + " split " + split);
      }
    }
  }

  @Test
  void combiningManyChunksInOrderGivesTheWholeChecksum() {
    byte[] bytes = new byte[3 * 1024 * 1024 + 5];
    new Random(2).nextBytes(bytes);
    int chunk = 512 * 1024;
    int combined = crc(bytes, 0, Math.min(chunk, bytes.length));
    for (int offset = chunk; offset < bytes.length; offset += chunk) {
      int length = Math.min(chunk, bytes.length - offset);
      combined = Checksums.crc32cCombine(combined, crc(bytes, offset, length), length);
    }
    assertEquals(crc(bytes, 0, bytes.length), combined);
  }

  @Test
  void theEmptySecondRangeChangesNothingAndKnownValuesHold() {
    byte[] digits = "123456789".getBytes(java.nio.charset.StandardCharsets.US_ASCII);
    assertEquals(0xE3069283, crc(digits, 0, 9));
    assertEquals(0xE3069283, Checksums.crc32cCombine(0xE3069283, 0, 0));
    assertEquals(0xE3069283, Checksums.crc32cCombine(crc(digits, 0, 4), crc(digits, 4, 5), 5));
  }

  /** Bit 29 of a length is the first whose power of x (8n = 2^32) leaves one table cycle. */
  private static final long X = 4099;

  private static final long[] LONG_LENGTHS = {1L << 29, (1L << 29) + X, 1L << 32, (1L << 32) + X};

  /** CRC-32C of that many zero bytes, by the JDK over a zero buffer (independent of combine). */
  private static final int[] ZEROS_CRC = {0x038d26c4, 0x07c38270, 0xf16177d2, 0xb9e32774};

  /** CRC-32C of "123456789" followed by that many zero bytes, by the JDK. */
  private static final int[] DIGITS_THEN_ZEROS_CRC = {
    0xf8c1a4a0, 0xd14ae7f5, 0x4dd64a54, 0x7ca6f6f3
  };

  /**
   * Second ranges of 2^29 bytes and more: the table of x^(2^k) used to wrap at k = 32 and reuse x
   * for x^(2^32), which for Castagnoli is x^2. Zero bytes keep the direct CRC cheap (one pass of
   * the JDK's intrinsic over 4 GiB, well under a second here); the first ranges are random splits
   * of the same zeros and a short non-zero prefix, so the first CRC is never trivial.
   */
  @Test
  void combiningSecondRangesOfTwoToThe29And32BytesAndBeyondMatchesTheDirectChecksum() {
    Random random = new Random(29);
    // Every length whose zeros' CRC the checks below need, filled in by one pass.
    TreeMap<Long, Integer> zeros = new TreeMap<>();
    long[][] splits = new long[LONG_LENGTHS.length][];
    for (int t = 0; t < LONG_LENGTHS.length; t++) {
      long total = LONG_LENGTHS[t];
      zeros.put(total, 0);
      splits[t] =
          new long[] {
            1,
            total - 1,
            1L << 28,
            random.nextLong(1, total),
            random.nextLong(1, total),
            random.nextLong(total - (1L << 20), total)
          };
      for (long first : splits[t]) {
        zeros.put(first, 0);
        zeros.put(total - first, 0);
      }
    }
    ByteBuffer buffer = ByteBuffer.allocateDirect(1 << 20);
    CRC32C direct = new CRC32C();
    long done = 0;
    for (long length : zeros.keySet()) {
      while (done < length) {
        int step = (int) Math.min(buffer.capacity(), length - done);
        direct.update(buffer.clear().limit(step));
        done += step;
      }
      zeros.put(length, (int) direct.getValue());
    }

    byte[] digits = "123456789".getBytes(StandardCharsets.US_ASCII);
    int digitsCrc = crc(digits, 0, digits.length);
    for (int t = 0; t < LONG_LENGTHS.length; t++) {
      long total = LONG_LENGTHS[t];
      int whole = zeros.get(total);
      assertEquals(ZEROS_CRC[t], whole, "the JDK's CRC of " + total + " zero bytes");
      assertEquals(
          DIGITS_THEN_ZEROS_CRC[t],
          Checksums.crc32cCombine(digitsCrc, whole, total),
          "\"123456789\" then " + total + " zero bytes");
      for (long first : splits[t]) {
        long second = total - first;
        assertEquals(
            whole,
            Checksums.crc32cCombine(zeros.get(first), zeros.get(second), second),
            total + " zero bytes split at " + first);
      }
    }
  }

  /** Lengths near the top of a long: every bit of the length has its own table entry. */
  @Test
  void combiningIsMultiplicativeForEveryBitOfTheLength() {
    // With a zero second CRC, combine(c, 0, n) is c times x^(8n): appending a bytes and then b
    // must equal appending a + b at once. That holds only when each table entry is the square of
    // the one before, for lengths no direct CRC could reach (the old table wrapped at 2^32).
    Random random = new Random(63);
    for (int i = 0; i < 1000; i++) {
      long a = random.nextLong(1, Long.MAX_VALUE / 2);
      long b = random.nextLong(1, Long.MAX_VALUE / 2);
      int c = random.nextInt();
      assertEquals(
          Checksums.crc32cCombine(c, 0, a + b),
          Checksums.crc32cCombine(Checksums.crc32cCombine(c, 0, a), 0, b),
          "a " + a + " b " + b);
    }
  }
}
