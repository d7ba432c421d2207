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
}
