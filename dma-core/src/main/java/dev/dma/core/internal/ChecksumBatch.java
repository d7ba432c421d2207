package dev.dma.core.internal;

import dev.dma.api.BatchCompleter;
import dev.dma.api.Checksums;
import dev.dma.api.Completion;
import dev.dma.api.DmaException;
import dev.dma.api.Outcome;
import dev.dma.api.TransferDone;
import dev.dma.core.ChecksumPool;
import io.opentelemetry.api.trace.Span;
import java.lang.System.Logger.Level;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import org.jspecify.annotations.Nullable;

/**
 * The reaped transfers that want a checksum, held by the worker until it hands them to the checksum
 * pool as one job: their CRC and completion run on the pool so hashing never stalls posting and
 * reaping. The worker asks at the end of each pass ({@link #flushIfDue}, {@link #shouldFlush}).
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
  private static final System.Logger LOG = System.getLogger(ChecksumBatch.class.getName());
  private static final String CHECKSUM_FAILED = "checksum failed";

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

  /**
   * Whether to hand the accumulated checksummed completions to the pool this pass: when the batch
   * is full, when nothing moved, or when the worker is about to park.
   *
   * <p>{@code aboutToPark} must never be dropped: the worker then blocks on the channel with
   * nothing to post or reap, so a batch held back here would wait for an unrelated message,
   * stranding every client in it until then.
   *
   * @param batched checksummed completions waiting
   * @param posted ops posted this pass
   * @param reapedAny whether anything was reaped this pass
   * @param aboutToPark whether nothing is pending or in flight
   * @return whether to flush
   */
  static boolean shouldFlush(int batched, int posted, boolean reapedAny, boolean aboutToPark) {
    return 0 < batched
        && (batched >= FabricWorker.TARGET_COMPLETIONS
            || (0 == posted && !reapedAny)
            || aboutToPark);
  }

  /**
   * The worker's flush step: {@link #flush} when {@link #shouldFlush} says so.
   *
   * @return the transfers handed to the pool, 0 when none
   */
  int flushIfDue(int posted, boolean reapedAny, boolean aboutToPark) {
    int batched = batch.size();
    if (!shouldFlush(batched, posted, reapedAny, aboutToPark)) {
      return 0;
    }
    flush();
    return batched;
  }

  /**
   * Hands the transfers held to the pool as one job; the job owns that list from now on. Everything
   * the job needs is allocated before it is queued, and the worker lets go of the list only once
   * the job is queued: a failure to allocate leaves the transfers here, for the next flush or
   * {@link #drainInto}, never in neither place or both.
   */
  void flush() {
    List<Checksummed<T>> flushed = batch;
    List<Checksummed<T>> next = new ArrayList<>();
    pool.submit(new ChecksumJob<>(flushed, new ArrayList<>(flushed.size()), completer));
    batch = next;
  }

  /**
   * Completes the transfers held inline, into {@code leftover}: at shutdown, when the pool may be
   * tearing down alongside. Never throws: a transfer whose checksum step throws (anything, a fatal
   * error included) fails with it, and the rest are added all the same, since the worker delivers
   * {@code leftover} next.
   */
  void drainInto(List<Completion<T>> leftover) {
    for (Checksummed<T> checksummed : batch) {
      Completion<T> completion = complete(checksummed);
      if (completion != null) {
        leftover.add(completion);
      }
    }
    batch.clear();
  }

  /**
   * One transfer's completion: its checksum, or its failure. Whatever the checksum step throws (the
   * operand's arena closed under it, an error from the user's telemetry SDK in the checksum span,
   * an OutOfMemoryError or StackOverflowError) fails this transfer alone, with the throwable as the
   * cause. Returns null only when even the failure could not be built (the heap is exhausted twice
   * over); the throwable is then logged.
   */
  private static <T> @Nullable Completion<T> complete(Checksummed<T> checksummed) {
    try {
      return checksummed.toCompletion();
    } catch (Throwable failure) {
      return failed(checksummed.context(), checksummed.posts(), failure);
    }
  }

  private static <T> @Nullable Completion<T> failed(T context, int posts, Throwable failure) {
    try {
      return completion(
          context,
          posts,
          Outcome.failed(
              new DmaException(
                  DmaException.Kind.TRANSFER, "checksum failed: " + failure, 0, 0, failure)));
    } catch (Throwable again) {
      // Out of memory building the message or the exception: try once more with the least
      // allocation, so a short-lived shortage still completes the transfer.
      try {
        return completion(
            context,
            posts,
            Outcome.failed(new DmaException(DmaException.Kind.TRANSFER, CHECKSUM_FAILED)));
      } catch (Throwable stillFailing) {
        logQuietly("a checksummed transfer could not be completed, not even as failed", failure);
        return null;
      }
    }
  }

  /** The one place this class builds a Completion. */
  private static <T> Completion<T> completion(T context, int posts, Outcome outcome) {
    return new Completion<>(context, outcome, posts);
  }

  private static void logQuietly(String message, Throwable failure) {
    try {
      LOG.log(Level.ERROR, message, failure);
    } catch (Throwable ignored) {
      // Logging ran out of memory or stack too: the caller still has completions to deliver.
    }
  }

  /** A reaped op awaiting its checksummed completion on the pool. */
  private record Checksummed<T>(
      T context,
      MemorySegment operand,
      long lengthBytes,
      @Nullable DmaException error,
      int posts,
      @Nullable Span wire,
      WorkerTelemetry telemetry) {
    Completion<T> toCompletion() {
      if (error != null) {
        return completion(context, posts, Outcome.failed(error));
      }
      MemorySegment bytes =
          operand.byteSize() == lengthBytes ? operand : operand.asSlice(0, lengthBytes);
      Span span = telemetry.checksumSpan(wire, lengthBytes);
      try {
        return completion(
            context, posts, TransferDone.withChecksum(lengthBytes, Checksums.crc32c(bytes)));
      } finally {
        if (span != null) {
          span.end();
        }
      }
    }
  }

  /**
   * Hashes a batch and delivers it, on a pool thread (or inline, on whichever thread submits or
   * closes once the pool is closing).
   *
   * <p>No throwable loses a completion: a transfer whose checksum step throws fails alone (see
   * {@link #complete}), and the completer is called once with every transfer of the batch. When the
   * completer throws, the batch counts as delivered, as on the worker: it may have taken any prefix
   * of the batch, so handing any of it over again could complete a transfer twice. A non-fatal
   * throwable from the completer is logged here; a {@link VirtualMachineError} (from the completer
   * or the checksum step) is rethrown, but only once the completer has been called with the whole
   * batch, so the pool sees it with nothing left undelivered.
   *
   * @param done the completions' list, allocated with the job so the pool thread needs no room for
   *     it
   */
  private record ChecksumJob<T>(
      List<Checksummed<T>> batch, List<Completion<T>> done, BatchCompleter<T> completer)
      implements Runnable {
    @Override
    public void run() {
      VirtualMachineError fatal = null;
      for (Checksummed<T> checksummed : batch) {
        Completion<T> completion;
        try {
          completion = checksummed.toCompletion();
        } catch (Throwable failure) {
          if (failure instanceof VirtualMachineError error && fatal == null) {
            fatal = error;
          }
          completion = failed(checksummed.context(), checksummed.posts(), failure);
        }
        if (completion != null) {
          done.add(completion);
        }
      }
      try {
        if (!done.isEmpty()) {
          completer.complete(done);
        }
      } catch (Throwable hookFailure) {
        if (hookFailure instanceof VirtualMachineError error) {
          if (fatal == null) {
            fatal = error;
          }
        } else {
          logQuietly(
              "the BatchCompleter threw on a checksum-pool thread; its batch of "
                  + done.size()
                  + " counts as delivered and the pool carries on",
              hookFailure);
        }
      }
      if (fatal != null) {
        throw fatal;
      }
    }
  }
}
