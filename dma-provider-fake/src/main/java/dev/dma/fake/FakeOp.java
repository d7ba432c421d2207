package dev.dma.fake;

/**
 * One operation a fake endpoint accepted, as a {@link OpMatcher} sees it when the script decides
 * whether to fail it or hold its completion. Built only while the script has such rules, on the
 * posting thread, under the fabric's lock; immutable. The address arrays are this view's own
 * copies.
 *
 * @param index the operation's number on its fabric: the first operation any endpoint of the fabric
 *     accepted is 1; posts answered {@code -FI_EAGAIN} or refused get no number
 * @param kind write or read
 * @param slot the op slot it was posted with
 * @param initiator the posting endpoint's address
 * @param peer the target's address (from the address vector entry)
 * @param peerHandle the peer handle it was posted against
 * @param localAddress the first local byte
 * @param lengthBytes how many bytes
 * @param remoteAddress the remote address or offset
 * @param remoteKey the remote key
 */
public record FakeOp(
    long index,
    Kind kind,
    int slot,
    byte[] initiator,
    byte[] peer,
    long peerHandle,
    long localAddress,
    long lengthBytes,
    long remoteAddress,
    long remoteKey) {

  /** What an operation does. */
  public enum Kind {
    /** {@code postWrite}: local bytes into the peer's memory (to peer). */
    WRITE,
    /** {@code postRead}: the peer's memory into local bytes (from peer). */
    READ
  }

  @Override
  public String toString() {
    return "op #"
        + index
        + " ("
        + kind.name().toLowerCase(java.util.Locale.ROOT)
        + " of "
        + lengthBytes
        + " bytes, slot "
        + slot
        + ", peer handle "
        + peerHandle
        + ", key "
        + remoteKey
        + ", remote address "
        + remoteAddress
        + ")";
  }
}
