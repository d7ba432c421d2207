package dev.dma.core.internal;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/**
 * The small pieces of the worker: its idle strategy, duration texts, the log limiter (its channel:
 * WorkerChannelTest).
 */
class WorkerPiecesTest {
  @Test
  void idleParksWhenNothingIsOutstanding() {
    assertEquals(Idle.PARK, Idle.decide(0, 0, 0, false));
    assertEquals(Idle.PARK, Idle.decide(0, 0, 3, true));
  }

  @Test
  void idleBacksOffWhenEverythingPendingIsStalled() {
    assertEquals(Idle.BACK_OFF, Idle.decide(0, 5, 0, false));
  }

  @Test
  void idleBacksOffWhileOpsAreInFlightAndNothingMoved() {
    assertEquals(Idle.BACK_OFF, Idle.decide(2, 0, 0, false));
    assertEquals(Idle.BACK_OFF, Idle.decide(2, 7, 0, false));
  }

  @Test
  void idleContinuesWhenSomethingMoved() {
    assertEquals(Idle.CONTINUE, Idle.decide(2, 0, 1, false));
    assertEquals(Idle.CONTINUE, Idle.decide(0, 3, 0, true));
  }

  @Test
  void theChecksumFlushPredicate() {
    // Flushes a partial batch before parking: the batch would otherwise wait for an unrelated
    // message to wake the worker.
    assertTrue(ChecksumBatch.shouldFlush(1, 0, true, true));
    assertTrue(ChecksumBatch.shouldFlush(FabricWorker.TARGET_COMPLETIONS, 4, true, false));
    assertTrue(ChecksumBatch.shouldFlush(1, 0, false, false));
    assertFalse(ChecksumBatch.shouldFlush(1, 1, true, false));
    assertFalse(ChecksumBatch.shouldFlush(0, 0, false, true));
  }

  @Test
  void durationsReadLikeTheOriginalMessages() {
    assertEquals("1s", DurationFormat.format(Duration.ofSeconds(1)));
    assertEquals("1.5s", DurationFormat.format(Duration.ofMillis(1500)));
    assertEquals("50ms", DurationFormat.format(Duration.ofMillis(50)));
    assertEquals("2.5ms", DurationFormat.format(Duration.ofNanos(2_500_000)));
    assertEquals("250µs", DurationFormat.format(Duration.ofNanos(250_000)));
    assertEquals("10ns", DurationFormat.format(Duration.ofNanos(10)));
    assertEquals("0ns", DurationFormat.format(Duration.ZERO));
  }

  @Test
  void theLogLimiterSuppressesAStorm() {
    AtomicInteger lines = new AtomicInteger();
    System.Logger counting =
        new System.Logger() {
          @Override
          public String getName() {
            return "counting";
          }

          @Override
          public boolean isLoggable(Level level) {
            return true;
          }

          @Override
          public void log(
              Level level, java.util.ResourceBundle bundle, String msg, Throwable thrown) {
            lines.incrementAndGet();
          }

          @Override
          public void log(
              Level level, java.util.ResourceBundle bundle, String format, Object... params) {
            lines.incrementAndGet();
          }
        };
    RateLimitedLog log = new RateLimitedLog(counting);
    int logged = 0;
    for (int i = 0; i < 10_000; i++) {
      if (log.warn("storm " + i)) {
        logged++;
      }
    }
    assertEquals(RateLimitedLog.BURST, logged);
    assertEquals(RateLimitedLog.BURST, lines.get());
    assertEquals(10_000 - RateLimitedLog.BURST, log.suppressed());
  }
}
