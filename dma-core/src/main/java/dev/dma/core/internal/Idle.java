package dev.dma.core.internal;

/**
 * The fabric worker's idle strategy, decided once per pass from what the pass did: park when
 * nothing is outstanding, spin while operations are in flight, yield when everything pending is
 * stalled on {@code -FI_EAGAIN}.
 */
public enum Idle {
  /** Something moved: go straight into the next pass. */
  CONTINUE,
  /** Work is in flight but nothing moved: stay hot for the completion. */
  SPIN,
  /**
   * Nothing in flight and every pending op was refused: retrying is not useful for a few hundred
   * microseconds, so give the core to other threads.
   */
  YIELD,
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
    if (posted == 0 && !reapedAny) {
      return inFlight == 0 ? YIELD : SPIN;
    }
    return CONTINUE;
  }
}
