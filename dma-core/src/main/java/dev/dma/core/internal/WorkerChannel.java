package dev.dma.core.internal;

import java.lang.invoke.VarHandle;
import java.util.ArrayDeque;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.LockSupport;

/**
 * The one FIFO channel into a fabric worker: transfers and commands from any thread, consumed by
 * the worker alone. Because everything rides one queue, a client's {@code removePeer} is handled
 * after that client's earlier submits.
 *
 * <p>Closing is a gate, not a flag check: {@link #offer} counts itself in before it reads {@link
 * #isClosed()} and out after its element is in the queue, and the worker treats the channel as
 * drained only when it is closed, no offer is inside the gate and the queue is empty. So nothing
 * can land in the queue after the worker's last look at it, and no request is stranded.
 *
 * <p>Threads: {@link #offer} and {@link #close} from any thread; {@link #poll}, {@link #park} and
 * {@link #isDrained} from the worker only.
 */
public final class WorkerChannel {
  private final MpscQueue<Object> queue;
  // Messages the worker offered to itself while the queue was full (a completion hook that
  // resubmits), and every later one of its own until this is taken in, so they keep their order.
  // Waiting for room there would deadlock: only the worker makes room. Worker-only.
  private final ArrayDeque<Object> overflow = new ArrayDeque<>();
  private final AtomicInteger inside = new AtomicInteger();
  private volatile boolean closed;
  // Written before the volatile closeDeadlineSet, so a reader that sees the flag sees the value;
  // the first close wins (a second close(timeout) cannot lengthen the wait already promised).
  private volatile long closeDeadlineNanos;
  private volatile boolean closeDeadlineSet;
  private volatile boolean parked;
  private volatile Thread consumer;

  /**
   * A channel.
   *
   * @param capacity how many messages may wait before offers wait for room
   */
  public WorkerChannel(int capacity) {
    queue = new MpscQueue<>(capacity);
  }

  /**
   * Names the worker thread to wake when a message arrives. Called once by the worker.
   *
   * @param worker the consuming thread
   */
  public void bind(Thread worker) {
    consumer = worker;
  }

  /**
   * Queues a message for the worker, waiting for room when the queue is full.
   *
   * @param message a transfer request or a command
   * @return {@code false} when the channel is closed (the worker is gone or going); the caller
   *     keeps the message
   */
  public boolean offer(Object message) {
    inside.incrementAndGet();
    try {
      if (closed) {
        return false;
      }
      // Overflow is the worker's, read here unsynchronized from any thread: another thread may see
      // a stale answer and then fails the thread check, while the worker always sees its own.
      if (!overflow.isEmpty() && Thread.currentThread() == consumer) {
        // Behind the worker's earlier overflow, even if the queue has room again: poll takes the
        // queue first, so a later message of the worker's would overtake an earlier one (a
        // removePeer its own submit, say).
        overflow.addLast(message);
        return true;
      }
      while (!queue.offer(message)) {
        if (Thread.currentThread() == consumer) {
          overflow.addLast(message);
          return true;
        }
        // Full: the worker is alive (or closing) and draining; wait for room rather than fail.
        if (closed) {
          return false;
        }
        Thread.yield();
      }
    } finally {
      inside.decrementAndGet();
    }
    // Pairs with the fence in park(): either the worker sees the message before parking, or this
    // thread sees it parked and wakes it.
    VarHandle.fullFence();
    if (parked) {
      LockSupport.unpark(consumer);
    }
    return true;
  }

  /** Closes the channel: later offers fail, and the worker drains what is queued, then exits. */
  public void close() {
    closed = true;
    Thread worker = consumer;
    if (worker != null) {
      LockSupport.unpark(worker);
    }
  }

  /**
   * Whether {@link #close()} was called.
   *
   * @return whether the channel is closed
   */
  public boolean isClosed() {
    return closed;
  }

  /**
   * Takes the next message. Worker only.
   *
   * @return the message, or {@code null} when none is ready
   */
  public Object poll() {
    Object message = queue.poll();
    return message != null ? message : overflow.pollFirst();
  }

  /**
   * Whether the channel is closed and nothing more can ever arrive. Worker only.
   *
   * @return closed, no offer in progress, and the queues empty (in that order of reading)
   */
  public boolean isDrained() {
    return closed && inside.get() == 0 && queue.isEmpty() && overflow.isEmpty();
  }

  /**
   * Blocks until a message may be ready or the channel closes. Worker only.
   *
   * @return whether it blocked (false when a message was already there)
   */
  public boolean park() {
    parked = true;
    VarHandle.fullFence();
    boolean blocked = queue.isEmpty() && !closed;
    if (blocked) {
      LockSupport.park(this);
    }
    parked = false;
    return blocked;
  }

  /**
   * Blocks for at most {@code nanos}, less when a message may be ready or the channel closes.
   * Worker only.
   *
   * <p>Parks even once the channel is closed: a worker waiting out close(timeout) for operations
   * stuck in flight has nothing to take from the queue, and skipping the park there made it spin
   * through the whole close (96 % of a core over a 4 s close was measured). The park is bounded by
   * {@code nanos}, so the close deadline and the deadline scans are still seen on time; {@link
   * #close()}'s unpark only ends an earlier park sooner.
   *
   * @param nanos the longest wait
   */
  public void parkNanos(long nanos) {
    parked = true;
    VarHandle.fullFence();
    if (queue.isEmpty()) {
      LockSupport.parkNanos(this, nanos);
    }
    parked = false;
  }

  /**
   * Closes the channel like {@link #close()}, and bounds how long the worker may then wait for
   * posted operations: past {@code deadlineNanos} ({@link System#nanoTime()} time) it stops
   * waiting, closes its endpoint and fails what is left.
   *
   * @param deadlineNanos when to stop waiting
   */
  public void close(long deadlineNanos) {
    if (!closeDeadlineSet) {
      closeDeadlineNanos = deadlineNanos;
      closeDeadlineSet = true;
    }
    close();
  }

  /**
   * Whether the closer bounded its wait and the bound has passed. Worker only.
   *
   * @return whether {@link #close(long)}'s deadline is set and past
   */
  public boolean closeDeadlinePassed() {
    return closeDeadlineSet && System.nanoTime() - closeDeadlineNanos >= 0;
  }
}
