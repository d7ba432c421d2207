package dev.dma.api;

/**
 * Which way a transfer moves bytes, seen from the server that submits it.
 *
 * <p>Immutable; share freely.
 */
public sealed interface Direction permits Direction.ToPeer, Direction.FromPeer {

  /** The one {@link ToPeer} value. */
  Direction TO_PEER = ToPeer.INSTANCE;

  /**
   * A read of {@code lengthBytes} bytes from the peer.
   *
   * @param lengthBytes how many bytes to read; not negative
   * @return the direction
   * @throws IllegalArgumentException if {@code lengthBytes} is negative
   */
  static Direction fromPeer(long lengthBytes) {
    return new FromPeer(lengthBytes);
  }

  /**
   * Write local bytes into the peer's buffer ({@code fi_writemsg} with {@code
   * FI_DELIVERY_COMPLETE}): the completion fires only once the peer holds the bytes. The bytes come
   * from {@link Operands#source()}, and the transfer length is that segment's size.
   */
  enum ToPeer implements Direction {
    /** The only value. */
    INSTANCE;

    @Override
    public String toString() {
      return "ToPeer";
    }
  }

  /**
   * Read {@code lengthBytes} bytes out of the peer's buffer ({@code fi_read}) into the segment
   * returned by {@link Operands#allocate(long)}.
   *
   * @param lengthBytes how many bytes land; the peer's advertisement says how many there are
   */
  record FromPeer(long lengthBytes) implements Direction {
    /**
     * Checks the length.
     *
     * @throws IllegalArgumentException if {@code lengthBytes} is negative
     */
    public FromPeer {
      if (lengthBytes < 0) {
        throw new IllegalArgumentException("lengthBytes is negative: " + lengthBytes);
      }
    }
  }
}
