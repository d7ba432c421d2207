package dev.dma.api;

/**
 * One finished transfer: the caller context that was submitted, handed back, and how it ended.
 * Every submitted transfer produces exactly one, delivered to the service's {@link BatchCompleter}
 * on the fabric worker or a checksum-pool thread. Immutable.
 *
 * @param <T> the caller context type
 * @param context the context of the request, now owned by the receiver of the completion
 * @param outcome how the transfer ended
 */
public record Completion<T>(T context, Outcome outcome) {
  /**
   * Checks the outcome.
   *
   * @throws NullPointerException if {@code outcome} is null
   */
  public Completion {
    if (outcome == null) {
      throw new NullPointerException("outcome");
    }
  }
}
