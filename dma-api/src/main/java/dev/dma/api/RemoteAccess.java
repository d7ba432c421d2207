package dev.dma.api;

/**
 * What a server may do to memory a passive target exposes: read it ({@code fi_read} from the
 * server, {@code FI_REMOTE_READ}), write it ({@code FI_REMOTE_WRITE}), or both. Passed where a
 * target exposes a buffer, so a call site says {@code expose(buffer, RemoteAccess.WRITE)} rather
 * than two booleans. Immutable.
 *
 * <p>Not every provider enforces it: shm lets any local peer read and write whatever it exposes
 * (see the README's "Failure semantics"); tcp, sockets and EFA refuse an access the region was not
 * registered for.
 */
public enum RemoteAccess {
  /** The server may read the memory (it serves {@link Direction.FromPeer} transfers). */
  READ(true, false),
  /** The server may write the memory (it receives {@link Direction.ToPeer} transfers). */
  WRITE(false, true),
  /** The server may read and write the memory. */
  READ_WRITE(true, true);

  private final boolean reads;
  private final boolean writes;

  RemoteAccess(boolean reads, boolean writes) {
    this.reads = reads;
    this.writes = writes;
  }

  /**
   * Whether the server may read.
   *
   * @return {@code true} for {@link #READ} and {@link #READ_WRITE}
   */
  public boolean allowsRead() {
    return reads;
  }

  /**
   * Whether the server may write.
   *
   * @return {@code true} for {@link #WRITE} and {@link #READ_WRITE}
   */
  public boolean allowsWrite() {
    return writes;
  }
}
