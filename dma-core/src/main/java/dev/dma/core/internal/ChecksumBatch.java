package dev.dma.core.internal;

import dev.dma.api.BatchCompleter;
import dev.dma.api.Checksums;
import dev.dma.api.Completion;
import dev.dma.api.DmaException;
import dev.dma.api.Outcome;
import dev.dma.api.TransferDone;
import dev.dma.core.ChecksumPool;
import io.opentelemetry.api.trace.Span;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;

/**
 * The reaped transfers that want a checksum, held by the worker until it hands them to the checksum
 * pool as one job: their CRC and completion run on the pool so hashing never stalls posting and
 * reaping. When to flush is the worker's decision ({@link FabricWorker#shouldFlushChecksums}).
 *
 * <p>Allocation: a {@code Checksummed} record per transfer added; per flush a new batch list, the
 * job and the pool queue's node, and on the pool thread the job's list of completions plus each
 * transfer's Completion, its TransferDone and, when fewer bytes moved than the operand holds, a
 * slice of the operand.
 *
 * <p>Threads: {@link #add}, {@link #size}, {@link #flush} and {@link #drainInto} run on the worker
 * thread; the jobs run on pool threads and own their batch outright.
 *
 * @param <T> the caller context type
 */
final class ChecksumBatch<T> {
  private final ChecksumPool pool;
  private final BatchCompleter<T> completer;
  private final WorkerTelemetry telemetry;
  private List<Checksummed<T>> batch = new ArrayList<>();

  ChecksumBatch(ChecksumPool pool, BatchCompleter<T> completer, WorkerTelemetry telemetry) {
    this.pool = pool;
    this.completer = completer;
    this.telemetry = telemetry;
  }

  /**
   * Holds a reaped transfer for the next flush.
   *
   * @param error its failure (delivered as is, with no checksum), or null for a success
   * @param posts how many times it was posted, for its completion
   * @param wire its {@code dma.wire} span, the parent of {@code dma.checksum}, or null
   */
  void add(
      T context,
      MemorySegment operand,
      long lengthBytes,
      DmaException error,
      int posts,
      Span wire) {
    batch.add(new Checksummed<>(context, operand, lengthBytes, error, posts, wire, telemetry));
  }

  /** The transfers held. */
  int size() {
    return batch.size();
  }

  /** Hands the transfers held to the pool as one job; the job owns that list from now on. */
  void flush() {
    List<Checksummed<T>> flushed = batch;
    batch = new ArrayList<>();
    pool.submit(new ChecksumJob<>(flushed, completer));
  }

  /**
   * Completes the transfers held inline, into {@code leftover}: at shutdown, when the pool may be
   * tearing down alongside.
   */
  void drainInto(List<Completion<T>> leftover) {
    for (Checksummed<T> checksummed : batch) {
      leftover.add(checksummed.toCompletion());
    }
    batch.clear();
  }

  /** A reaped op awaiting its checksummed completion on the pool. */
  private record Checksummed<T>(
      T context,
      MemorySegment operand,
      long lengthBytes,
      DmaException error,
      int posts,
      Span wire,
      WorkerTelemetry telemetry) {
    Completion<T> toCompletion() {
      if (error != null) {
        return new Completion<>(context, Outcome.failed(error), posts);
      }
      MemorySegment bytes =
          operand.byteSize() == lengthBytes ? operand : operand.asSlice(0, lengthBytes);
      Span span = telemetry.checksumSpan(wire, lengthBytes);
      try {
        return new Completion<>(
            context, TransferDone.withChecksum(lengthBytes, Checksums.crc32c(bytes)), posts);
      } finally {
        if (span != null) {
          span.end();
        }
      }
    }
  }

  /** Hashes a batch and delivers it, on a pool thread. */
  private record ChecksumJob<T>(List<Checksummed<T>> batch, BatchCompleter<T> completer)
      implements Runnable {
    @Override
    public void run() {
      List<Completion<T>> done = new ArrayList<>(batch.size());
      for (Checksummed<T> checksummed : batch) {
        Completion<T> completion;
        try {
          completion = checksummed.toCompletion();
        } catch (RuntimeException unreadable) {
          // For example the operand's arena was closed before completion: this transfer fails,
          // the rest of the batch is unaffected.
          completion =
              new Completion<>(
                  checksummed.context(),
                  Outcome.failed(
                      new DmaException(
                          DmaException.Kind.TRANSFER,
                          "checksum failed: " + unreadable,
                          0,
                          0,
                          unreadable)),
                  checksummed.posts());
        }
        done.add(completion);
      }
      completer.complete(done);
    }
  }
}
