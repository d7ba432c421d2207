package dev.dma.core;

import dev.dma.core.internal.Threads;
import java.lang.System.Logger.Level;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Threads that hash checksummed transfers and deliver their completions, so CRC-32C never stalls a
 * fabric worker's post/reap loop. One pool may serve several services.
 *
 * <p>Threads are named {@code f-pool-00}, {@code f-pool-01}, ... (numbered per pool). Each has its
 * own FIFO queue; jobs are spread round-robin. A job that throws is logged and kills only itself,
 * never its thread. {@link #close()} lets the threads finish the jobs already queued, then joins
 * them; jobs submitted after that are dropped. Thread-safe.
 */
public final class ChecksumPool implements AutoCloseable {
  private static final System.Logger LOG = System.getLogger(ChecksumPool.class.getName());
  private static final Runnable STOP = () -> {};

  private final List<Worker> workers;
  private final AtomicInteger next = new AtomicInteger();
  private volatile boolean closed;

  /**
   * Starts a pool.
   *
   * @param threads how many threads; at least 1 is started
   */
  public ChecksumPool(int threads) {
    int count = Math.max(1, threads);
    List<Worker> started = new ArrayList<>(count);
    for (int i = 0; i < count; i++) {
      Worker worker = new Worker(String.format("f-pool-%02d", i));
      worker.thread.start();
      started.add(worker);
    }
    this.workers = List.copyOf(started);
  }

  /**
   * Queues a job; dropped silently once the pool is closing.
   *
   * @param job the job
   */
  public void submit(Runnable job) {
    if (closed) {
      return;
    }
    workers.get(Math.floorMod(next.getAndIncrement(), workers.size())).queue.add(job);
  }

  /**
   * Whether {@link #close()} was called.
   *
   * @return whether the pool is closing or closed
   */
  public boolean isClosed() {
    return closed;
  }

  /**
   * Whether {@code thread} is one of this pool's threads.
   *
   * @param thread a thread
   * @return whether it belongs to this pool
   */
  public boolean isPoolThread(Thread thread) {
    for (Worker worker : workers) {
      if (worker.thread == thread) {
        return true;
      }
    }
    return false;
  }

  /**
   * The number of threads.
   *
   * @return the size
   */
  public int threads() {
    return workers.size();
  }

  /** Finishes the queued jobs, then stops and joins every thread. Idempotent. */
  @Override
  public void close() {
    closed = true;
    for (Worker worker : workers) {
      worker.queue.add(STOP);
    }
    for (Worker worker : workers) {
      Threads.joinUninterruptibly(worker.thread);
    }
  }

  private static final class Worker implements Runnable {
    final BlockingQueue<Runnable> queue = new LinkedBlockingQueue<>();
    final Thread thread;

    Worker(String name) {
      thread = new Thread(this, name);
      thread.setDaemon(true);
    }

    @Override
    public void run() {
      while (true) {
        Runnable job;
        try {
          job = queue.take();
        } catch (InterruptedException e) {
          // Only close() stops a pool thread; an interrupt from elsewhere is not a reason to lose
          // queued completions.
          continue;
        }
        if (job == STOP) {
          return;
        }
        try {
          job.run();
        } catch (Throwable failure) {
          LOG.log(Level.ERROR, "a checksum-pool job failed; the pool carries on", failure);
        }
      }
    }
  }
}
