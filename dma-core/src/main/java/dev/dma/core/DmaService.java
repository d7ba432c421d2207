package dev.dma.core;

import dev.dma.api.Operands;
import dev.dma.api.Peer;
import dev.dma.api.TransferRequest;
import dev.dma.spi.EndpointInfo;
import java.lang.foreign.MemorySegment;
import java.util.List;

/**
 * What a server submits its transfers to, whether one device carries them ({@link FabricService})
 * or several ({@link FabricServiceGroup}): code written against this interface runs unchanged on
 * either, and {@link AsyncFabricService} puts futures over either without an adapter.
 *
 * <p>Every accepted transfer produces exactly one {@link dev.dma.api.Completion}, delivered to the
 * completer the service was built with. Threads: every method is thread-safe; {@link #register},
 * {@link #addPeer} and {@link #close} block until the workers answer, and refuse with an {@link
 * IllegalStateException} to run on a fabric worker thread (from a completer). Ownership: the
 * service owns its endpoints and workers; {@link #close()} releases them, and a request's context
 * belongs to the service from an accepted offer until its completion.
 *
 * @param <T> the caller context type
 */
public interface DmaService<T extends Operands> extends AutoCloseable {

  /** What {@link #offer} says about a transfer. */
  enum Offer {
    /** Queued; its completion will come. The request's context belongs to the service. */
    ACCEPTED,
    /**
     * Refused: {@code max_pending} transfers beyond the in-flight cap are already outstanding
     * (accepted, not yet completed; over a group, on every device). The request stays the caller's;
     * retry once completions have come, or shed load.
     */
    FULL,
    /**
     * Refused: the service is closed or its worker is gone (over a group, every device's). The
     * request stays the caller's.
     */
    CLOSED
  }

  /**
   * Submits a transfer without waiting for backpressure, or says why not. On {@link Offer#ACCEPTED}
   * the request's context belongs to the service until its completion; otherwise it stays the
   * caller's.
   *
   * @param request the transfer
   * @return whether it was accepted, and if not, why
   */
  Offer offer(TransferRequest<T> request);

  /**
   * Submits a transfer as {@link #offer} does, for callers that need only a yes or no.
   *
   * @param request the transfer
   * @return {@code true} when accepted (exactly one completion follows); {@code false} when it was
   *     refused, full or closed, and the request, context included, stays the caller's
   */
  default boolean submit(TransferRequest<T> request) {
    return offer(request) == Offer.ACCEPTED;
  }

  /**
   * Pins native memory in the registration cache of every device, so operands inside it are cache
   * hits. Blocks until every worker registered it.
   *
   * @param segment native memory, which must stay alive until the region is closed and every
   *     transfer inside it completed
   * @return the region; close it before freeing the memory
   * @throws dev.dma.api.DmaException as {@link FabricService#register}
   */
  MemoryRegion register(MemorySegment segment);

  /**
   * Inserts a client's address on every device ahead of any transfer and returns the client's
   * {@link Peer}, which requests carry to be posted without a lookup. Blocks until every worker
   * answered.
   *
   * @param clientId the client
   * @param address its fabric address
   * @return the client's peer, for its requests
   * @throws dev.dma.api.DmaException as {@link FabricService#addPeer(long, byte[])}
   */
  Peer addPeer(long clientId, byte[] address);

  /**
   * Releases a client's peer entry on every device once every transfer it already submitted there
   * completes; best effort and fire-and-forget.
   *
   * @param clientId the client
   */
  void removePeer(long clientId);

  /**
   * Transfers submitted and not yet completed, summed over the devices: a relaxed reading.
   *
   * @return the count
   */
  long outstanding();

  /**
   * Every device's current fabric address, in the order of {@link #devices()}: one for a single
   * service. A client's passive target inserts all of them on fabrics whose targets must know their
   * initiator (efa-direct).
   *
   * @return fresh copies
   */
  List<byte[]> localAddresses();

  /**
   * The devices transfers run on, in the order of {@link #localAddresses()} (a name may repeat):
   * for a single service the one it pinned ({@code interfaces[0]}), or its provider's name when
   * none was configured.
   *
   * @return the names
   */
  List<String> devices();

  /**
   * What the (first) device's endpoint turned out to be.
   *
   * @return its description, captured at start
   */
  EndpointInfo endpointInfo();

  /**
   * Stops accepting transfers, lets posted ones complete within {@code close_timeout}, fails the
   * rest, and closes every endpoint and worker. Always returns; idempotent.
   */
  @Override
  void close();
}
