package dev.dma.core.internal;

import dev.dma.api.DmaException;
import dev.dma.api.MemoryKind;
import dev.dma.core.internal.peers.BoundPeer;
import dev.dma.core.internal.peers.PeerTable;
import dev.dma.core.internal.regions.LocalRegions;

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
   * @param kind the memory's kind, handed to the provider's {@code register}
   * @param reply answered with {@code null} on success
   */
  public record Pin(long base, long lengthBytes, MemoryKind kind, Reply<Void> reply) {}

  /**
   * Drop every client incarnation the worker marked dead, so each client is judged afresh by its
   * next transfer: sent by a {@code FabricServiceGroup} for a device it paused, before each probe
   * and when the device comes back, because what such a device's failures said about its clients
   * was the device's fault. A client that really is gone is marked again by its next deadline.
   */
  public enum ForgetDeadPeers {
    /** The one message. */
    INSTANCE
  }

  /**
   * Carries out a control message on the worker thread, in its place among the transfers. The
   * caller of a command with a reply is blocked on it, so the reply is answered even when the
   * command fails.
   *
   * @param message a command
   * @param dead the worker's dead incarnations: an added or removed client's mark is dropped
   * @param peers the worker's peer table
   * @param regions the worker's registration cache
   * @param clients the worker's clients with ops outstanding, whose removal waits for them
   */
  static void apply(
      Object message,
      DeadPeers<?> dead,
      PeerTable peers,
      LocalRegions regions,
      ClientMap<Client> clients) {
    switch (message) {
      case AddPeer add -> {
        // The application says the peer is back (or new): its transfers are posted again.
        dead.forget(add.peer().clientId());
        try {
          peers.advertise(add.peer());
          add.reply().send(null);
        } catch (DmaException error) {
          add.reply().fail(error);
        }
      }
      case RemovePeer remove -> {
        dead.forget(remove.clientId());
        // Released now, or once the client's last op finishes (see FabricWorker.clients).
        Client client = clients.get(remove.clientId());
        if (client == null || client.outstanding == 0) {
          peers.release(remove.clientId());
        } else {
          client.removalPending = true;
        }
      }
      case ForgetDeadPeers forget -> dead.forgetAll();
      case Pin pin -> {
        try {
          regions.pin(pin.base(), pin.lengthBytes(), pin.kind());
          pin.reply().send(null);
        } catch (DmaException error) {
          pin.reply().fail(error);
        }
      }
      default -> throw new IllegalStateException("unknown worker message " + message);
    }
  }
}
