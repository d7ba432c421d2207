package dev.dma.core.internal;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.reflect.Field;
import java.util.List;
import java.util.ResourceBundle;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The log limiter across windows: the first warning of a new window first says how many the last
 * one suppressed (and says nothing when it suppressed none), then the burst starts over. The window
 * is ten seconds of {@code System.nanoTime}; rather than wait, the test moves its start back by a
 * window.
 */
@Timeout(10)
class RateLimitedLogTest {
  private final List<String> lines = new CopyOnWriteArrayList<>();
  private final System.Logger recording =
      new System.Logger() {
        @Override
        public String getName() {
          return "recording";
        }

        @Override
        public boolean isLoggable(Level level) {
          return true;
        }

        @Override
        public void log(Level level, ResourceBundle bundle, String message, Throwable thrown) {
          lines.add(level + " " + message);
        }

        @Override
        public void log(Level level, ResourceBundle bundle, String format, Object... params) {
          lines.add(level + " " + format);
        }
      };

  /** Makes the current window look a whole window old, so the next warning opens a new one. */
  private static void endWindow(RateLimitedLog log) throws ReflectiveOperationException {
    Field start = RateLimitedLog.class.getDeclaredField("windowStartNs");
    start.setAccessible(true);
    start.setLong(log, start.getLong(log) - RateLimitedLog.WINDOW_SECONDS * 1_000_000_000L - 1);
  }

  @Test
  void aNewWindowFirstSaysHowManyTheLastSuppressedThenStartsTheBurstOver() throws Exception {
    RateLimitedLog log = new RateLimitedLog(recording);
    for (int i = 0; i < RateLimitedLog.BURST + 3; i++) {
      assertEquals(i < RateLimitedLog.BURST, log.warn("storm " + i));
    }
    assertEquals(3, log.suppressed());
    assertEquals(RateLimitedLog.BURST, lines.size());
    endWindow(log);

    assertTrue(log.warn("after"));

    assertEquals(0, log.suppressed());
    assertEquals(
        List.of("WARNING suppressed 3 similar warnings", "WARNING after"),
        lines.subList(RateLimitedLog.BURST, lines.size()));
    for (int i = 1; i < RateLimitedLog.BURST; i++) {
      assertTrue(log.warn("again " + i), "the burst starts over: warning " + i);
    }
    assertFalse(log.warn("over the burst again"));
  }

  @Test
  void aWindowThatSuppressedNothingEndsWithoutASummary() throws Exception {
    RateLimitedLog log = new RateLimitedLog(recording);
    assertTrue(log.warn("one"));
    endWindow(log);
    assertTrue(log.warn("two"));
    assertEquals(List.of("WARNING one", "WARNING two"), lines);
  }
}
