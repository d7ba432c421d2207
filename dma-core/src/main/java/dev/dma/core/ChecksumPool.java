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
 * never its thread. Thread-safe: any thread may submit, any thread may close.
 *
 * <h2>Closing never loses a job</h2>
 *
 * A job carries completions a caller is waiting for, and a pool may be shared: closing it before a
 * service that still submits must not drop that service's completions. So every submitted job runs
 * exactly once. {@link #close()} lets the threads finish the jobs already queued, joins them, then
 * runs on the closing thread any job that was queued behind the threads' stop marker (a submit that
 * raced the close). A job submitted once the pool is closed runs inline, on the submitting thread
 * (for a service: its fabric worker), before {@code submit} returns. After {@code close()} returns
 * no pool thread is left.
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
   * Queues a job for a pool thread; once the pool is closing, runs it inline instead (see the class
   * comment), so it always runs exactly once. Any thread; allocates only the queue's node.
   *
   * @param job the job
   */
  public void submit(Runnable job) {
    if (closed) {
      runQuietly(job);
      return;
    }
    BlockingQueue<Runnable> queue =
        workers.get(Math.floorMod(next.getAndIncrement(), workers.size())).queue;
    queue.add(job);
    // The close may have begun between the check and the add: then the job can sit behind the stop
    // marker, where no pool thread will take it. Whoever removes it runs it: this thread (remove
    // succeeds) or close()'s final drain (it polled the job first). If `closed` still reads false
    // here, the add preceded close()'s write and so its stop marker: a pool thread runs the job.
    if (closed && queue.remove(job)) {
      runQuietly(job);
    }
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

  /**
   * Finishes the queued jobs, stops and joins every thread, then runs on this thread any job a
   * racing {@link #submit} queued too late for the threads. Idempotent; any thread (a pool thread
   * must not close its own pool: it would wait for itself).
   */
  @Override
  public void close() {
    closed = true;
    for (Worker worker : workers) {
      worker.queue.add(STOP);
    }
    for (Worker worker : workers) {
      Threads.joinUninterruptibly(worker.thread);
    }
    // The threads are gone: what is still queued was added after their stop marker (a later
    // close's marker, too, which is skipped).
    for (Worker worker : workers) {
      Runnable job;
      while ((job = worker.queue.poll()) != null) {
        if (job != STOP) {
          runQuietly(job);
        }
      }
    }
  }

  private static void runQuietly(Runnable job) {
    try {
      job.run();
    } catch (Throwable failure) {
      LOG.log(Level.ERROR, "a checksum-pool job failed; the pool carries on", failure);
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
        runQuietly(job);
      }
    }
  }
}
