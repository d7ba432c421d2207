package dev.dma.libfabric;

import dev.dma.libfabric.internal.Native;
import java.util.Arrays;

/**
 * Native buffers carved from 2 MiB chunks of anonymous memory advised for transparent huge pages,
 * for {@link ShmBounce}: shm's target copies each bounced write out of this memory with {@code
 * process_vm_readv}, whose cost is mostly the kernel pinning the source page by page. From a huge
 * page that is one pin where 4 KiB pages take 512 (plain C, {@code dma-bench/scripts/twocopy.c}
 * mode 4: a ring of 1 MiB buffers went from 0.4 of the rate of C's one-copy path to 1.1 to 1.3
 * times it when the ring was in huge pages; docs/performance.md, "Bounce buffers in huge pages").
 *
 * <p>Sizes: a buffer's capacity is the power of two at or above its length, from {@value
 * #MIN_BYTES} bytes up to half a chunk, carved side by side from chunks of that class (so a
 * window's buffers share a few huge pages and do not all start at the same offset of one, which
 * would make them compete for the same cache sets); longer buffers get chunks of their own, a whole
 * number of them. Chunks of a class are kept once made and reused through the class's free list;
 * they are unmapped at {@link #close}, except a chunk holding a buffer given up with {@link #keep},
 * which stays mapped for the life of the process because a peer may still read it.
 *
 * <p>Memory: at most twice a buffer's length, plus up to one partly used chunk per size class;
 * where transparent huge pages are on, the kernel backs each touched chunk with a whole 2 MiB page.
 *
 * <p>Threads: the owning endpoint's (the fabric worker), as {@link ShmBounce}.
 */
final class HugeBufferPool {
  /** The chunk: one transparent huge page on x86_64 and AArch64 with 4 KiB base pages. */
  static final long CHUNK_BYTES = Native.HUGE_PAGE_BYTES;

  /**
   * The smallest capacity: twice {@link ShmBounce#DIRECT_WRITE_BYTES}, the shortest bounced write.
   */
  static final long MIN_BYTES = 8192;

  private static final int CLASSES = Long.numberOfTrailingZeros(CHUNK_BYTES / 2 / MIN_BYTES) + 1;

  // Per size class: the free buffers, as a stack.
  private final long[][] free = new long[CLASSES][];
  private final int[] freeCount = new int[CLASSES];
  // Every mapping made: its address, its length, and whether a kept buffer pins it.
  private long[] chunkAddress = new long[8];
  private long[] chunkBytes = new long[8];
  private boolean[] chunkKept = new boolean[8];
  private int chunks;

  HugeBufferPool() {
    Arrays.setAll(free, c -> new long[0]);
  }

  /**
   * The capacity of the buffer {@link #take} hands out for {@code lengthBytes}.
   *
   * @param lengthBytes at least 1
   * @return a power of two from {@value #MIN_BYTES} to half a chunk, or a whole number of chunks
   */
  static long capacityFor(long lengthBytes) {
    if (lengthBytes > CHUNK_BYTES / 2) {
      return (lengthBytes + CHUNK_BYTES - 1) & -CHUNK_BYTES;
    }
    return Math.max(MIN_BYTES, Long.highestOneBit(lengthBytes - 1) << 1);
  }

  /**
   * A buffer of {@link #capacityFor capacityFor(lengthBytes)} bytes, until it is given back or
   * kept.
   *
   * @throws OutOfMemoryError when the memory cannot be mapped
   */
  long take(long lengthBytes) {
    long capacity = capacityFor(lengthBytes);
    if (capacity >= CHUNK_BYTES) {
      return map(capacity);
    }
    int sizeClass = sizeClass(capacity);
    if (freeCount[sizeClass] == 0) {
      long chunk = map(CHUNK_BYTES);
      int count = (int) (CHUNK_BYTES / capacity);
      long[] stack = free[sizeClass];
      if (stack.length < count) {
        stack = free[sizeClass] = Arrays.copyOf(stack, Math.max(count, stack.length * 2));
      }
      // Highest first, so the chunk is handed out from its start.
      for (int i = count - 1; i >= 0; i--) {
        stack[freeCount[sizeClass]++] = chunk + i * capacity;
      }
    }
    return free[sizeClass][--freeCount[sizeClass]];
  }

  /** Takes back a buffer from {@link #take} that no peer can read any more. */
  void give(long address, long capacity) {
    if (capacity >= CHUNK_BYTES) {
      int chunk = chunkOf(address);
      Native.unmap(address, capacity);
      forget(chunk);
      return;
    }
    int sizeClass = sizeClass(capacity);
    long[] stack = free[sizeClass];
    if (freeCount[sizeClass] == stack.length) {
      stack = free[sizeClass] = Arrays.copyOf(stack, Math.max(8, stack.length * 2));
    }
    stack[freeCount[sizeClass]++] = address;
  }

  /**
   * Gives up a buffer from {@link #take} that a peer may still read at any later time: it is never
   * handed out again, and its chunk is never unmapped.
   */
  void keep(long address) {
    chunkKept[chunkOf(address)] = true;
  }

  /** Unmaps every chunk that holds no kept buffer; the pool must not be used afterwards. */
  void close() {
    for (int i = 0; i < chunks; i++) {
      if (!chunkKept[i]) {
        Native.unmap(chunkAddress[i], chunkBytes[i]);
      }
    }
    chunks = 0;
    Arrays.fill(freeCount, 0);
  }

  /** Bytes mapped and not unmapped by this pool, kept chunks included. */
  long mappedBytes() {
    long total = 0;
    for (int i = 0; i < chunks; i++) {
      total += chunkBytes[i];
    }
    return total;
  }

  private static int sizeClass(long capacity) {
    return Long.numberOfTrailingZeros(capacity / MIN_BYTES);
  }

  private long map(long bytes) {
    long address = Native.mapHuge(bytes);
    if (chunks == chunkAddress.length) {
      chunkAddress = Arrays.copyOf(chunkAddress, chunks * 2);
      chunkBytes = Arrays.copyOf(chunkBytes, chunks * 2);
      chunkKept = Arrays.copyOf(chunkKept, chunks * 2);
    }
    chunkAddress[chunks] = address;
    chunkBytes[chunks] = bytes;
    chunkKept[chunks] = false;
    chunks++;
    return address;
  }

  // The mapping that holds the address. Cold: a buffer is looked up only when it is kept or a
  // chunk of its own is given back.
  private int chunkOf(long address) {
    for (int i = 0; i < chunks; i++) {
      if (address >= chunkAddress[i] && address < chunkAddress[i] + chunkBytes[i]) {
        return i;
      }
    }
    throw new IllegalArgumentException("not a buffer of this pool: 0x" + Long.toHexString(address));
  }

  private void forget(int chunk) {
    chunks--;
    chunkAddress[chunk] = chunkAddress[chunks];
    chunkBytes[chunk] = chunkBytes[chunks];
    chunkKept[chunk] = chunkKept[chunks];
  }
}
