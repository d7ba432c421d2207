package dev.dma.core.internal;

import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.logging.Handler;
import java.util.logging.Level;
import java.util.logging.LogRecord;
import java.util.logging.Logger;

/**
 * The messages one {@code java.util.logging} logger publishes at {@link Level#WARNING} or above
 * while capturing, for tests that assert what was warned, or that nothing was ({@code
 * System.Logger} goes to that logger by default). A test starts it in its set-up and stops it in
 * its tear-down, or in a {@code finally}.
 *
 * <p>Threads: records from any thread; {@link #messages} may be read at any time.
 */
public final class CapturedWarnings {
  // Held here: the logging framework keeps only weak references to its loggers.
  private final Logger logger;
  private final List<String> messages = new CopyOnWriteArrayList<>();
  private final Handler handler =
      new Handler() {
        @Override
        public void publish(LogRecord logRecord) {
          if (logRecord.getLevel().intValue() >= Level.WARNING.intValue()) {
            messages.add(logRecord.getMessage());
          }
        }

        @Override
        public void flush() {}

        @Override
        public void close() {}
      };

  /**
   * Warnings of the logger named {@code loggerName}, not captured until {@link #start}.
   *
   * @param loggerName a class's name, or a library's root logger (such as {@code io.opentelemetry})
   */
  public CapturedWarnings(String loggerName) {
    this.logger = Logger.getLogger(loggerName);
  }

  /** Starts capturing. */
  public void start() {
    logger.addHandler(handler);
  }

  /** Stops capturing; what was captured stays. */
  public void stop() {
    logger.removeHandler(handler);
  }

  /**
   * What was captured so far, in order: each record's message as logged, unformatted.
   *
   * @return a live view
   */
  public List<String> messages() {
    return messages;
  }
}
