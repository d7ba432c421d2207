package dev.dma.fake;

/**
 * How the accepted ops of one initiator {@link FakeEndpoint} whose completion is not queued yet
 * reach the completion queue: an op held by the script is released by a test ({@link
 * FakeScript#releaseCompletions} and its kin), an op awaiting its target's progress completes when
 * the target progresses or closes, and removing a peer with {@link FakeScript#flushOnRemove} fails
 * every unreaped op against it, as EFA does when the peer is destroyed. Where a slot's completion
 * is ({@link OpSlots#hold}) and what it says live in {@link OpSlots}; the held list in {@link
 * CompletionQueue}.
 *
 * <p>Threads: one per endpoint, called with the fabric's lock held: by the endpoint's owner
 * removing a peer, by {@link FakeScript} on a test thread releasing held completions, or by a
 * target's {@link TargetProgress} when that target's owner progresses (or closes) it.
 */
final class ParkedOps {
  private final FakeEndpoint owner;
  private final Counts counts;
  private final OpSlots slots;
  private final CompletionQueue completions;
  private final Rma rma;

  ParkedOps(
      FakeEndpoint owner, Counts counts, OpSlots slots, CompletionQueue completions, Rma rma) {
    this.owner = owner;
    this.counts = counts;
    this.slots = slots;
    this.completions = completions;
    this.rma = rma;
  }

  /** Fails every unreaped op against {@code handle} as EFA does when the peer is destroyed. */
  void flush(long handle) {
    for (int slot = 0; slot < slots.count; slot++) {
      if (slots.state[slot] != OpSlots.POSTED || slots.peer[slot] != handle) {
        continue;
      }
      boolean queued = slots.hold[slot] == OpSlots.NOT_HELD;
      if (slots.hold[slot] == OpSlots.HELD) {
        completions.removeHeld(slot);
      }
      slots.hold[slot] = OpSlots.NOT_HELD;
      // An op that already failed keeps its own error; a success not yet reaped is flushed too,
      // because the worker cannot tell it from one still on the wire.
      if (!slots.done[slot] || slots.errno[slot] == 0) {
        slots.fail(slot, FiErrno.ECANCELED, 1, "Flushed during queue pair destroy");
        counts.increment(Counts.FLUSHED_OPS);
      }
      if (!queued) {
        completions.pushReady(slot);
      }
    }
  }

  /**
   * Completes the op in {@code slot} whose target progressed or closed, if it still waits.
   *
   * @param index the op's number when it started waiting: the slot may hold another op since
   */
  void targetProgressed(int slot, long index) {
    // The op may have been flushed, or its endpoint closed, since it started waiting.
    if (!owner.isClosedUnlocked()
        && slots.state[slot] == OpSlots.POSTED
        && slots.index[slot] == index
        && slots.hold[slot] == OpSlots.AWAITING_TARGET) {
      slots.hold[slot] = OpSlots.NOT_HELD;
      rma.complete(slot);
    }
  }

  /** Releases the held completions, in acceptance order or reversed; returns how many. */
  int releaseHeld(boolean reversed) {
    int count = completions.heldCount();
    for (int i = 0; i < count; i++) {
      int slot = completions.held(reversed ? count - 1 - i : i);
      slots.hold[slot] = OpSlots.NOT_HELD;
      rma.complete(slot);
    }
    completions.clearHeld();
    return count;
  }

  /** Whether {@code slot} holds a posted op whose completion the script holds. */
  boolean holds(int slot) {
    return !owner.isClosedUnlocked()
        && slot >= 0
        && slot < slots.count
        && slots.hold[slot] == OpSlots.HELD
        && slots.state[slot] == OpSlots.POSTED;
  }

  /** Releases the held completion of {@code slot}; returns 1, or 0 when it holds none. */
  int releaseHeldSlot(int slot) {
    if (!holds(slot)) {
      return 0;
    }
    completions.removeHeld(slot);
    slots.hold[slot] = OpSlots.NOT_HELD;
    rma.complete(slot);
    return 1;
  }
}
