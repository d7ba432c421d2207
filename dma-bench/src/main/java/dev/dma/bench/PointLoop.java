package dev.dma.bench;

import dev.dma.api.Advertisement;
import dev.dma.api.Direction;
import java.lang.foreign.MemorySegment;
import java.util.List;

/**
 * What {@link Bench} drives for one point, whichever way the transfers are kept outstanding: a
 * {@link ClosedLoop} (resubmitted from the completer, the pipelined form) or a {@link
 * VirtualThreadLoop} (one virtual thread per transfer, each blocking on its future). The
 * controlling thread calls {@link #prepare}, {@link #start}, {@link #beginMeasure}, {@link #stop}
 * and {@link #awaitDrained} in that order, once per point.
 */
interface PointLoop {
  /**
   * Sets up the next point while nothing is outstanding.
   *
   * @param direction the transfers' direction
   * @param operand the local bytes, shared by every transfer
   * @param targets the targets' advertisements; transfer {@code i} goes to target {@code i %
   *     targets.size()} (client id {@code 1 + i % targets.size()})
   * @param checksum whether to ask for CRC-32C
   */
  void prepare(
      Direction direction, MemorySegment operand, List<Advertisement> targets, boolean checksum);

  /** Submits the first transfers (the warm-up starts). */
  void start();

  /**
   * Starts counting: completions from now on are measured, up to {@code transfers} of them.
   *
   * @param transfers how many completions to measure, or {@link Long#MAX_VALUE} until {@link
   *     #stop()}
   */
  void beginMeasure(long transfers);

  /** Ends the measured interval now (if still running) and stops submitting. */
  void stop();

  /**
   * Waits until every submitted transfer has completed.
   *
   * @param timeoutNanos how long to wait
   * @return whether nothing is outstanding
   * @throws InterruptedException if interrupted
   */
  boolean awaitDrained(long timeoutNanos) throws InterruptedException;

  /**
   * Waits until the measured interval has ended or the timeout passes.
   *
   * @param timeoutNanos how long to wait
   * @return whether it ended
   * @throws InterruptedException if interrupted
   */
  boolean awaitFinished(long timeoutNanos) throws InterruptedException;

  /**
   * The counters now.
   *
   * @return a consistent copy
   */
  ClosedLoop.Snapshot snapshot();

  /**
   * A copy of the measured latencies.
   *
   * @return a new histogram
   */
  LatencyHistogram latencies();

  /**
   * The first failure's message in this point, warm-up included.
   *
   * @return the message, or empty
   */
  String firstError();
}
