package dev.dma.core;

import dev.dma.api.DmaConfiguration;
import dev.dma.core.internal.Threads;
import java.lang.System.Logger.Level;
import java.time.Duration;
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
 * own FIFO queue; jobs are spread round-robin. Thread-safe: any thread may submit, any thread may
 * close.
 *
 * <h2>A job that throws</h2>
 *
 * Whatever a job throws, {@link Error}s included, is logged and ends only that job, never its
 * thread: the pool keeps serving. A service's checksum job completes every transfer it holds before
 * anything escapes it (a transfer whose checksum step throws fails alone; a {@link
 * dev.dma.api.BatchCompleter} that throws has had its batch delivered), so by the time a {@link
 * VirtualMachineError} reaches the pool nothing it carried is lost; the pool logs it as fatal and
 * goes on, since an OutOfMemoryError or StackOverflowError on one batch says little about the next.
 *
 * <h2>Closing never loses a job</h2>
 *
 * A job carries completions a caller is waiting for, and a pool may be shared: closing it before a
 * service that still submits must not drop that service's completions. So every submitted job runs
 * exactly once. {@link #close()} lets the threads finish the jobs already queued, joins them, then
 * runs on the closing thread any job that was queued behind the threads' stop marker (a submit that
 * raced the close). A job submitted once the pool is closed runs inline, on the submitting thread
 * (for a service: its fabric worker), before {@code submit} returns.
 *
 * <p>The join is bounded by the close timeout: a thread still inside a job then (a completer that
 * blocks, against its contract) is left behind as a daemon thread, with an ERROR naming it. It
 * keeps its queue: when the job returns it runs the jobs queued before the stop marker, then ends.
 * Otherwise no pool thread is left once {@code close()} returns.
 */
public final class ChecksumPool implements AutoCloseable {
  private static final System.Logger LOG = System.getLogger(ChecksumPool.class.getName());
  private static final Runnable STOP = () -> {};

  private final List<Worker> workers;
  private final Duration closeTimeout;
  private final AtomicInteger next = new AtomicInteger();
  private volatile boolean closed;

  /**
   * Starts a pool whose {@link #close()} waits at most {@link
   * DmaConfiguration#DEFAULT_CLOSE_TIMEOUT} for its threads.
   *
   * @param threads how many threads; at least 1 is started
   */
  public ChecksumPool(int threads) {
    this(threads, DmaConfiguration.DEFAULT_CLOSE_TIMEOUT);
  }

  /**
   * Starts a pool.
   *
   * @param threads how many threads; at least 1 is started
   * @param closeTimeout how long {@link #close()} waits for the threads to finish their queued jobs
   *     before leaving a busy one behind (see the class comment)
   */
  public ChecksumPool(int threads, Duration closeTimeout) {
    if (closeTimeout == null || closeTimeout.isNegative()) {
      throw new IllegalArgumentException("closeTimeout must not be negative, not " + closeTimeout);
    }
    this.closeTimeout = closeTimeout;
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
   * Finishes the queued jobs, stops and joins every thread for at most the pool's close timeout,
   * then runs on this thread any job a racing {@link #submit} queued too late for the threads.
   * Idempotent; any thread. On a pool thread (from a completer) it does not wait for that thread,
   * which ends once the job calling it returns.
   */
  @Override
  public void close() {
    close(closeTimeout);
  }

  /**
   * Closes like {@link #close()}, waiting at most {@code timeout} in all for the threads.
   *
   * @param timeout the longest wait for the threads to finish their queued jobs
   */
  public void close(Duration timeout) {
    closed = true;
    for (Worker worker : workers) {
      worker.queue.add(STOP);
    }
    long deadline = System.nanoTime() + saturatedNanos(timeout);
    Thread self = Thread.currentThread();
    for (Worker worker : workers) {
      if (worker.thread == self) {
        continue;
      }
      long left = Math.max(0, deadline - System.nanoTime());
      if (Threads.joinUninterruptibly(worker.thread, Duration.ofNanos(left))) {
        drainBehindStop(worker);
      } else {
        // Waiting on would make close() as unbounded as the completer it waits for. The thread
        // keeps its queue and runs it up to the stop marker if the job ever returns; a job queued
        // behind the marker is run by its own submitter (see submit), so none is stranded.
        LOG.log(
            Level.ERROR,
            worker.thread.getName()
                + " did not finish its checksum jobs within "
                + timeout
                + " of close(); it is left behind (a daemon thread), still inside a job: a"
                + " BatchCompleter that blocks? It runs its "
                + worker.queue.size()
                + " queued entries, then ends, if the job returns");
      }
    }
  }

  /**
   * Runs what is still queued for a thread that has ended: only jobs added after its stop marker (a
   * later close's marker, too, which is skipped).
   */
  private static void drainBehindStop(Worker worker) {
    Runnable job;
    while ((job = worker.queue.poll()) != null) {
      if (job != STOP) {
        runQuietly(job);
      }
    }
  }

  private static long saturatedNanos(Duration timeout) {
    try {
      return timeout.toNanos();
    } catch (ArithmeticException huge) {
      return Long.MAX_VALUE / 2;
    }
  }

  private static void runQuietly(Runnable job) {
    try {
      job.run();
    } catch (Throwable failure) {
      try {
        LOG.log(
            Level.ERROR,
            failure instanceof VirtualMachineError
                ? "a checksum-pool job ended with a fatal error (after completing what it held);"
                    + " the pool carries on"
                : "a checksum-pool job failed; the pool carries on",
            failure);
      } catch (Throwable loggingFailed) {
        // Out of memory or stack while logging: the thread must still live to serve its queue.
      }
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
