package dev.dma.core.internal;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.concurrent.atomic.AtomicLong;

/**
 * A bounded multi-producer, single-consumer queue over a ring of slots with per-slot sequence
 * numbers (Vyukov's design): offering and polling allocate nothing, so submitting a transfer costs
 * no garbage.
 *
 * <p>Threads: any number of threads may {@link #offer}; exactly one thread (the fabric worker) may
 * {@link #poll}.
 *
 * @param <E> the element type
 */
public final class MpscQueue<E> {
  private static final VarHandle ELEMENTS = MethodHandles.arrayElementVarHandle(Object[].class);
  private static final VarHandle SEQUENCES = MethodHandles.arrayElementVarHandle(long[].class);

  private final Object[] elements;
  private final long[] sequences;
  private final int mask;
  private final AtomicLong tail = new AtomicLong();
  // Only the consumer reads and writes head, so it needs no atomicity.
  private long head;

  /**
   * An empty queue.
   *
   * @param capacity the most elements it holds; rounded up to a power of two
   */
  public MpscQueue(int capacity) {
    int size = Integer.highestOneBit(Math.max(2, capacity - 1)) << 1;
    elements = new Object[size];
    sequences = new long[size];
    for (int i = 0; i < size; i++) {
      sequences[i] = i;
    }
    mask = size - 1;
  }

  /**
   * Adds an element unless the queue is full.
   *
   * @param element the element, not null
   * @return whether it was added
   */
  public boolean offer(E element) {
    while (true) {
      long position = tail.get();
      int index = (int) position & mask;
      long sequence = (long) SEQUENCES.getAcquire(sequences, index);
      long difference = sequence - position;
      if (difference == 0) {
        if (tail.compareAndSet(position, position + 1)) {
          ELEMENTS.set(elements, index, element);
          // Publishes the element: the consumer reads the sequence with acquire, then the element.
          SEQUENCES.setRelease(sequences, index, position + 1);
          return true;
        }
      } else if (difference < 0) {
        return false;
      }
      // Another producer took this position; try the next.
    }
  }

  /**
   * Removes the oldest element. Consumer thread only.
   *
   * @return the element, or {@code null} when none is ready
   */
  @SuppressWarnings("unchecked")
  public E poll() {
    int index = (int) head & mask;
    long sequence = (long) SEQUENCES.getAcquire(sequences, index);
    if (sequence != head + 1) {
      return null;
    }
    E element = (E) ELEMENTS.get(elements, index);
    ELEMENTS.set(elements, index, null);
    // Frees the slot for the producer one lap ahead.
    SEQUENCES.setRelease(sequences, index, head + mask + 1);
    head++;
    return element;
  }

  /**
   * Whether the queue looks empty. Exact on the consumer thread with respect to completed offers.
   *
   * @return whether no element is ready
   */
  public boolean isEmpty() {
    int index = (int) head & mask;
    return (long) SEQUENCES.getAcquire(sequences, index) != head + 1;
  }

  /**
   * The capacity.
   *
   * @return how many elements the queue holds at most
   */
  public int capacity() {
    return elements.length;
  }
}
