package dev.dma.core.internal.peers;

import dev.dma.api.Peer;
import java.util.Arrays;
import java.util.HexFormat;

/**
 * The {@link Peer} a service's {@code addPeer} returns: a client's id and a private copy of its
 * address, neither of which ever changes. What makes it fast is its identity: a {@link PeerTable}
 * that vouches for it remembers the object, and a post compares the request's peer with that by
 * reference, without reading it (see {@link PeerTable#handle(long, byte[], Peer)}).
 *
 * <p>Immutable; any thread may read it. Only this class answers {@link #hasAddress} from bytes no
 * one else can change, which is why a table vouches for no other implementation.
 */
public final class BoundPeer implements Peer {
  private final long clientId;
  private final byte[] address;

  /**
   * A peer for a client and address.
   *
   * @param clientId the client
   * @param address its address; copied
   */
  public BoundPeer(long clientId, byte[] address) {
    this.clientId = clientId;
    this.address = address.clone();
  }

  @Override
  public long clientId() {
    return clientId;
  }

  @Override
  public byte[] address() {
    return address.clone();
  }

  @Override
  public boolean hasAddress(byte[] other) {
    return Arrays.equals(address, other);
  }

  /** The address itself, for the worker's table; never handed out. */
  byte[] addressBytes() {
    return address;
  }

  @Override
  public String toString() {
    return "Peer[clientId=" + clientId + ", address=" + HexFormat.of().formatHex(address) + "]";
  }
}
