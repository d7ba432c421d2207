package dev.dma.api;

/**
 * A client's endpoint as a service knows it: what {@code addPeer} returns, to carry in every
 * request to that client ({@link TransferRequest#write(Peer, Advertisement, Operands)}, {@link
 * TransferRequest.Builder#peer(Peer)}).
 *
 * <p>Why carry it: a request that names its client only by id and address makes the service's
 * worker look the client up on every post, and with many thousands of clients that lookup is a
 * cache miss each time. A request carrying the peer its service issued is posted without one; the
 * application keeps the peer beside the client's advertisement, one object per client.
 *
 * <p>A peer is only a shortcut: a request carrying one means what the same request without it
 * means. A service posts it without a lookup once it has matched the peer to the client's current
 * address: {@code addPeer} does that at once, and any other request carrying the peer on its first
 * post. After the client moved to another address, was removed, or the service reset its endpoint,
 * the service looks the client up as it does for a request without a peer, with the same outcomes
 * (a transfer to an address the client has since left fails as stale), and matches the peer again
 * when the lookup finds the client on its address. The shortcut is kept for client ids that are
 * small and dense (below 2^20, and below twice the number of clients plus 1,024, as ids counted up
 * from 0 or 1 are); other ids work the same, through the lookup.
 *
 * <p>Implemented by the services; applications do not implement it (a request carrying any other
 * implementation is looked up as one without a peer). Immutable for its holders: any thread may
 * keep it and build requests with it.
 */
public interface Peer {
  /**
   * The client this peer was added for.
   *
   * @return the client id
   */
  long clientId();

  /**
   * A copy of the address this peer was added with.
   *
   * @return the fabric address bytes
   */
  byte[] address();

  /**
   * Whether {@code address} is this peer's address, byte for byte; allocates nothing.
   *
   * @param address an address
   * @return true when equal
   */
  boolean hasAddress(byte[] address);
}
