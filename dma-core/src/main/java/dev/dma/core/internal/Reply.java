package dev.dma.core.internal;

import dev.dma.api.DmaException;

/**
 * A one-shot answer from the fabric worker to a thread blocked on it (readiness, adding a peer,
 * registering memory). The worker {@linkplain #send sends} a value, {@linkplain #fail fails} it, or
 * {@linkplain #abandon abandons} it; it abandons every reply it still holds when it exits for any
 * reason, so a caller never stays blocked on a worker that died.
 *
 * <p>Threads: one thread answers, any number may wait.
 *
 * @param <V> the answer type
 */
public final class Reply<V> {
  private enum State {
    PENDING,
    ANSWERED,
    FAILED,
    ABANDONED
  }

  private State state = State.PENDING;
  private V value;
  private DmaException error;

  /**
   * Answers with a value; only the first answer, failure or abandonment counts.
   *
   * @param answer the value
   */
  public synchronized void send(V answer) {
    if (state == State.PENDING) {
      value = answer;
      state = State.ANSWERED;
      notifyAll();
    }
  }

  /**
   * Answers with an error; only the first answer, failure or abandonment counts.
   *
   * @param failure the error the waiter throws
   */
  public synchronized void fail(DmaException failure) {
    if (state == State.PENDING) {
      error = failure;
      state = State.FAILED;
      notifyAll();
    }
  }

  /** Gives up without answering, waking every waiter; a no-op once answered. */
  public synchronized void abandon() {
    if (state == State.PENDING) {
      state = State.ABANDONED;
      notifyAll();
    }
  }

  /**
   * Blocks until answered, failed or abandoned. Uninterruptible, because the worker always answers
   * or abandons; an interrupt is kept for the caller to see afterwards.
   *
   * @param abandonedText the text of the error thrown when the reply was abandoned
   * @return the answer
   * @throws DmaException the worker's error, or a {@link DmaException.Kind#FABRIC} error with
   *     {@code abandonedText} and {@link DmaException.Reason#CLOSED} (the answering thread ended)
   */
  public synchronized V await(String abandonedText) {
    boolean interrupted = false;
    while (state == State.PENDING) {
      try {
        wait();
      } catch (InterruptedException e) {
        interrupted = true;
      }
    }
    if (interrupted) {
      Thread.currentThread().interrupt();
    }
    return switch (state) {
      case ANSWERED -> value;
      case FAILED -> throw error;
      default -> throw DmaException.fabric(DmaException.Reason.CLOSED, abandonedText);
    };
  }
}
