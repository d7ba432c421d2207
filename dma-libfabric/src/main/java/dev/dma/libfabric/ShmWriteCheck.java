package dev.dma.libfabric;

import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import dev.dma.libfabric.internal.Abi;
import dev.dma.libfabric.internal.Native;
import java.lang.foreign.Arena;
import org.jspecify.annotations.Nullable;

/**
 * The check that stands between shm's success completion of a write and the caller, on libfabric
 * 2.5 and later ({@link Quirks#shmReportsRefusedRmaAsDone}): there shm reports a write whose remote
 * key, range or access the target refused as done, and nothing lands.
 *
 * <p>What: one fetching atomic per write, posted right behind the write (both in flight at once,
 * the check on the slot's second context), to the same peer with the same key over the write's
 * first and last {@code n = min(8, length)} bytes, with an operand that leaves them as they are
 * ({@code FI_BOR} with zeros, or {@code FI_BAND} with ones when the source's sampled bytes are all
 * zero). The write reaches the caller only once both completions are in: done when the write
 * succeeded and the check's result differs from the operand, {@code FI_EACCES} when the result is
 * the operand, the write's own error when it failed (that wins), the check's error otherwise.
 *
 * <p>Why a done is sound: the target verifies the atomic's key and both ranges as it verified the
 * write's (same key, the write's two ends inside the one contiguous region the key names, write
 * access, plus read access), so it accepts the check only when it accepts the write, whichever it
 * handles first; and an accepted write of these protocols has landed when its success completion is
 * written (a failed copy sets {@code SMR_OP_ERROR}, an error completion). Refused, shm 2.5+ hands
 * back the operand it sent in its own inject buffer ({@code smr_progress_return_entry}); the result
 * starts as the operand, so a check that wrote nothing is a refusal too. No nonce, no probability.
 *
 * <p>Why a refusal is sound, that is why the accepted check reads the write's bytes and not the
 * bytes before it (which could equal the operand), from 2.6's {@code prov/shm/src}: the target
 * takes a peer's commands from its one command queue in queue order, one at a time ({@code
 * smr_progress_cmd}), and this endpoint's posts enter that queue in post order. A write of at most
 * 4 KiB is an inject command ({@code smr_select_proto} with {@code FI_DELIVERY_COMPLETE}) whose
 * bytes the target copies inside {@code smr_progress_inject}; a larger one, with cross-memory
 * attach, an iov command the target copies inside {@code smr_progress_iov} ({@code
 * process_vm_readv}); both before it takes the next command, the check. Without CMA a larger write
 * goes through shm's bounce buffers in several rounds (SAR), but then the peer's {@code sar_status}
 * makes the check's post answer {@code -FI_EAGAIN} ({@code smr_generic_atomic}) until the last
 * round was copied out. A check that meets {@code -FI_EAGAIN} is owed: posted at the next reap,
 * progress or write, and until then a write to that peer answers {@code -FI_EAGAIN} without being
 * posted, so none of this endpoint's later writes gets between a write and its check. The verdict
 * is wrong only when another process overwrote exactly the sampled bytes with the operand's value
 * between the write and the check (a refusal is then reported for a write that landed), or when the
 * target re-registered the region in between. {@code ShmRefusalTest} posts bursts into zeroed
 * memory (a check handled before its write fails that test) with a refused write among them.
 *
 * <p>Not done: one check per batch of writes (same peer and key, the batch's lowest and highest
 * byte), posted at the next reap. Measured slower than a check per write (64 KiB, one process, two
 * busy loops, five alternating rounds: 646-1,043 against 851-1,834 MB/s, slower in four): the
 * batch's writes all wait for its one check, so completions come in bursts and the window empties
 * between them.
 *
 * <p>Why not a read: shm checks no key for a read (with CMA the initiator copies the target's bytes
 * itself, ShmRefusalTest), and without CMA a read the target refuses is reported done with stale
 * bytes of an earlier transfer in its landing buffer (2.6, through shm's bounce buffers), which can
 * be anything, the write's own bytes included. The atomic goes through the target, which checks its
 * key, and its refused result is the operand this process wrote, never stale.
 *
 * <p>What it costs the target: its bytes there are read and written back unchanged ({@code x | 0},
 * {@code x & ~0}) by the target's progress thread, not atomically with respect to other writers;
 * only a write racing on those same bytes, which RMA never orders anyway, can see its bytes there
 * replaced by the earlier value. It also needs read access: on shm 2.5+ a region dma exposes for
 * writes is registered readable too ({@code Registrations.expose}); a target of another kind that
 * registers a region write-only gets every write to it reported refused.
 *
 * <p>Cost, on shm 2.5+ only (other versions and providers never create it): one more command per
 * write, which the target handles in the same pass as the write, and one more completion; no second
 * round trip. Measured with {@code dma-bench run -p libfabric:shm -s 64k -o write -t 2s
 * --no-progress} (one process, two busy loops beside it, builds and versions alternated in one
 * session on a shared 2-core host): against the check posted after the write's completion, 2.1 to
 * 2.6 times the rate in the quieter rounds (1,187-1,780 against 563-688 MB/s); against a build
 * without any check, 0.57 to 1.06 of its rate over seven rounds (median 0.87); in the same rounds
 * 1.17 gave 0.14 to 1.78 of 2.1's rate, and 2.6 with the check lay between them (median 1.35 of
 * 1.17's, 0.62 of 2.1's). 64 B at window 1 across processes ({@code --processes 2}): the check
 * after the completion had cost 0.52 of the unchecked rate; right behind the write, 1.13 and 1.41
 * times that build's rate in two alternating rounds (p50 124-125 against 172-178 us, on a host
 * loaded by another build).
 *
 * <p>Threads: the endpoint's owner (the fabric worker) only, as the endpoint itself. Native memory
 * comes from the endpoint's arena, freed after {@code fi_close(ep)}.
 */
final class ShmWriteCheck {
  // A slot's state: these bits, all clear when it holds no checked write (or its outcome was
  // delivered). Its outcome is delivered once none of the three is set.

  /** The write's completion is still to come. */
  static final byte WRITE_OPEN = 1;

  /** The check is posted (on the slot's check context); its completion is still to come. */
  static final byte CHECK_OPEN = 2;

  /** The check is still to be posted: it met -FI_EAGAIN and waits in the deferred queue. */
  static final byte CHECK_OWED = 4;

  /** Bytes sampled at each end of the write. */
  static final int SAMPLE = 8;

  // Per slot.
  final byte[] state;
  final long[] peer;
  final long[] remoteAddress;
  final long[] remoteKey;
  final long[] lengthBytes;
  // Whether the source's sampled bytes were all zero, so the operand is ones (FI_BAND).
  final boolean[] ones;
  // The failure to deliver once nothing is open (null: none, the write is delivered done), and
  // whether it was the write's own error entry (its bounce buffer is then given up).
  final @Nullable String[] failMessage;
  final int[] failErrno;
  final int[] failProviderErrno;
  final boolean[] writeErrored;

  // Slots whose check met -FI_EAGAIN, in order; each at most once (state CHECK_OWED).
  private final int[] pending;
  private int pendingHead;
  private int pendingCount;

  // Native: the two operands (zeros, ones), then one 2 * SAMPLE result per slot, then the message.
  private final long zeros;
  private final long onesOperand;
  private final long results;
  final long message;
  final long operandIoc;
  final long rmaIoc;
  final long resultIoc;
  final long operandDesc;
  final long resultDesc;
  final long nativeBase;
  final long nativeBytes;

  ShmWriteCheck(int slots, Arena arena) {
    state = new byte[slots];
    peer = new long[slots];
    remoteAddress = new long[slots];
    remoteKey = new long[slots];
    lengthBytes = new long[slots];
    ones = new boolean[slots];
    failMessage = new String[slots];
    failErrno = new int[slots];
    failProviderErrno = new int[slots];
    writeErrored = new boolean[slots];
    pending = new int[slots];
    long operands = 4L * SAMPLE;
    long resultBytes = (long) slots * 2 * SAMPLE;
    long messageBytes = Abi.MSG_ATOMIC_SIZE + 2 * Abi.IOC_SIZE + 2 * Abi.RMA_IOC_SIZE + 2 * 8;
    nativeBytes = operands + resultBytes + messageBytes;
    nativeBase = arena.allocate(nativeBytes, 64).address();
    zeros = nativeBase;
    onesOperand = nativeBase + 2 * SAMPLE;
    Native.MEMORY.asSlice(zeros, 2 * SAMPLE).fill((byte) 0);
    Native.MEMORY.asSlice(onesOperand, 2 * SAMPLE).fill((byte) 0xff);
    results = nativeBase + operands;
    message = results + resultBytes;
    operandIoc = message + Abi.MSG_ATOMIC_SIZE;
    resultIoc = operandIoc + Abi.IOC_SIZE;
    rmaIoc = resultIoc + Abi.IOC_SIZE;
    operandDesc = rmaIoc + 2 * Abi.RMA_IOC_SIZE;
    resultDesc = operandDesc + 8;
    // What never changes: the pointers between the parts, the counts, the datatype, the data.
    Native.MEMORY.set(JAVA_LONG, message + Abi.MSG_ATOMIC_MSG_IOV, operandIoc);
    Native.MEMORY.set(JAVA_LONG, message + Abi.MSG_ATOMIC_DESC, operandDesc);
    Native.MEMORY.set(JAVA_LONG, message + Abi.MSG_ATOMIC_IOV_COUNT, 1L);
    Native.MEMORY.set(JAVA_LONG, message + Abi.MSG_ATOMIC_RMA_IOV, rmaIoc);
    Native.MEMORY.set(JAVA_LONG, message + Abi.MSG_ATOMIC_RMA_IOV_COUNT, 2L);
    Native.MEMORY.set(JAVA_INT, message + Abi.MSG_ATOMIC_DATATYPE, Abi.FI_UINT8);
    Native.MEMORY.set(JAVA_LONG, message + Abi.MSG_ATOMIC_DATA, 0L);
  }

  /** The local descriptor for the operands and results, where the domain needs one. */
  void descriptor(long descriptor) {
    Native.MEMORY.set(JAVA_LONG, operandDesc, descriptor);
    Native.MEMORY.set(JAVA_LONG, resultDesc, descriptor);
  }

  /**
   * After a write was posted: what its check will need. Samples the source now, while the caller
   * may not touch it.
   */
  void posted(int slot, long peer, long source, long length, long address, long key) {
    state[slot] = WRITE_OPEN;
    failMessage[slot] = null;
    writeErrored[slot] = false;
    this.peer[slot] = peer;
    remoteAddress[slot] = address;
    remoteKey[slot] = key;
    lengthBytes[slot] = length;
    ones[slot] = allZero(source, length);
  }

  /** Fills the message for the slot's check; the context is the slot's. */
  void prepare(int slot, long context) {
    long length = lengthBytes[slot];
    long n = Math.min(SAMPLE, length);
    boolean band = ones[slot];
    Native.MEMORY.set(JAVA_LONG, operandIoc + Abi.IOC_ADDR, band ? onesOperand : zeros);
    Native.MEMORY.set(JAVA_LONG, operandIoc + Abi.IOC_COUNT, 2 * n);
    Native.MEMORY.set(JAVA_LONG, resultIoc + Abi.IOC_ADDR, result(slot));
    Native.MEMORY.set(JAVA_LONG, resultIoc + Abi.IOC_COUNT, 2 * n);
    long address = remoteAddress[slot];
    long key = remoteKey[slot];
    Native.MEMORY.set(JAVA_LONG, rmaIoc + Abi.RMA_IOC_ADDR, address);
    Native.MEMORY.set(JAVA_LONG, rmaIoc + Abi.RMA_IOC_COUNT, n);
    Native.MEMORY.set(JAVA_LONG, rmaIoc + Abi.RMA_IOC_KEY, key);
    long last = rmaIoc + Abi.RMA_IOC_SIZE;
    Native.MEMORY.set(JAVA_LONG, last + Abi.RMA_IOC_ADDR, address + length - n);
    Native.MEMORY.set(JAVA_LONG, last + Abi.RMA_IOC_COUNT, n);
    Native.MEMORY.set(JAVA_LONG, last + Abi.RMA_IOC_KEY, key);
    Native.MEMORY.set(JAVA_LONG, message + Abi.MSG_ATOMIC_ADDR, peer[slot]);
    Native.MEMORY.set(JAVA_INT, message + Abi.MSG_ATOMIC_OP, band ? Abi.FI_BAND : Abi.FI_BOR);
    Native.MEMORY.set(JAVA_LONG, message + Abi.MSG_ATOMIC_CONTEXT, context);
    // A refused check hands the operand back; start from it, so a check that wrote nothing at all
    // is taken for a refused one, never for an accepted one.
    byte operand = band ? (byte) 0xff : 0;
    long at = result(slot);
    for (long i = 0; i < 2 * n; i++) {
      Native.MEMORY.set(JAVA_BYTE, at + i, operand);
    }
  }

  /**
   * The verdict on a completed check: whether the target accepted it (its bytes came back), as
   * opposed to refused (the operand came back).
   */
  boolean accepted(int slot) {
    long n = Math.min(SAMPLE, lengthBytes[slot]);
    byte operand = ones[slot] ? (byte) 0xff : 0;
    long at = result(slot);
    for (long i = 0; i < 2 * n; i++) {
      if (Native.MEMORY.get(JAVA_BYTE, at + i) != operand) {
        return true;
      }
    }
    return false;
  }

  /** Records the slot's failure unless one is recorded already (the first cause wins). */
  void fail(int slot, int errno, int providerErrno, String text) {
    if (failMessage[slot] == null) {
      failMessage[slot] = text;
      failErrno[slot] = errno;
      failProviderErrno[slot] = providerErrno;
    }
  }

  /** Whether a check to {@code peer} is still owed (deferred): a later write to it must wait. */
  boolean owes(long peer) {
    for (int i = 0; i < pendingCount; i++) {
      int at = pendingHead + i;
      if (this.peer[pending[at >= pending.length ? at - pending.length : at]] == peer) {
        return true;
      }
    }
    return false;
  }

  /** Queues a slot whose check met -FI_EAGAIN. */
  void defer(int slot) {
    owedSoFar++;
    state[slot] |= CHECK_OWED;
    int tail = pendingHead + pendingCount;
    pending[tail >= pending.length ? tail - pending.length : tail] = slot;
    pendingCount++;
  }

  /** How many checks were ever owed (deferred), for tests: the path a segmented write takes. */
  long owedSoFar;

  /** The number of deferred checks. */
  int deferred() {
    return pendingCount;
  }

  /** Takes the oldest deferred check's slot. */
  int takeDeferred() {
    int slot = pending[pendingHead];
    pendingHead = pendingHead + 1 == pending.length ? 0 : pendingHead + 1;
    pendingCount--;
    return slot;
  }

  /** Puts a deferred check back in front, for the next pass. */
  void keepDeferred(int slot) {
    pendingHead = pendingHead == 0 ? pending.length - 1 : pendingHead - 1;
    pending[pendingHead] = slot;
    pendingCount++;
  }

  /** The endpoint was reset: nothing posted before survives, no check is owed. */
  void clear() {
    java.util.Arrays.fill(state, (byte) 0);
    java.util.Arrays.fill(failMessage, null);
    pendingHead = 0;
    pendingCount = 0;
  }

  private long result(int slot) {
    return results + (long) slot * 2 * SAMPLE;
  }

  /** Whether the first and last min(8, length) bytes at source are all zero. */
  private static boolean allZero(long source, long length) {
    if (length >= SAMPLE) {
      return Native.MEMORY.get(JAVA_LONG_UNALIGNED, source) == 0
          && Native.MEMORY.get(JAVA_LONG_UNALIGNED, source + length - SAMPLE) == 0;
    }
    for (long i = 0; i < length; i++) {
      if (Native.MEMORY.get(JAVA_BYTE, source + i) != 0) {
        return false;
      }
    }
    return true;
  }

  private static final java.lang.foreign.ValueLayout.OfLong JAVA_LONG_UNALIGNED =
      java.lang.foreign.ValueLayout.JAVA_LONG_UNALIGNED;
}
