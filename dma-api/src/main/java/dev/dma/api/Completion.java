package dev.dma.api;

/**
 * One finished transfer: the caller context that was submitted, handed back, and how it ended.
 * Every submitted transfer produces exactly one, delivered to the service's {@link BatchCompleter}
 * on the fabric worker or a checksum-pool thread. Immutable.
 *
 * <p>Once a completion is delivered, nothing in dma or its provider reads or writes the context's
 * operand again: the receiver may reuse or free it, whatever the outcome. What a failure means for
 * the peer's memory is {@link DmaException#targetMemory()}.
 *
 * @param <T> the caller context type
 * @param context the context of the request, now owned by the receiver of the completion
 * @param outcome how the transfer ended
 * @param posts how many times the transfer was handed to the provider: 0 when it was refused before
 *     posting (at intake, by backpressure, a dead peer, or a close), 1 normally, more when it was
 *     posted again after a lost connection or an endpoint reset ({@link
 *     TransferRequest#retryWrite()} says when a write may be); a striped transfer counts each
 *     chunk's posts
 * @param chunks how many chunks the transfer was split into: 1 when it went whole to one endpoint
 *     (every transfer of a {@code FabricService}, and a group's below its striping threshold), the
 *     number of page-aligned slices when a {@code FabricServiceGroup} striped it over its devices
 *     (also when it was then refused at intake, with nothing posted: {@code posts} says that)
 * @param devices on how many different devices (endpoints) it was posted: 0 when never posted, 1
 *     for every transfer of a {@code FabricService}, and more when a {@code FabricServiceGroup}
 *     striped it or posted it again on a healthy device after its first device failed it (rail
 *     failover); {@code posts} then counts the posts on every device
 */
public record Completion<T>(T context, Outcome outcome, int posts, int chunks, int devices) {
  /**
   * Checks the outcome and the counts.
   *
   * @throws NullPointerException if {@code outcome} is null
   * @throws IllegalArgumentException if {@code posts} or {@code devices} is negative, {@code
   *     chunks} below 1, or {@code devices} above {@code posts}
   */
  public Completion {
    if (outcome == null) {
      throw new NullPointerException("outcome");
    }
    if (posts < 0) {
      throw new IllegalArgumentException("posts must not be negative, not " + posts);
    }
    if (chunks < 1) {
      throw new IllegalArgumentException("chunks must be at least 1, not " + chunks);
    }
    if (devices < 0 || devices > posts) {
      throw new IllegalArgumentException(
          "devices must be between 0 and posts (" + posts + "), not " + devices);
    }
  }

  /**
   * A completion posted on at most one device: {@code devices} is 1 when it was posted, else 0.
   *
   * @param context the context of the request
   * @param outcome how the transfer ended
   * @param posts how many times it was handed to the provider
   * @param chunks how many chunks it was split into
   */
  public Completion(T context, Outcome outcome, int posts, int chunks) {
    this(context, outcome, posts, chunks, posts > 0 ? 1 : 0);
  }

  /**
   * A completion of a transfer that was not striped: one chunk.
   *
   * @param context the context of the request
   * @param outcome how the transfer ended
   * @param posts how many times it was handed to the provider
   */
  public Completion(T context, Outcome outcome, int posts) {
    this(context, outcome, posts, 1);
  }

  /**
   * Whether a {@code FabricServiceGroup} split the transfer over several devices.
   *
   * @return {@code chunks() > 1}
   */
  public boolean striped() {
    return chunks > 1;
  }

  /**
   * A completion as a test double or an adapter builds it, with no post count of its own: 1 for a
   * success, 0 for a failure; one chunk.
   *
   * @param context the context of the request
   * @param outcome how the transfer ended
   */
  public Completion(T context, Outcome outcome) {
    this(context, outcome, outcome != null && outcome.isDone() ? 1 : 0);
  }
}
