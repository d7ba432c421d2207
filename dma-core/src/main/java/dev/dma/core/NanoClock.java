package dev.dma.core;

/**
 * A monotonic nanosecond clock, the time source of the worker's deadlines ({@code
 * completion_deadline}, {@code progress_deadline}); tests step one by hand through {@link
 * FabricService.Builder#clock(NanoClock)}.
 *
 * <p>dma's own type rather than {@link java.util.function.LongSupplier} so the unit and the
 * contract are in the name and a lambda cannot pass milliseconds by mistake, and rather than a
 * library's (Guava's {@code Ticker}) so the API exposes no third-party type.
 *
 * <p>Threads: the fabric worker reads it, coarsely (every few dozen passes and after each park), so
 * an implementation must be safe to call from that thread and must not block.
 */
@FunctionalInterface
public interface NanoClock {
  /**
   * The current reading, as {@link System#nanoTime()}: only differences between readings mean
   * anything, and readings never go backwards. Called on the fabric worker thread; must be quick.
   *
   * @return nanoseconds since an arbitrary origin
   */
  long nanoTime();

  /**
   * The system clock, {@link System#nanoTime()}.
   *
   * @return the clock
   */
  static NanoClock system() {
    return System::nanoTime;
  }
}
