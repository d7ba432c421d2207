package dev.dma.libfabric;

import dev.dma.libfabric.internal.Native;
import java.lang.foreign.MemorySegment;
import java.util.Arrays;

/**
 * Bounce buffers between the caller's write sources and libfabric's shm provider, one per op slot,
 * so that no shm peer reads a source after its completion was delivered.
 *
 * <p>Why: with cross-memory attach (on by default wherever the kernel allows {@code
 * process_vm_readv}), a shm write above 4 KiB posted with {@code FI_DELIVERY_COMPLETE} is a command
 * in the <em>target's</em> queue that names this process's memory, and the target copies it out
 * whenever it gets to the command. Closing dma's endpoint does not cancel it (measured on 1.17 and
 * 2.1 with a target that was stopped and resumed: a failed 64 KiB write landed as whatever the
 * caller had put in the buffer after the failure; 2.6 chooses the same path, with or without
 * delivery-complete). Reads need no bounce: no landing buffer was written after its failure was
 * delivered, on any provider, in the same experiments and in every run of {@code
 * OperandSafetyTest}, which checks each one. Turning cross-memory attach off instead ({@code
 * FI_SHM_DISABLE_CMA}) moves the bytes through shm's shared bounce buffers, but then a peer
 * endpoint in the same process that closes with a transfer to it in progress is written after its
 * unmap: a SIGSEGV, measured on 1.17 and 2.1.
 *
 * <p>So the peer only ever reads memory owned here: a write is copied into the slot's buffer before
 * it is posted from there. A buffer whose write did not succeed (an error completion, or an
 * endpoint reset or close with the write still posted) is never used again and never unmapped: the
 * peer may still read it, at any later time. That costs memory in proportion to the bytes of failed
 * shm writes, for the life of the process; {@link #quarantinedBytes()} says how much (the 2 MiB
 * chunk such a buffer was carved from stays mapped with it).
 *
 * <p>Where the buffers live: a {@link HugeBufferPool}, in transparent huge pages, because the
 * target's {@code process_vm_readv} pins its source page by page, and out of huge pages a bounced
 * write is cheaper than C's one copy out of the caller's ordinary pages. The cost: one copy more
 * per shm write above {@link #DIRECT_WRITE_BYTES}, in the worker (writes up to that length skip it:
 * shm copies them into its own queue inside the post). Measured against the native C anchor on shm
 * (delivery-complete writes, window 64, target in its own process, six alternated rounds; the
 * commands are in docs/performance.md, "Bounce buffers in huge pages"): 1 MiB writes at 1.07 to
 * 1.55 of C, against 0.45 to 0.89 with the same buffers in 4 KiB pages; 64 KiB writes at 1.27 to
 * 1.40 of C in four rounds and 0.47 in two of the host's slow runs, against 0.78 to 1.00.
 *
 * <p>Threads: the endpoint's owner (the fabric worker) only, as the endpoint itself.
 */
final class ShmBounce {
  /**
   * Writes up to this length are posted from the operand itself: shm copies them inside the post
   * (inline or inject into the target's queue, or, with delivery-complete on 1.x and 2.1, its
   * segmented path, which this process drives and stops at close).
   */
  static final long DIRECT_WRITE_BYTES = 4096;

  private static final System.Logger LOG = System.getLogger(ShmBounce.class.getName());

  private final HugeBufferPool pool = new HugeBufferPool();
  private final long[] buffer;
  private final long[] capacity;
  // Whether the slot's operation, now posted, uses the slot's buffer.
  private final boolean[] inUse;
  private long quarantinedBytes;

  ShmBounce(int slots) {
    buffer = new long[slots];
    capacity = new long[slots];
    inUse = new boolean[slots];
  }

  /**
   * The address to post a write of {@code lengthBytes} from: the operand itself when shm copies it
   * inside the post, else the slot's buffer, holding a copy of it.
   */
  long source(int slot, long operand, long lengthBytes) {
    if (lengthBytes <= DIRECT_WRITE_BYTES) {
      return operand;
    }
    long copy = reserve(slot, lengthBytes);
    MemorySegment.copy(Native.MEMORY, operand, Native.MEMORY, copy, lengthBytes);
    return copy;
  }

  /** After a post: the slot's buffer is the provider's until the operation ends, if posted. */
  void posted(int slot, long postedFrom, boolean accepted) {
    inUse[slot] = accepted && postedFrom == buffer[slot] && postedFrom != 0;
  }

  /** A successful completion: the slot's buffer is free again. */
  void succeeded(int slot) {
    inUse[slot] = false;
  }

  /** An error completion: the peer may still act on the slot's buffer, which is given up. */
  void failed(int slot) {
    if (inUse[slot]) {
      giveUp(slot);
    }
  }

  /** The endpoint was reset or is closing: every buffer still posted is given up. */
  void discardPosted(String why) {
    int count = 0;
    for (int slot = 0; slot < buffer.length; slot++) {
      if (inUse[slot]) {
        giveUp(slot);
        count++;
      }
    }
    if (count > 0) {
      LOG.log(
          System.Logger.Level.WARNING,
          why
              + ": "
              + count
              + " shm bounce buffers were still posted and are kept for good, since a peer may"
              + " still use them ("
              + quarantinedBytes
              + " bytes kept so far)");
    }
  }

  /** Frees every buffer no operation holds; given-up ones stay. */
  void close() {
    discardPosted("closing the endpoint");
    Arrays.fill(buffer, 0);
    Arrays.fill(capacity, 0);
    pool.close();
  }

  /** Bytes of buffers given up to failed operations, kept for the life of the process. */
  long quarantinedBytes() {
    return quarantinedBytes;
  }

  private long reserve(int slot, long lengthBytes) {
    if (capacity[slot] < lengthBytes) {
      // The slot is free (the worker posts only into a free slot), so its old buffer is too.
      if (buffer[slot] != 0) {
        pool.give(buffer[slot], capacity[slot]);
      }
      buffer[slot] = 0;
      capacity[slot] = 0;
      buffer[slot] = pool.take(lengthBytes);
      capacity[slot] = HugeBufferPool.capacityFor(lengthBytes);
    }
    return buffer[slot];
  }

  private void giveUp(int slot) {
    inUse[slot] = false;
    pool.keep(buffer[slot]);
    quarantinedBytes += capacity[slot];
    buffer[slot] = 0;
    capacity[slot] = 0;
  }
}
