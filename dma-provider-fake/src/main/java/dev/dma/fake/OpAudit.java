package dev.dma.fake;

import java.lang.foreign.MemorySegment;

/**
 * The checks one {@link FakeEndpoint} makes that nobody but the provider touched what the provider
 * owns while an op is posted: a watched operand ({@link FakeFabric#watchOperand}) released before
 * its op was reaped, reset or closed, and an op's {@code fi_context2} memory written while posted
 * ({@link FakeScript#scribbleContexts}). Each finding is only counted (and an operand's recorded in
 * {@link FakeFabric#operandViolations()}), never thrown: it is found while an op ends, and throwing
 * there would strand the op.
 *
 * <p>Threads: one per endpoint, called only by it with the fabric's lock held: by its owner
 * reaping, resetting or closing, or by whichever thread closes the endpoint.
 */
final class OpAudit {
  private final FakeFabric fabric;
  private final Counts counts;
  private final OpSlots slots;

  OpAudit(FakeFabric fabric, Counts counts, OpSlots slots) {
    this.fabric = fabric;
    this.counts = counts;
    this.slots = slots;
  }

  /**
   * Records a posted op whose watched operand was already released while the provider still owned
   * the op: its completion reached the caller before the provider had let go of the memory.
   *
   * @param when where it was found: {@code reap}, {@code reset} or {@code close}
   */
  void checkStillOwned(int slot, String when) {
    MemorySegment operand = slots.operand[slot];
    if (operand != null && !operand.scope().isAlive()) {
      fabric.operandViolation(
          counts,
          slots.describe(slot)
              + "'s operand was released (its transfer's completion was delivered) while the"
              + " provider still owned the op, found at "
              + when);
    }
  }

  /** {@link #checkStillOwned} for every posted op, as a reset or close drops them. */
  void checkPostedStillOwned(String when) {
    for (int slot = 0; slot < slots.count; slot++) {
      if (slots.state[slot] == OpSlots.POSTED) {
        checkStillOwned(slot, when);
      }
    }
  }

  /** Checks, as the op completes, that nobody but the provider wrote into its context. */
  void checkContext(int slot, OpContexts contexts) {
    if (!contexts.intact(slot, slots.write[slot], slots.peer[slot], slots.index[slot])) {
      counts.violation(
          "the context of slot "
              + slot
              + " (op #"
              + slots.index[slot]
              + ") was written while the provider owned it (FI_CONTEXT2)");
    }
  }
}
