package dev.dma.fake.core;

import dev.dma.core.NanoClock;
import java.time.Duration;
import java.util.concurrent.atomic.AtomicLong;

/** A clock the test steps by hand, so the progress deadline passes exactly when the test says. */
final class ManualTicker implements NanoClock {
  private final AtomicLong nanos = new AtomicLong();
  private final AtomicLong reads = new AtomicLong();

  @Override
  public long nanoTime() {
    reads.incrementAndGet();
    return nanos.get();
  }

  /** How many times the clock was read, for a harness that waits for the worker's next read. */
  long reads() {
    return reads.get();
  }

  void advance(Duration duration) {
    nanos.addAndGet(duration.toNanos());
  }

  /**
   * Advances, then waits (at most 10 s) until the worker has read the clock again. The worker keeps
   * a coarse clock, read every few dozen passes: an op posted right after a jump of the clock could
   * otherwise be stamped with the reading from before it.
   */
  void advanceAndAwaitRead(Duration duration) throws InterruptedException {
    long before = reads.get();
    advance(duration);
    long deadline = System.nanoTime() + 10_000_000_000L;
    while (reads.get() == before) {
      if (System.nanoTime() > deadline) {
        throw new AssertionError("the worker did not read the clock within 10 s");
      }
      Thread.onSpinWait();
    }
  }
}
