package dev.dma.libfabric;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * {@link HugeBufferPool}: sizes, carving, reuse, kept buffers and huge pages, read from what the
 * kernel reports for this process ({@code /proc/self/maps} and {@code smaps}).
 */
@Timeout(value = 30, unit = TimeUnit.SECONDS)
class HugeBufferPoolTest {
  private static final long CHUNK = HugeBufferPool.CHUNK_BYTES;

  @Test
  void capacitiesArePowersOfTwoUpToHalfAChunkThenWholeChunks() {
    assertEquals(8192, HugeBufferPool.capacityFor(1));
    assertEquals(8192, HugeBufferPool.capacityFor(4097));
    assertEquals(8192, HugeBufferPool.capacityFor(8192));
    assertEquals(16384, HugeBufferPool.capacityFor(8193));
    assertEquals(65536, HugeBufferPool.capacityFor(65536));
    assertEquals(1 << 20, HugeBufferPool.capacityFor(1 << 20));
    assertEquals(CHUNK, HugeBufferPool.capacityFor((1 << 20) + 1));
    assertEquals(2 * CHUNK, HugeBufferPool.capacityFor(CHUNK + 1));
  }

  @Test
  void aClassIsCarvedSideBySideFromOneAlignedChunkAndEveryByteIsItsBuffers() {
    HugeBufferPool pool = new HugeBufferPool();
    try {
      int perChunk = (int) (CHUNK / 65536);
      long[] buffers = new long[perChunk];
      Set<Long> offsets = new HashSet<>();
      for (int i = 0; i < perChunk; i++) {
        buffers[i] = pool.take(65536);
        assertEquals(buffers[0] & -CHUNK, buffers[i] & -CHUNK, "buffer " + i + " in the chunk");
        offsets.add(buffers[i] - (buffers[i] & -CHUNK));
      }
      assertEquals(0, buffers[0] % CHUNK, "the chunk is aligned to a huge page, handed out first");
      assertEquals(perChunk, offsets.size());
      for (long offset : offsets) {
        assertEquals(0, offset % 65536);
      }
      assertEquals(CHUNK, pool.mappedBytes());
      for (int i = 0; i < perChunk; i++) {
        segment(buffers[i], 65536).fill((byte) i);
      }
      for (int i = 0; i < perChunk; i++) {
        MemorySegment buffer = segment(buffers[i], 65536);
        assertEquals((byte) i, buffer.get(ValueLayout.JAVA_BYTE, 0));
        assertEquals((byte) i, buffer.get(ValueLayout.JAVA_BYTE, 65535), "no overlap at the end");
      }
      long next = pool.take(65536);
      assertEquals(2 * CHUNK, pool.mappedBytes(), "a full class maps a second chunk");
      assertNotEquals(buffers[0] & -CHUNK, next & -CHUNK);
    } finally {
      pool.close();
    }
  }

  @Test
  void aBufferGivenBackIsHandedOutAgainAndALargeOneIsUnmapped() throws IOException {
    HugeBufferPool pool = new HugeBufferPool();
    try {
      long small = pool.take(100_000);
      pool.give(small, HugeBufferPool.capacityFor(100_000));
      assertEquals(small, pool.take(131072), "the same class takes the buffer back");

      long large = pool.take(3 << 20);
      assertEquals(0, large % CHUNK);
      assertTrue(mapped(large), "mapped while taken");
      segment(large, 4 << 20).fill((byte) 7);
      pool.give(large, HugeBufferPool.capacityFor(3 << 20));
      assertFalse(mapped(large), "a buffer of its own chunks is unmapped when given back");
      assertEquals(CHUNK, pool.mappedBytes());
    } finally {
      pool.close();
    }
  }

  @Test
  void aKeptBufferIsNeverHandedOutAgainAndItsChunkOutlivesClose() throws IOException {
    HugeBufferPool pool = new HugeBufferPool();
    int perChunk = (int) (CHUNK / 65536);
    long[] first = new long[perChunk];
    for (int i = 0; i < perChunk; i++) {
      first[i] = pool.take(65536);
    }
    long kept = first[3];
    pool.keep(kept);
    for (int i = 0; i < perChunk; i++) {
      if (i != 3) {
        pool.give(first[i], 65536);
      }
    }
    long other = 0;
    for (int i = 0; i < 2 * perChunk; i++) {
      long buffer = pool.take(65536);
      assertNotEquals(kept, buffer, "take " + i);
      if ((buffer & -CHUNK) != (kept & -CHUNK)) {
        other = buffer;
      }
    }
    assertNotEquals(0, other, "a second chunk was mapped");
    segment(kept, 65536).fill((byte) 9);
    pool.close();
    assertTrue(mapped(kept), "a peer may still read the kept buffer: its chunk stays mapped");
    assertEquals((byte) 9, segment(kept, 65536).get(ValueLayout.JAVA_BYTE, 65535));
    assertFalse(mapped(other), "a chunk without a kept buffer is unmapped at close");
  }

  @Test
  void chunksAreBackedByHugePagesWhereTheKernelOffersThem() throws IOException {
    Path enabled = Path.of("/sys/kernel/mm/transparent_hugepage/enabled");
    assumeTrue(
        Files.exists(enabled) && !Files.readString(enabled).contains("[never]"),
        "transparent huge pages are off on this host");
    HugeBufferPool pool = new HugeBufferPool();
    try {
      long buffer = pool.take(1 << 20);
      long neighbour = pool.take(1 << 20);
      segment(buffer, 1 << 20).fill((byte) 1);
      segment(neighbour, 1 << 20).fill((byte) 2);
      long kib = anonHugePagesKib(buffer);
      assertTrue(kib >= CHUNK / 1024, "AnonHugePages of the chunk's mapping: " + kib + " kB");
    } finally {
      pool.close();
    }
  }

  @SuppressWarnings("restricted")
  private static MemorySegment segment(long address, long bytes) {
    return MemorySegment.ofAddress(address).reinterpret(bytes);
  }

  private static boolean mapped(long address) throws IOException {
    for (String line : Files.readAllLines(Path.of("/proc/self/maps"))) {
      if (contains(line, address)) {
        return true;
      }
    }
    return false;
  }

  // The AnonHugePages line of the smaps entry whose range holds the address.
  private static long anonHugePagesKib(long address) throws IOException {
    List<String> lines = Files.readAllLines(Path.of("/proc/self/smaps"));
    for (int i = 0; i < lines.size(); i++) {
      if (contains(lines.get(i), address)) {
        for (int j = i + 1; j < lines.size() && !lines.get(j).matches("^[0-9a-f]+-.*"); j++) {
          if (lines.get(j).startsWith("AnonHugePages:")) {
            return Long.parseLong(lines.get(j).replaceAll("[^0-9]", ""));
          }
        }
      }
    }
    throw new AssertionError("no smaps entry holds 0x" + Long.toHexString(address));
  }

  private static boolean contains(String mapsLine, long address) {
    int dash = mapsLine.indexOf('-');
    int space = mapsLine.indexOf(' ');
    if (dash < 0 || space < dash) {
      return false;
    }
    long start = Long.parseUnsignedLong(mapsLine.substring(0, dash), 16);
    long end = Long.parseUnsignedLong(mapsLine.substring(dash + 1, space), 16);
    return Long.compareUnsigned(address, start) >= 0 && Long.compareUnsigned(address, end) < 0;
  }
}
