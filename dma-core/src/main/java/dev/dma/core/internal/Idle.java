package dev.dma.core.internal;

/**
 * The fabric worker's idle strategy, decided once per pass from what the pass did: park on the
 * channel when nothing is outstanding, back off ({@link Backoff}: spin, then yield, then park for
 * growing intervals) while work is outstanding but nothing moved, and go on at once when something
 * moved.
 */
public enum Idle {
  /** Something moved: go straight into the next pass. */
  CONTINUE,
  /**
   * Work is outstanding (in flight, or queued behind {@code -FI_EAGAIN}) but nothing moved: one
   * idle pass of {@link Backoff}, which stays hot for the completion that usually follows within
   * microseconds and parks once a peer has gone silent, so that it does not cost a core.
   */
  BACK_OFF,
  /** Nothing queued or in flight: block on the channel and release the core. */
  PARK;

  /**
   * Decides how to idle after a pass.
   *
   * @param inFlight ops posted and not yet reaped
   * @param pending ops queued and not yet posted
   * @param posted ops posted this pass
   * @param reapedAny whether anything was reaped this pass
   * @return what to do
   */
  public static Idle decide(int inFlight, int pending, int posted, boolean reapedAny) {
    if (inFlight == 0 && pending == 0) {
      return PARK;
    }
    return posted == 0 && !reapedAny ? BACK_OFF : CONTINUE;
  }
}
