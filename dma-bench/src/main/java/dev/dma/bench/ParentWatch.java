package dev.dma.bench;

import java.io.IOException;
import java.io.InputStream;
import java.util.concurrent.TimeUnit;

/**
 * Ends a child process ({@code target --exit-with-parent}, {@code scale-target}) when its parent is
 * gone: a daemon thread reads standard input, which the parent never writes, and at its end runs a
 * cleanup (closing the endpoints, so shm unlinks its {@code /dev/shm} files) and halts the JVM.
 *
 * <p>The cleanup is bounded: a second daemon thread halts the JVM {@link #CLEANUP_BOUND_SECONDS}
 * seconds after the end of input whatever the cleanup is doing, so a provider call stuck on a peer
 * that no longer exists cannot keep the child alive. {@code Runtime.halt}, not {@code exit}: nobody
 * reads the child's output any more, and shutdown hooks have nothing left to do.
 */
final class ParentWatch {
  /** How long the cleanup may take before the child halts anyway. */
  static final long CLEANUP_BOUND_SECONDS = 10;

  private ParentWatch() {}

  /**
   * Starts watching {@code System.in}.
   *
   * @param cleanup what to close before halting; runs once, on the watching thread
   */
  static void start(Runnable cleanup) {
    start(System.in, cleanup, () -> Runtime.getRuntime().halt(0));
  }

  /**
   * Starts watching a stream (tests pass their own stream and end).
   *
   * @param in the stream whose end means the parent is gone
   * @param cleanup what to close first
   * @param end what to do last (halting, in a real child)
   * @return the watching thread
   */
  static Thread start(InputStream in, Runnable cleanup, Runnable end) {
    Thread watcher =
        new Thread(
            () -> {
              try {
                while (in.read() >= 0) {
                  // The parent never writes; end of input means it is gone.
                }
              } catch (IOException ignored) {
                // Same: the parent is gone.
              }
              Thread bound =
                  new Thread(
                      () -> {
                        try {
                          TimeUnit.SECONDS.sleep(CLEANUP_BOUND_SECONDS);
                        } catch (InterruptedException ignored) {
                          return;
                        }
                        end.run();
                      },
                      "dma-bench-parent-watch-bound");
              bound.setDaemon(true);
              bound.start();
              try {
                cleanup.run();
              } catch (RuntimeException | Error ignored) {
                // Halting is all that is left to do.
              } finally {
                bound.interrupt();
                end.run();
              }
            },
            "dma-bench-parent-watch");
    watcher.setDaemon(true);
    watcher.start();
    return watcher;
  }
}
