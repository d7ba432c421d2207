package dev.dma.core.internal;

import java.math.BigDecimal;
import java.time.Duration;

/**
 * Formats durations the way the original crate's messages did (Rust's {@code Debug} for {@code
 * Duration}): {@code 1s}, {@code 1.5s}, {@code 50ms}, {@code 250µs}, {@code 10ns}.
 */
public final class DurationFormat {
  private DurationFormat() {}

  /**
   * Formats a duration.
   *
   * @param duration a non-negative duration
   * @return the text
   */
  public static String format(Duration duration) {
    long seconds = duration.getSeconds();
    int nanos = duration.getNano();
    if (seconds > 0) {
      return trim(BigDecimal.valueOf(seconds).add(BigDecimal.valueOf(nanos, 9))) + "s";
    }
    if (nanos >= 1_000_000) {
      return trim(BigDecimal.valueOf(nanos, 6)) + "ms";
    }
    if (nanos >= 1_000) {
      return trim(BigDecimal.valueOf(nanos, 3)) + "µs";
    }
    return nanos + "ns";
  }

  private static String trim(BigDecimal value) {
    return value.stripTrailingZeros().toPlainString();
  }
}
