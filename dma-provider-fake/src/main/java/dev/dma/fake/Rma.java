package dev.dma.fake;

import java.lang.foreign.MemorySegment;

/**
 * The RMA of one initiator {@link FakeEndpoint}: performs an accepted op against its target and
 * queues its completion. At the target it checks, in this order, that the target is open ({@code
 * FI_ECANCELED}, provider errno 107, as tcp;ofi_rxm), that the op's local registration is still
 * open ({@code FI_EINVAL}, provider errno 5, as EFA's bad lkey), that the target inserted the
 * initiator when {@linkplain FakeScript#rejectUninsertedInitiator scripted} ({@code FI_ENOTCONN},
 * provider errno 14), that the key names a live region the target exposed and that the region
 * allows the range and the access ({@code FI_EACCES}, provider errno -13, as sockets), and that the
 * region's memory is alive ({@code FI_EIO}, and a violation). Then the bytes move: by raw address,
 * or through the watched operand ({@link FakeFabric#watchOperand}) that holds the local bytes. A
 * failed check records the op's error completion in {@link OpSlots} and moves nothing.
 *
 * <p>Threads: one per endpoint, owned by it and called with the fabric's lock held, on whichever
 * thread completes the op: the owner posting, another endpoint's owner progressing the target, or a
 * test releasing held completions through {@link FakeScript}.
 */
final class Rma {
  private final byte[] initiator;
  private final FakeFabric fabric;
  private final FakeScript script;
  private final Counts counts;
  private final OpSlots slots;
  private final CompletionQueue completions;

  Rma(
      byte[] initiator,
      FakeFabric fabric,
      FakeScript script,
      Counts counts,
      OpSlots slots,
      CompletionQueue completions) {
    this.initiator = initiator;
    this.fabric = fabric;
    this.script = script;
    this.counts = counts;
    this.slots = slots;
    this.completions = completions;
  }

  /** Moves the op's bytes unless it already failed, and queues its completion. */
  void complete(int slot) {
    if (!slots.done[slot]) {
      move(slot);
    }
    completions.pushReady(slot);
  }

  /** Performs the op against its target, recording success or the error completion. */
  private void move(int slot) {
    FakeEndpoint target = slots.target[slot];
    long key = slots.key[slot];
    if (target.isClosedUnlocked()) {
      slots.fail(slot, FiErrno.ECANCELED, FiErrno.ENOTCONN, FiErrno.text(FiErrno.ENOTCONN));
      return;
    }
    long registrationId = slots.registration[slot];
    if (registrationId != 0 && fabric.registration(registrationId) == null) {
      // Deregistered while the op was held (already a violation): EFA fails it with a bad lkey,
      // and the fake must not read or write memory its owner may have freed since.
      slots.fail(slot, FiErrno.EINVAL, 5, "Invalid lkey: the local registration was closed");
      return;
    }
    if (script.rejectUninsertedInitiator && !target.hasPeerUnlocked(initiator)) {
      slots.fail(
          slot,
          FiErrno.ENOTCONN,
          14,
          "Unknown peer: the target has not inserted the initiator's address into its address"
              + " vector (REMOTE_ERROR_UNKNOWN_PEER)");
      return;
    }
    Region region = fabric.region(key);
    if (region == null || region.owner != target) {
      slots.fail(
          slot,
          FiErrno.EACCES,
          -FiErrno.EACCES,
          "remote key " + key + " is not registered at the target");
      return;
    }
    boolean write = slots.write[slot];
    long remote = slots.remote[slot];
    long length = slots.lengthBytes[slot];
    String refusal = region.refusal(write, remote, length);
    if (refusal != null) {
      slots.fail(slot, FiErrno.EACCES, -FiErrno.EACCES, refusal);
      return;
    }
    if (!region.scope.isAlive()) {
      counts.violation(
          "the memory of the region of remote key "
              + key
              + " was freed while it was still exposed (close the region first)");
      slots.fail(slot, FiErrno.EIO, -FiErrno.EIO, "the target memory was freed while exposed");
      return;
    }
    if (length > 0) {
      long remoteBytes = region.base + region.offset(remote);
      MemorySegment operand = slots.operand[slot];
      if (operand != null) {
        if (!copyWatched(slot, operand, remoteBytes)) {
          return;
        }
      } else if (write) {
        Memory.copy(slots.local[slot], remoteBytes, length);
      } else {
        Memory.copy(remoteBytes, slots.local[slot], length);
      }
    }
    counts.add(write ? Counts.BYTES_WRITTEN : Counts.BYTES_READ, length);
    slots.done[slot] = true;
  }

  /**
   * Moves a watched operand's bytes through its segment, so the JDK's liveness check, not a raw
   * address, stands between the fake and memory freed on delivery: a copy after the arena closed
   * throws here (and a close racing the copy cannot free the memory under it). Such a copy is
   * recorded and fails the op.
   *
   * @return whether the bytes moved
   */
  private boolean copyWatched(int slot, MemorySegment operand, long remoteBytes) {
    boolean write = slots.write[slot];
    long length = slots.lengthBytes[slot];
    long offset = slots.local[slot] - operand.address();
    try {
      if (write) {
        MemorySegment.copy(operand, offset, Memory.ALL, remoteBytes, length);
      } else {
        MemorySegment.copy(Memory.ALL, remoteBytes, operand, offset, length);
      }
      return true;
    } catch (IllegalStateException released) {
      fabric.operandViolation(
          counts,
          slots.describe(slot)
              + (write ? " read its source" : " wrote its landing buffer")
              + " after the operand was released (its transfer's completion was delivered): "
              + released.getMessage());
      slots.fail(slot, FiErrno.EIO, -FiErrno.EIO, "the local operand was released");
      // Recorded once: reap, reset or close need not report the same op again.
      slots.operand[slot] = null;
      return false;
    }
  }

  /**
   * Raw memory access. A holder class, so the restricted call runs (and warns without native
   * access) only when bytes first move, not when the provider is merely loaded.
   */
  private static final class Memory {
    @SuppressWarnings("restricted")
    private static final MemorySegment ALL = MemorySegment.NULL.reinterpret(Long.MAX_VALUE);

    static void copy(long from, long to, long lengthBytes) {
      MemorySegment.copy(ALL, from, ALL, to, lengthBytes);
    }
  }
}
