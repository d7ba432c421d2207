package dev.dma.fake.core;

import dev.dma.core.NanoClock;
import java.time.Duration;
import java.util.concurrent.atomic.AtomicLong;

/** A clock the test steps by hand, so the progress deadline passes exactly when the test says. */
final class ManualTicker implements NanoClock {
  private final AtomicLong nanos = new AtomicLong();

  @Override
  public long nanoTime() {
    return nanos.get();
  }

  void advance(Duration duration) {
    nanos.addAndGet(duration.toNanos());
  }
}
