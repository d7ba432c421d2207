package dev.dma.core.internal;

/**
 * The worker's recent clock readings, one per epoch of its coarse clock (each reading starts an
 * epoch), so that the end of the epoch a post was made in bounds the post's time from above: the
 * coarse clock itself is no bound, since it was read before the post, by up to {@link
 * FabricWorker#CLOCK_PASSES} passes, and a worker descheduled on a loaded machine made that 170 ms.
 * Written at each reading of the clock (not per transfer), read by the deadline scan.
 *
 * <p>Threads: the worker thread only.
 */
final class ClockReadings {
  /** Recent readings kept; a power of two. */
  static final int RING = 1024;

  private final long[] readings = new long[RING];

  /** Records the reading that starts {@code epoch}. */
  void record(int epoch, long reading) {
    readings[epoch & (RING - 1)] = reading;
  }

  /**
   * A time no earlier than a post made in clock epoch {@code epoch}: the reading that ended that
   * epoch, or, when the ring no longer holds it, the oldest reading it holds (later, so safe: the
   * deadline may fire late by up to the ring's span, never early).
   *
   * @param current the epoch now
   */
  long postedNoLaterThan(int epoch, int current) {
    int age = current - epoch;
    int next = age < RING ? epoch + 1 : current - (RING - 1);
    return readings[next & (RING - 1)];
  }
}
