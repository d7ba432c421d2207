package dev.dma.libfabric;

import static java.lang.foreign.ValueLayout.JAVA_LONG;

import dev.dma.libfabric.internal.Abi;
import dev.dma.libfabric.internal.Native;
import java.lang.foreign.Arena;

/**
 * The native calls of one {@link LibfabricEndpoint}'s data path and the op-slot slab they name:
 * {@code fi_writemsg}, {@code fi_read}, {@code fi_fetch_atomicmsg} (shm's write check) and {@code
 * fi_cq_read}, each through the function pointer {@link FabricObjects} read from the ops tables.
 * Both {@link EndpointQuirks} implementations post through it, and the {@link CompletionDecoder}
 * maps a completion's {@code op_context} back to its slot with {@link #slotOf}.
 *
 * <p>Each operation's {@code op_context} is its 64-byte {@code fi_context2} in one native slab: the
 * slots' own, then (shm 2.5+) one per slot for its write's check. The slab lives in the endpoint's
 * arena, freed only after {@code fi_close(ep)}, so it outlives every operation.
 *
 * <p>Only the endpoint's owner thread calls it. Nothing here allocates, locks or captures: the
 * scratch for {@code fi_writemsg}'s message is preallocated and its pointers never change.
 */
final class DataPath {
  /** Write flags: a completion only once the data is at the target. */
  private static final long WRITE_FLAGS = Abi.FI_COMPLETION | Abi.FI_DELIVERY_COMPLETE;

  /** The scratch layout for one {@code fi_writemsg}: msg, iovec, rma_iov, desc. */
  private static final long SCRATCH_MSG = 0;

  private static final long SCRATCH_IOV = Abi.MSG_RMA_SIZE;
  private static final long SCRATCH_RMA_IOV = SCRATCH_IOV + Abi.IOVEC_SIZE;
  private static final long SCRATCH_DESC = SCRATCH_RMA_IOV + Abi.RMA_IOV_SIZE;
  private static final long SCRATCH_BYTES = SCRATCH_DESC + 8;

  private final FabricObjects objects;
  private final long scratch;

  /** The first context of the slab, 0 until {@link #openSlab}. */
  long slabBase;

  /** Op slots: indexes {@code [0, slots)}; 0 until {@link #openSlab}, and again after close. */
  int slots;

  /** Contexts in the slab: {@link #slots}, or twice as many with shm's write check. */
  int contexts;

  DataPath(FabricObjects objects, Arena arena) {
    this.objects = objects;
    this.scratch = arena.allocate(SCRATCH_BYTES, 64).address();
    // The scratch's pointers never change; only lengths, addresses, keys and the context do.
    Native.MEMORY.set(
        JAVA_LONG, scratch + SCRATCH_MSG + Abi.MSG_RMA_MSG_IOV, scratch + SCRATCH_IOV);
    Native.MEMORY.set(JAVA_LONG, scratch + SCRATCH_MSG + Abi.MSG_RMA_DESC, scratch + SCRATCH_DESC);
    Native.MEMORY.set(JAVA_LONG, scratch + SCRATCH_MSG + Abi.MSG_RMA_IOV_COUNT, 1L);
    Native.MEMORY.set(
        JAVA_LONG, scratch + SCRATCH_MSG + Abi.MSG_RMA_RMA_IOV, scratch + SCRATCH_RMA_IOV);
    Native.MEMORY.set(JAVA_LONG, scratch + SCRATCH_MSG + Abi.MSG_RMA_RMA_IOV_COUNT, 1L);
    Native.MEMORY.set(JAVA_LONG, scratch + SCRATCH_MSG + Abi.MSG_RMA_DATA, 0L);
  }

  /**
   * Allocates the slab: {@code count} slots with {@code contextsPerSlot} contexts each (2 for shm's
   * write check, whose operation is in flight beside the slot's write).
   */
  void openSlab(int count, int contextsPerSlot, Arena arena) {
    contexts = contextsPerSlot * count;
    slabBase = arena.allocate(contexts * Abi.CONTEXT2_SIZE, 64).address();
    slots = count;
  }

  /** The {@code op_context} of context {@code index} (a slot's, or {@code slots + slot}). */
  long context(int index) {
    return slabBase + (long) index * Abi.CONTEXT2_SIZE;
  }

  /** The context an op_context names, or -1 when it names none (NULL, or not from the slab). */
  int slotOf(long context) {
    long offset = context - slabBase;
    if (context == 0 || offset < 0 || (offset & (Abi.CONTEXT2_SIZE - 1)) != 0) {
      return -1;
    }
    long slot = offset / Abi.CONTEXT2_SIZE;
    return slot < contexts ? (int) slot : -1;
  }

  /** {@code fi_writemsg(FI_COMPLETION | FI_DELIVERY_COMPLETE)} on the slot's context. */
  int writemsg(
      int slot,
      long peer,
      long localAddress,
      long lengthBytes,
      long descriptor,
      long remoteAddress,
      long remoteKey) {
    long s = scratch;
    Native.MEMORY.set(JAVA_LONG, s + SCRATCH_IOV + Abi.IOVEC_BASE, localAddress);
    Native.MEMORY.set(JAVA_LONG, s + SCRATCH_IOV + Abi.IOVEC_LEN, lengthBytes);
    Native.MEMORY.set(JAVA_LONG, s + SCRATCH_DESC, descriptor);
    Native.MEMORY.set(JAVA_LONG, s + SCRATCH_RMA_IOV + Abi.RMA_IOV_ADDR, remoteAddress);
    Native.MEMORY.set(JAVA_LONG, s + SCRATCH_RMA_IOV + Abi.RMA_IOV_LEN, lengthBytes);
    Native.MEMORY.set(JAVA_LONG, s + SCRATCH_RMA_IOV + Abi.RMA_IOV_KEY, remoteKey);
    Native.MEMORY.set(JAVA_LONG, s + SCRATCH_MSG + Abi.MSG_RMA_ADDR, peer);
    Native.MEMORY.set(
        JAVA_LONG, s + SCRATCH_MSG + Abi.MSG_RMA_CONTEXT, slabBase + slot * Abi.CONTEXT2_SIZE);
    try {
      return (int)
          (long)
              Native.L_LLL_CRITICAL.invokeExact(
                  objects.fnWritemsg, objects.ep, s + SCRATCH_MSG, WRITE_FLAGS);
    } catch (Throwable impossible) {
      throw new AssertionError(impossible);
    }
  }

  /** {@code fi_read} on the slot's context. */
  int read(
      int slot,
      long peer,
      long localAddress,
      long lengthBytes,
      long descriptor,
      long remoteAddress,
      long remoteKey) {
    try {
      return (int)
          (long)
              Native.L_LLLLLLLL_CRITICAL.invokeExact(
                  objects.fnRead,
                  objects.ep,
                  localAddress,
                  lengthBytes,
                  descriptor,
                  peer,
                  remoteAddress,
                  remoteKey,
                  slabBase + slot * Abi.CONTEXT2_SIZE);
    } catch (Throwable impossible) {
      throw new AssertionError(impossible);
    }
  }

  /** {@code fi_fetch_atomicmsg(FI_COMPLETION)} of a prepared message (shm's write check). */
  int fetchAtomic(long message, long resultIoc, long resultDesc) {
    try {
      return (int)
          (long)
              Native.L_LLLLLL_CRITICAL.invokeExact(
                  objects.fnFetchAtomicmsg,
                  objects.ep,
                  message,
                  resultIoc,
                  resultDesc,
                  1L,
                  Abi.FI_COMPLETION);
    } catch (Throwable impossible) {
      throw new AssertionError(impossible);
    }
  }

  /** {@code fi_cq_read} of up to {@code count} entries into {@code entries}. */
  long cqRead(long entries, int count) {
    try {
      return (long)
          Native.L_LLL_CRITICAL.invokeExact(objects.fnCqRead, objects.cq, entries, (long) count);
    } catch (Throwable impossible) {
      throw new AssertionError(impossible);
    }
  }
}
