package dev.dma.core;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.Random;
import java.util.zip.CRC32C;
import org.junit.jupiter.api.Test;

/** {@link Crc32c#combine} against {@link CRC32C} over the concatenation. */
class Crc32cTest {
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
            Crc32c.combine(crc(bytes, 0, split), crc(bytes, split, length - split), length - split);
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
      combined = Crc32c.combine(combined, crc(bytes, offset, length), length);
    }
    assertEquals(crc(bytes, 0, bytes.length), combined);
  }

  @Test
  void theEmptySecondRangeChangesNothingAndKnownValuesHold() {
    byte[] digits = "123456789".getBytes(java.nio.charset.StandardCharsets.US_ASCII);
    assertEquals(0xE3069283, crc(digits, 0, 9));
    assertEquals(0xE3069283, Crc32c.combine(0xE3069283, 0, 0));
    assertEquals(0xE3069283, Crc32c.combine(crc(digits, 0, 4), crc(digits, 4, 5), 5));
  }
}
