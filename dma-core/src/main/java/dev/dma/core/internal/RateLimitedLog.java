package dev.dma.core.internal;

import java.lang.System.Logger.Level;

/**
 * Warnings the worker survives and that can repeat every pass (completion-queue read failures, a
 * reaped slot that holds no operation), rate-limited so a storm cannot flood the log: at most
 * {@value #BURST} per {@value #WINDOW_SECONDS} s, then one line saying how many were suppressed.
 * Address-vector warnings (a failed {@code fi_av_remove}, a failed re-insert after a reset, a
 * recycled client id) are not limited here: the peer table logs them directly, once per event.
 *
 * <p>Threads: one owner thread (the fabric worker).
 */
public final class RateLimitedLog {
  static final int BURST = 10;
  static final int WINDOW_SECONDS = 10;
  private static final long WINDOW_NS = WINDOW_SECONDS * 1_000_000_000L;

  private final System.Logger logger;
  private long windowStartNs = System.nanoTime();
  private int logged;
  private long suppressed;

  /**
   * A limiter over a logger.
   *
   * @param logger where warnings go
   */
  public RateLimitedLog(System.Logger logger) {
    this.logger = logger;
  }

  /**
   * Logs a warning unless the window's burst is spent.
   *
   * @param message the warning
   * @return whether it was logged
   */
  public boolean warn(String message) {
    long now = System.nanoTime();
    if (now - windowStartNs >= WINDOW_NS) {
      if (suppressed > 0) {
        logger.log(Level.WARNING, "suppressed " + suppressed + " similar warnings");
      }
      windowStartNs = now;
      logged = 0;
      suppressed = 0;
    }
    if (logged < BURST) {
      logged++;
      logger.log(Level.WARNING, message);
      return true;
    }
    suppressed++;
    return false;
  }

  /**
   * Warnings suppressed in the current window.
   *
   * @return the count
   */
  public long suppressed() {
    return suppressed;
  }
}
