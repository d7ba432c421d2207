package dev.dma.bench;

import dev.dma.api.Advertisement;
import dev.dma.api.Checksum;
import dev.dma.api.Completion;
import dev.dma.api.Direction;
import dev.dma.api.DmaException;
import dev.dma.api.Operands;
import dev.dma.api.TransferRequest;
import dev.dma.core.AsyncFabricService;
import java.lang.foreign.MemorySegment;
import java.util.List;
import java.util.concurrent.CompletionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Keeps transfers outstanding the way a Java 25 server most naturally uses {@link
 * AsyncFabricService}: {@code threads} virtual threads, each looping over build its request, {@link
 * AsyncFabricService#transfer}, block on the future, check the completion, repeat. The service's
 * window ({@code max_in_flight}) caps what is posted; threads beyond it wait in the worker's
 * pending queue, as a server's requests would.
 *
 * <p>Unlike {@link ClosedLoop}, this allocates per transfer (the request, the future and whatever
 * the async API allocates): that is the cost being measured. Latency is from just before {@code
 * transfer} to the return of {@code join}, so it includes waking the thread.
 *
 * <p>Threads: the virtual threads record into striped, locked histograms and shared atomic
 * counters; the controlling thread calls the {@link PointLoop} methods in order. A point's threads
 * are started by {@link #start} and end after {@link #stop}, so {@link #awaitDrained} joins them.
 */
final class VirtualThreadLoop implements PointLoop {
  /** Histograms the threads record into; a thread uses stripe {@code index % STRIPES}. */
  private static final int STRIPES = 8;

  /** A thread's context: the shared operand, as the pipelined slots share it. */
  static final class Slot implements Operands {
    private final MemorySegment segment;

    Slot(MemorySegment segment) {
      this.segment = segment;
    }

    @Override
    public MemorySegment source() {
      return segment;
    }

    @Override
    public MemorySegment allocate(long lengthBytes) {
      return segment;
    }
  }

  private final int threads;
  private final LatencyHistogram[] histograms = new LatencyHistogram[STRIPES];
  private AsyncFabricService<Slot> service;

  // Set by prepare, read by the point's threads (started after it, so they see it).
  private Direction direction;
  private Slot[] contexts;
  private List<Advertisement> targets;
  private boolean checksum;
  private Thread[] running = new Thread[0];

  private volatile boolean measuring;
  private volatile boolean stopping;
  private volatile long limit = Long.MAX_VALUE;
  private final AtomicLong completed = new AtomicLong();
  private final AtomicLong failed = new AtomicLong();
  private final AtomicLong outstanding = new AtomicLong();
  private final AtomicLong total = new AtomicLong();

  /**
   * Transfers begun since measuring began: in counted mode, no thread begins one past the limit.
   */
  private final AtomicLong begun = new AtomicLong();

  // Guarded by this.
  private boolean finished;
  private long measureStartNanos;
  private long measureEndNanos;
  private String firstError;

  /**
   * A loop of {@code threads} virtual threads.
   *
   * @param threads virtual threads, each with one transfer outstanding at a time, at least 1
   */
  VirtualThreadLoop(int threads) {
    if (threads < 1) {
      throw new IllegalArgumentException("threads must be at least 1, not " + threads);
    }
    this.threads = threads;
    for (int i = 0; i < STRIPES; i++) {
      histograms[i] = new LatencyHistogram();
    }
  }

  /**
   * Names the service to submit to.
   *
   * @param value the running service
   */
  synchronized void bind(AsyncFabricService<Slot> value) {
    this.service = value;
  }

  @Override
  public synchronized void prepare(
      Direction direction, MemorySegment operand, List<Advertisement> targets, boolean checksum) {
    if (outstanding.get() != 0) {
      throw new IllegalStateException(outstanding.get() + " transfers are still outstanding");
    }
    this.direction = direction;
    this.targets = List.copyOf(targets);
    this.checksum = checksum;
    contexts = new Slot[threads];
    for (int i = 0; i < threads; i++) {
      contexts[i] = new Slot(operand);
    }
    for (LatencyHistogram histogram : histograms) {
      synchronized (histogram) {
        histogram.reset();
      }
    }
    measuring = false;
    stopping = false;
    limit = Long.MAX_VALUE;
    completed.set(0);
    failed.set(0);
    total.set(0);
    begun.set(0);
    finished = false;
    measureStartNanos = 0;
    measureEndNanos = 0;
    firstError = null;
  }

  @Override
  public synchronized void start() {
    running = new Thread[threads];
    for (int i = 0; i < threads; i++) {
      int index = i;
      running[i] = Thread.ofVirtual().name("dma-bench-vt-" + i).start(() -> serve(index));
    }
  }

  /** One thread's loop: build, transfer, block, check, repeat, until the point stops. */
  private void serve(int index) {
    int target = index % targets.size();
    Advertisement ad = targets.get(target);
    Slot context = contexts[index];
    LatencyHistogram histogram = histograms[index % STRIPES];
    while (!stopping) {
      if (measuring && limit != Long.MAX_VALUE && begun.incrementAndGet() > limit) {
        return; // the transfers already begun cover the rest of a counted point
      }
      TransferRequest<Slot> request = TransferRequest.of(target + 1, ad, direction, context);
      if (checksum) {
        request = request.withChecksum(Checksum.CRC32C);
      }
      outstanding.incrementAndGet();
      long began = System.nanoTime();
      String error = null;
      boolean closed = false;
      try {
        Completion<Slot> done = service.transfer(request).join();
        if (!done.outcome().isDone()) {
          error = "a future completed with a failed outcome: " + done.outcome();
        }
      } catch (CompletionException e) {
        Throwable cause = e.getCause() != null ? e.getCause() : e;
        error = String.valueOf(cause.getMessage());
        closed = cause instanceof DmaException dma && dma.reason() == DmaException.Reason.CLOSED;
      }
      long ended = System.nanoTime();
      outstanding.decrementAndGet();
      total.incrementAndGet();
      if (error != null) {
        fail(error, closed);
      }
      if (measuring) {
        long count;
        if (error == null) {
          synchronized (histogram) {
            histogram.record(ended - began);
          }
          count = completed.incrementAndGet() + failed.get();
        } else {
          count = failed.incrementAndGet() + completed.get();
        }
        if (count >= limit) {
          finish(ended);
        }
      }
    }
  }

  private synchronized void fail(String error, boolean closed) {
    if (firstError == null) {
      firstError = closed ? "the fabric worker is gone: " + error : error;
    }
    if (closed) {
      // As the pipelined loop does when a submit is refused: nothing more will complete.
      stopping = true;
      finished = true;
      notifyAll();
    }
  }

  private synchronized void finish(long now) {
    if (measuring) {
      measuring = false;
      measureEndNanos = now;
    }
    stopping = true;
    finished = true;
    notifyAll();
  }

  @Override
  public synchronized void beginMeasure(long transfers) {
    for (LatencyHistogram histogram : histograms) {
      synchronized (histogram) {
        histogram.reset();
      }
    }
    completed.set(0);
    failed.set(0);
    begun.set(outstanding.get()); // in flight now: measured when they complete
    limit = transfers;
    measureStartNanos = System.nanoTime();
    measuring = true;
  }

  @Override
  public void stop() {
    finish(System.nanoTime());
  }

  @Override
  public boolean awaitDrained(long timeoutNanos) throws InterruptedException {
    long deadline = System.nanoTime() + timeoutNanos;
    Thread[] each;
    synchronized (this) {
      each = running;
    }
    for (Thread thread : each) {
      long left = deadline - System.nanoTime();
      if (left <= 0 || !thread.join(java.time.Duration.ofNanos(left))) {
        return false;
      }
    }
    return outstanding.get() == 0;
  }

  @Override
  public synchronized boolean awaitFinished(long timeoutNanos) throws InterruptedException {
    long deadline = System.nanoTime() + timeoutNanos;
    while (!finished) {
      long left = deadline - System.nanoTime();
      if (left <= 0) {
        return false;
      }
      wait(Math.max(1, TimeUnit.NANOSECONDS.toMillis(left)));
    }
    return true;
  }

  @Override
  public synchronized ClosedLoop.Snapshot snapshot() {
    return new ClosedLoop.Snapshot(
        completed.get(),
        failed.get(),
        outstanding.get(),
        total.get(),
        measureStartNanos,
        measureEndNanos,
        measuring,
        finished);
  }

  @Override
  public LatencyHistogram latencies() {
    LatencyHistogram copy = new LatencyHistogram();
    for (LatencyHistogram histogram : histograms) {
      synchronized (histogram) {
        copy.add(histogram);
      }
    }
    return copy;
  }

  @Override
  public synchronized String firstError() {
    return firstError == null ? "" : firstError;
  }
}
