package dev.dma.bench;

import java.time.Duration;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * Waiting for work handed to the one thread that owns an endpoint ({@link EndpointFarm}'s, {@link
 * EndpointDriver}'s): libfabric endpoints are used by their owner thread only, so other threads'
 * calls become tasks on it, and each such wait is bounded.
 */
final class OwnerThreads {
  private OwnerThreads() {}

  /**
   * Waits for {@code task}, which the owner thread runs, at most {@code timeout}. A task that timed
   * out (or whose caller was interrupted) and has not started never will.
   *
   * @param task the handed-over work
   * @param timeout the longest wait
   * @param owner the owner thread, as failure texts name it ("the endpoint farm's thread")
   * @return the task's result
   * @throws RuntimeException what the task threw
   * @throws IllegalStateException when the wait timed out or was interrupted, or the task threw a
   *     checked exception
   */
  static <V> V await(Future<V> task, Duration timeout, String owner) {
    try {
      return task.get(timeout.toNanos(), TimeUnit.NANOSECONDS);
    } catch (ExecutionException e) {
      if (e.getCause() instanceof RuntimeException runtime) {
        throw runtime;
      }
      throw new IllegalStateException(owner + " failed: " + e.getCause(), e.getCause());
    } catch (TimeoutException e) {
      task.cancel(false);
      throw new IllegalStateException(owner + " did not answer within " + text(timeout), e);
    } catch (InterruptedException e) {
      task.cancel(false);
      Thread.currentThread().interrupt();
      throw new IllegalStateException("interrupted waiting for " + owner, e);
    }
  }

  private static String text(Duration timeout) {
    long millis = timeout.toMillis();
    return millis % 1000 == 0 ? millis / 1000 + " s" : millis + " ms";
  }
}
