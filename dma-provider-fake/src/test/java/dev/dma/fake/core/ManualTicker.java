package dev.dma.fake.core;

import dev.dma.core.NanoClock;
import java.time.Duration;
import java.util.concurrent.atomic.AtomicLong;

/**
 * A clock the test steps by hand, so a deadline passes exactly when the test says; with a {@link
 * SteppedWorker}, which steps until the worker has read it ({@link SteppedWorker#advanceAndRead}).
 */
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
}
