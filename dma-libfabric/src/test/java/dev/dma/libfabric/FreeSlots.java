package dev.dma.libfabric;

import dev.dma.spi.CompletionSink;

/**
 * A stack of free op slots that takes each reaped slot back, counting completions and failures: the
 * windowed posting loop of the endpoint-level burst tests. One thread.
 */
final class FreeSlots implements CompletionSink {
  private final int[] free;
  private int count;
  int completed;
  int failed;

  /** All of {@code [0, window)} free. */
  FreeSlots(int window) {
    free = new int[window];
    for (int i = 0; i < window; i++) {
      free[i] = i;
    }
    count = window;
  }

  boolean any() {
    return count > 0;
  }

  /** The slot to post on next; it stays free until {@link #take()} (the post may be refused). */
  int peek() {
    return free[count - 1];
  }

  /** Takes the slot {@link #peek()} named, once its post was accepted. */
  void take() {
    count--;
  }

  /** Operations reaped so far, either way. */
  int reaped() {
    return completed + failed;
  }

  @Override
  public void completed(int slot) {
    completed++;
    free[count++] = slot;
  }

  @Override
  public void failed(int slot, int errno, int providerErrno, String message) {
    failed++;
    free[count++] = slot;
  }
}
