package dev.dma.core.internal;

/** Thread helpers shared by the service, the target and the checksum pool. */
public final class Threads {
  private Threads() {}

  /**
   * Waits for a thread to end, even across interrupts: closing must not return with the thread
   * still touching the endpoint. An interrupt is kept for the caller to see afterwards.
   *
   * @param thread the thread to wait for
   */
  public static void joinUninterruptibly(Thread thread) {
    boolean interrupted = false;
    while (thread.isAlive()) {
      try {
        thread.join();
      } catch (InterruptedException e) {
        interrupted = true;
      }
    }
    if (interrupted) {
      Thread.currentThread().interrupt();
    }
  }

  /**
   * Waits for a thread to die, at most {@code timeout}, keeping the caller's interrupt status.
   *
   * @param thread the thread
   * @param timeout the longest wait
   * @return whether the thread died
   */
  public static boolean joinUninterruptibly(Thread thread, java.time.Duration timeout) {
    boolean interrupted = false;
    long deadline = System.nanoTime() + timeout.toNanos();
    try {
      while (thread.isAlive()) {
        long left = deadline - System.nanoTime();
        if (left <= 0) {
          return false;
        }
        try {
          thread.join(java.time.Duration.ofNanos(left));
        } catch (InterruptedException e) {
          interrupted = true;
        }
      }
      return true;
    } finally {
      if (interrupted) {
        Thread.currentThread().interrupt();
      }
    }
  }
}
