package dev.dma.core.internal;

import dev.dma.core.internal.peers.BoundPeer;

/**
 * Control messages to the fabric worker, queued on the same {@link WorkerChannel} as transfers so
 * they keep FIFO order with them.
 */
public final class Commands {
  private Commands() {}

  /**
   * Insert a client's peer address ahead of any transfer, so a bad address fails the hello, and
   * issue the peer its requests carry.
   *
   * @param peer the client, its address, and where the worker records its handle
   * @param reply answered with {@code null} on success
   */
  public record AddPeer(BoundPeer peer, Reply<Void> reply) {}

  /**
   * Release a client's peer once its outstanding operations drain.
   *
   * @param clientId the client
   */
  public record RemovePeer(long clientId) {}

  /**
   * Pin memory in the registration cache (behind {@code FabricService.register}).
   *
   * @param base the first byte
   * @param lengthBytes the length
   * @param reply answered with {@code null} on success
   */
  public record Pin(long base, long lengthBytes, Reply<Void> reply) {}
}
