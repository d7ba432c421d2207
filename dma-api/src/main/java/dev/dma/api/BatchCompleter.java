package dev.dma.api;

import java.util.List;

/**
 * The caller's hook that receives finished transfers, in non-empty batches.
 *
 * <p>Threads: it runs on the fabric worker thread (plain completions) and on checksum-pool threads
 * (checksummed completions), possibly at the same time, so anything mutable inside it must be
 * synchronized. It must be quick and must not block: time spent here stalls posting and reaping for
 * every transfer on that device. Anything it throws (an {@link Error} too) is logged and the batch
 * is considered delivered, never handed over again, since the hook may have taken any part of it;
 * it never kills the worker or a checksum-pool thread. A hook that blocks anyway does not hold
 * {@code close()} past its timeout: its pool thread is left behind.
 *
 * <p>Ownership: the list belongs to the caller of the hook and is reused after it returns; copy out
 * what must outlive the call. Each {@link Completion} and its context now belong to the hook.
 *
 * @param <T> the caller context type
 */
@FunctionalInterface
public interface BatchCompleter<T> {
  /**
   * Receives a batch of completions.
   *
   * @param batch one or more completions, valid only during this call
   */
  void complete(List<Completion<T>> batch);
}
