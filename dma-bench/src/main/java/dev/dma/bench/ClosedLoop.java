package dev.dma.bench;

import dev.dma.api.Advertisement;
import dev.dma.api.BatchCompleter;
import dev.dma.api.Checksum;
import dev.dma.api.Completion;
import dev.dma.api.Direction;
import dev.dma.api.Operands;
import dev.dma.api.TransferRequest;
import dev.dma.core.FabricService;
import dev.dma.core.FabricServiceGroup;
import java.lang.foreign.MemorySegment;
import java.util.List;
import java.util.function.Predicate;

/**
 * Keeps {@code window} transfers outstanding on one {@link FabricService}: every completion is
 * timed and resubmitted from inside the {@link BatchCompleter}, on the worker thread, so the loop
 * costs no hand-off between threads (submit is allowed from any thread, the worker's own included).
 *
 * <p>Per transfer nothing is allocated here: each of the {@code window} slots owns one prebuilt
 * {@link TransferRequest} (immutable, so it can be submitted again once its completion came back),
 * its operand is a slice of one registered buffer, and latencies go into a preallocated {@link
 * LatencyHistogram}. The clock is read once per batch, which stamps both the latency of every
 * completion in it and the submit time of its resubmission.
 *
 * <p>Threads: the completer runs on the fabric worker and, with checksums, on checksum-pool threads
 * at the same time, so all state is guarded by this object's monitor (one uncontended lock per
 * batch, not per transfer). The controlling thread calls {@link #prepare}, {@link #start}, {@link
 * #beginMeasure}, {@link #stop} and {@link #awaitDrained} in that order, once per point.
 */
public final class ClosedLoop implements BatchCompleter<ClosedLoop.Slot>, PointLoop {

  /** One outstanding transfer's context: its operand, its request and when it was submitted. */
  public static final class Slot implements Operands {
    private MemorySegment segment;
    private TransferRequest<Slot> request;
    private long submitNanos;

    Slot() {}

    /**
     * The bytes a write sends.
     *
     * @return the shared operand
     */
    @Override
    public MemorySegment source() {
      return segment;
    }

    /**
     * Where a read lands.
     *
     * @param lengthBytes the read's length, never more than the operand
     * @return the shared operand
     */
    @Override
    public MemorySegment allocate(long lengthBytes) {
      return segment;
    }
  }

  /**
   * What the controller sees while a point runs.
   *
   * @param completed transfers completed successfully in the measured interval
   * @param failed transfers failed in the measured interval
   * @param outstanding transfers submitted and not yet completed
   * @param total completions seen in this point, warm-up included (the stall watchdog's pulse)
   * @param measureStartNanos when measuring began, or 0
   * @param measureEndNanos when measuring ended, or 0
   * @param measuring whether completions are being measured now
   * @param finished whether the point has ended (limit reached, stopped, or the worker gone)
   */
  public record Snapshot(
      long completed,
      long failed,
      long outstanding,
      long total,
      long measureStartNanos,
      long measureEndNanos,
      boolean measuring,
      boolean finished) {}

  private final Slot[] slots;
  private final LatencyHistogram histogram = new LatencyHistogram();
  private Predicate<TransferRequest<Slot>> service;

  // Guarded by this.
  private boolean measuring;
  private boolean stopping;
  private boolean finished;
  private long limit = Long.MAX_VALUE;
  private long completed;
  private long failed;
  private long outstanding;
  private long total;
  private long measureStartNanos;
  private long measureEndNanos;
  private String firstError;

  /**
   * A loop of {@code window} slots.
   *
   * @param window transfers to keep outstanding, at least 1
   */
  public ClosedLoop(int window) {
    if (window < 1) {
      throw new IllegalArgumentException("window must be at least 1, not " + window);
    }
    slots = new Slot[window];
    for (int i = 0; i < window; i++) {
      slots[i] = new Slot();
    }
  }

  /**
   * Names the service to resubmit to (it needs this completer before it starts, hence not a
   * constructor argument).
   *
   * @param value the running service
   */
  public synchronized void bind(FabricService<Slot> value) {
    this.service = value::submit;
  }

  /**
   * Names the group of services to resubmit to, as {@link #bind(FabricService)}.
   *
   * @param value the running group
   */
  public synchronized void bind(FabricServiceGroup<Slot> value) {
    this.service = value::submit;
  }

  /**
   * Names the bare endpoint to resubmit to ({@code run --endpoint-only}), as {@link
   * #bind(FabricService)}.
   *
   * @param value the open driver
   */
  synchronized void bind(EndpointDriver value) {
    this.service = value::submit;
  }

  /**
   * Sets up the next point while nothing is outstanding: slot {@code i} goes to target {@code i %
   * targets.size()} (client id {@code 1 + i % targets.size()}).
   *
   * @param direction the transfers' direction
   * @param operand the local bytes (the registered buffer's first {@code size} bytes), shared by
   *     every slot as the C anchor shares its one buffer
   * @param targets the targets' advertisements
   * @param checksum whether to ask for CRC-32C
   */
  public synchronized void prepare(
      Direction direction, MemorySegment operand, List<Advertisement> targets, boolean checksum) {
    if (outstanding != 0) {
      throw new IllegalStateException(outstanding + " transfers are still outstanding");
    }
    for (int i = 0; i < slots.length; i++) {
      Slot slot = slots[i];
      int target = i % targets.size();
      slot.segment = operand;
      slot.request =
          TransferRequest.of(target + 1, targets.get(target), direction, slot)
              .withChecksum(checksum ? Checksum.CRC32C : Checksum.NONE);
    }
    reset();
  }

  /**
   * Resets the counters for another run of the same point (benchmarks repeat one point).
   *
   * @throws IllegalStateException while transfers are outstanding
   */
  public synchronized void prepareAgain() {
    if (outstanding != 0) {
      throw new IllegalStateException(outstanding + " transfers are still outstanding");
    }
    reset();
  }

  private void reset() {
    histogram.reset();
    measuring = false;
    stopping = false;
    finished = false;
    limit = Long.MAX_VALUE;
    completed = 0;
    failed = 0;
    total = 0;
    measureStartNanos = 0;
    measureEndNanos = 0;
    firstError = null;
  }

  /** Submits every slot once (the warm-up starts). */
  public void start() {
    for (Slot slot : slots) {
      synchronized (this) {
        outstanding++;
        slot.submitNanos = System.nanoTime();
        submit(slot);
      }
    }
  }

  /**
   * Starts counting: completions from now on are measured, up to {@code transfers} of them.
   *
   * @param transfers how many completions to measure, or {@link Long#MAX_VALUE} until {@link
   *     #stop()}
   */
  public synchronized void beginMeasure(long transfers) {
    histogram.reset();
    completed = 0;
    failed = 0;
    limit = transfers;
    measuring = true;
    measureStartNanos = System.nanoTime();
  }

  /** Ends the measured interval now (if still running) and stops resubmitting. */
  public synchronized void stop() {
    if (measuring) {
      measuring = false;
      measureEndNanos = System.nanoTime();
    }
    stopping = true;
    finished = true;
    notifyAll();
  }

  /**
   * Waits until every submitted transfer has completed.
   *
   * @param timeoutNanos how long to wait
   * @return whether nothing is outstanding
   * @throws InterruptedException if interrupted
   */
  public synchronized boolean awaitDrained(long timeoutNanos) throws InterruptedException {
    long deadline = System.nanoTime() + timeoutNanos;
    while (outstanding > 0) {
      long left = deadline - System.nanoTime();
      if (left <= 0) {
        return false;
      }
      wait(Math.max(1, left / 1_000_000));
    }
    return true;
  }

  /**
   * Waits until the measured interval has ended (the transfer limit was reached or {@link #stop()}
   * was called), or the timeout passes.
   *
   * @param timeoutNanos how long to wait
   * @return whether it ended
   * @throws InterruptedException if interrupted
   */
  public synchronized boolean awaitFinished(long timeoutNanos) throws InterruptedException {
    long deadline = System.nanoTime() + timeoutNanos;
    while (!finished) {
      long left = deadline - System.nanoTime();
      if (left <= 0) {
        return false;
      }
      wait(Math.max(1, left / 1_000_000));
    }
    return true;
  }

  /**
   * The counters now.
   *
   * @return a consistent copy
   */
  public synchronized Snapshot snapshot() {
    return new Snapshot(
        completed,
        failed,
        outstanding,
        total,
        measureStartNanos,
        measureEndNanos,
        measuring,
        finished);
  }

  /**
   * A copy of the measured latencies.
   *
   * @return a new histogram
   */
  public synchronized LatencyHistogram latencies() {
    LatencyHistogram copy = new LatencyHistogram();
    copy.add(histogram);
    return copy;
  }

  /**
   * The first failure's message in this point, warm-up included.
   *
   * @return the message, or empty
   */
  public synchronized String firstError() {
    return firstError == null ? "" : firstError;
  }

  /**
   * Times each completion, counts it if measuring, and resubmits its slot unless the point is over.
   * Runs on the worker (and on checksum-pool threads with {@code --checksum}).
   *
   * @param batch completions, valid only during this call
   */
  @Override
  public synchronized void complete(List<Completion<Slot>> batch) {
    long now = System.nanoTime();
    // An index loop: no iterator on the per-transfer path.
    for (int i = 0, n = batch.size(); i < n; i++) {
      Completion<Slot> completion = batch.get(i);
      Slot slot = completion.context();
      outstanding--;
      total++;
      boolean ok = completion.outcome().isDone();
      if (!ok && firstError == null) {
        firstError = completion.outcome().error().getMessage();
      }
      if (measuring) {
        if (ok) {
          completed++;
          histogram.record(now - slot.submitNanos);
        } else {
          failed++;
        }
        if (completed + failed >= limit) {
          measuring = false;
          stopping = true;
          finished = true;
          measureEndNanos = now;
        }
      }
      // In counted mode stop topping up once the outstanding transfers cover the rest.
      if (!stopping && (limit == Long.MAX_VALUE || completed + failed + outstanding < limit)) {
        outstanding++;
        slot.submitNanos = now;
        submit(slot);
      }
    }
    if (outstanding == 0 || finished) {
      notifyAll();
    }
  }

  /** Submits under the lock; a refused submit (the worker is gone) counts as a failure. */
  private void submit(Slot slot) {
    if (!service.test(slot.request)) {
      outstanding--;
      if (measuring) {
        failed++;
      }
      if (firstError == null) {
        firstError = "the fabric worker is gone";
      }
      stopping = true;
      finished = true;
      notifyAll();
    }
  }
}
