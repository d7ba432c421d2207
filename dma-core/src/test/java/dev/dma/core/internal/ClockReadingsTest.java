package dev.dma.core.internal;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The bound the deadline scan takes for a post's time: the reading that ended the post's clock
 * epoch while the ring holds it, else the oldest reading it holds (late, never early).
 */
@Timeout(value = 10, unit = TimeUnit.SECONDS)
class ClockReadingsTest {
  /** Epoch {@code e} starts at reading {@code 1000 * e + 7}. */
  private static ClockReadings readUpTo(int current) {
    ClockReadings readings = new ClockReadings();
    for (int epoch = 0; epoch <= current; epoch++) {
      readings.record(epoch, 1000L * epoch + 7);
    }
    return readings;
  }

  @Test
  void aPostIsBoundedByTheReadingThatEndedItsEpoch() {
    ClockReadings readings = readUpTo(10);
    assertEquals(1000L * 4 + 7, readings.postedNoLaterThan(3, 10));
    assertEquals(1000L * 10 + 7, readings.postedNoLaterThan(9, 10));
  }

  @Test
  void theOldestEpochTheRingStillHoldsIsBoundedExactly() {
    int current = 3 * ClockReadings.RING;
    ClockReadings readings = readUpTo(current);
    int epoch = current - (ClockReadings.RING - 1); // the oldest whose end the ring holds
    assertEquals(1000L * (epoch + 1) + 7, readings.postedNoLaterThan(epoch, current));
  }

  @Test
  void anEpochTheRingNoLongerHoldsIsBoundedByTheOldestReadingHeld() {
    int current = 3 * ClockReadings.RING + 5;
    ClockReadings readings = readUpTo(current);
    long oldest = 1000L * (current - (ClockReadings.RING - 1)) + 7;
    assertEquals(oldest, readings.postedNoLaterThan(current - ClockReadings.RING, current));
    assertEquals(oldest, readings.postedNoLaterThan(5, current), "late, never early");
  }
}
