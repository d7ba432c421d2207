package dev.dma.fake;

import java.util.ArrayList;
import java.util.List;

/**
 * The passive side of one {@link FakeEndpoint} as a target: the ops of other endpoints that wait
 * for it to progress ({@link FakeScript#targetProgressRequired}), and the sleep of a passive target
 * in {@code awaitIncoming} until one arrives or a {@code wakeup} ends it. Progressing hands each
 * waiting op back to its initiator, which moves its bytes (or fails it, when this target closed)
 * and queues its completion.
 *
 * <p>Threads: one per target endpoint; every method is called with the fabric's lock held, which is
 * also the monitor a sleeping target waits on. An initiator's owner adds ops while posting; the
 * target's owner progresses, reaps or sleeps; any thread wakes it; whichever thread closes the
 * target progresses it one last time.
 */
final class TargetProgress {
  private final Object lock;
  // Ops of other endpoints waiting for this (target) endpoint to progress.
  private final List<Awaiting> awaiting = new ArrayList<>();

  /** Set by {@link #wakeup()}, cleared by the wait it ends. */
  private boolean wakeRequested;

  TargetProgress(Object lock) {
    this.lock = lock;
  }

  /** Parks an initiator's op until this target progresses, and wakes the target if it sleeps. */
  void add(FakeEndpoint initiator, int slot, long index) {
    awaiting.add(new Awaiting(initiator, slot, index));
    // Wakes a target sleeping in awaitIncoming (the fabric's endpoints share this lock).
    lock.notifyAll();
  }

  /** Whether an initiator's operation waits for this endpoint's progress. */
  boolean pending() {
    return !awaiting.isEmpty();
  }

  /** Hands every waiting op back to its initiator, which completes it. */
  void progress() {
    if (awaiting.isEmpty()) {
      return;
    }
    for (Awaiting op : awaiting) {
      op.initiator.parked().targetProgressed(op.slot, op.index);
    }
    awaiting.clear();
  }

  /**
   * Sleeps on the lock until an op waits for this target, a {@link #wakeup()} comes, or for at most
   * {@code timeoutNanos}. A wakeup requested before the call ends it at once; an interrupt ends it
   * with the thread's interrupt flag set again.
   *
   * @param closed whether the target endpoint is closed: then it does not sleep
   * @return whether an op waits for this target's progress
   */
  boolean await(long timeoutNanos, boolean closed) {
    if (wakeRequested) {
      wakeRequested = false;
      return false;
    }
    if (closed || !awaiting.isEmpty()) {
      return !closed;
    }
    try {
      // wait(0, 0) would wait forever: never less than a nanosecond.
      long bounded = Math.max(1, timeoutNanos);
      lock.wait(bounded / 1_000_000, (int) (bounded % 1_000_000));
    } catch (InterruptedException e) {
      // The SPI's wait returns rather than throws; the owner sees the flag on its next wait.
      Thread.currentThread().interrupt();
    }
    wakeRequested = false;
    return !awaiting.isEmpty();
  }

  /** Ends a wait in {@link #await}, or the next one. */
  void wakeup() {
    wakeRequested = true;
    lock.notifyAll();
  }

  /** An op of another endpoint that waits for this target to progress. */
  private record Awaiting(FakeEndpoint initiator, int slot, long index) {}
}
