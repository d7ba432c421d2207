package dev.dma.api;

import java.util.Arrays;
import java.util.HexFormat;

/**
 * One RMA transfer to submit: which client and peer buffer, which way, and the caller context that
 * supplies the local memory and comes back in the {@link Completion}.
 *
 * <p>Ownership: the request owns {@code peerAddress}; do not change the array after building the
 * request. The context is owned by the service from submit until its completion is delivered.
 *
 * @param <T> the caller context type
 * @param clientId identity for address-vector accounting and per-client drain and removal; keep it
 *     stable for the client's life and never reuse it
 * @param peerAddress the peer's opaque fabric address (raw bytes; hex on the wire)
 * @param remoteKey the peer's remote key for its registered buffer
 * @param remoteAddress the peer buffer's virtual address on virtual-addressing providers (EFA), or
 *     an offset from its start (0 for the whole buffer) on offset-addressed ones (tcp); passed
 *     through unchanged
 * @param direction which way the bytes move
 * @param wantChecksum compute CRC-32C over the local operand at completion (on the checksum pool);
 *     the operand must then be readable from any thread (a shared, global or automatic arena's),
 *     or the transfer fails at intake, before the RMA
 * @param context the caller context; supplies the operand and is handed back
 * @param remoteBase the advertised region's remote address ({@link Advertisement#remoteAddress()}),
 *     in the same addressing as {@code remoteAddress}: the request's {@code remoteAddress} may lie
 *     anywhere inside {@code [remoteBase, remoteBase + remoteLength)}; meaningless when {@code
 *     remoteLength} is {@link #UNKNOWN_LENGTH}
 * @param remoteLength the advertised region's length ({@link Advertisement#lengthBytes()}), or
 *     {@link #UNKNOWN_LENGTH} when the peer did not say, and then no bound is checked
 */
public record TransferRequest<T extends Operands>(
    long clientId,
    byte[] peerAddress,
    long remoteKey,
    long remoteAddress,
    Direction direction,
    boolean wantChecksum,
    T context,
    long remoteBase,
    long remoteLength) {

  /** The {@link #remoteLength()} of a request whose peer region has no advertised length. */
  public static final long UNKNOWN_LENGTH = Advertisement.UNKNOWN_LENGTH;

  /**
   * Checks the required fields.
   *
   * @throws NullPointerException naming the missing field
   * @throws IllegalArgumentException if {@code peerAddress} is empty, or {@code remoteLength} is
   *     neither {@link #UNKNOWN_LENGTH} nor positive
   */
  public TransferRequest {
    if (remoteLength != UNKNOWN_LENGTH && remoteLength <= 0) {
      throw new IllegalArgumentException(
          "remoteLength must be positive or UNKNOWN_LENGTH, not " + remoteLength);
    }
    if (peerAddress == null) {
      throw new NullPointerException("peerAddress");
    }
    if (peerAddress.length == 0) {
      throw new IllegalArgumentException("peerAddress is empty");
    }
    if (direction == null) {
      throw new NullPointerException("direction");
    }
    if (context == null) {
      throw new NullPointerException("context");
    }
  }

  /**
   * A request with no advertised bound (as before advertisements carried their length).
   *
   * @param clientId identity for accounting
   * @param peerAddress the peer's fabric address
   * @param remoteKey the peer's remote key
   * @param remoteAddress the peer buffer's remote address
   * @param direction which way the bytes move
   * @param wantChecksum whether to checksum at completion
   * @param context the caller context
   * @throws NullPointerException naming the missing field
   * @throws IllegalArgumentException if {@code peerAddress} is empty
   */
  public TransferRequest(
      long clientId,
      byte[] peerAddress,
      long remoteKey,
      long remoteAddress,
      Direction direction,
      boolean wantChecksum,
      T context) {
    this(
        clientId,
        peerAddress,
        remoteKey,
        remoteAddress,
        direction,
        wantChecksum,
        context,
        0,
        UNKNOWN_LENGTH);
  }

  /**
   * Why a transfer of {@code lengthBytes} at this request's {@code remoteAddress} falls outside the
   * advertised region {@code [remoteBase, remoteBase + remoteLength)}, or {@code null} when it fits
   * or no length was advertised. Addresses compare unsigned (a virtual address may have its top bit
   * set; an offset-addressed peer advertises base 0). The fabric worker calls it before posting,
   * once the operand's length is known, and fails the transfer with the text (reason {@code
   * BAD_REQUEST}) rather than hand the provider an access the target never exposed. Any thread;
   * throws nothing and allocates nothing when the transfer fits.
   *
   * @param lengthBytes the transfer's length
   * @return {@code null} when in bounds or unbounded, else the failure text
   */
  public String outOfBoundsReason(long lengthBytes) {
    if (remoteLength == UNKNOWN_LENGTH) {
      return null;
    }
    // offset wraps to a huge unsigned value when remoteAddress is below remoteBase.
    long offset = remoteAddress - remoteBase;
    if (lengthBytes >= 0
        && Long.compareUnsigned(offset, remoteLength) <= 0
        && lengthBytes <= remoteLength - offset) {
      return null;
    }
    return "transfer of "
        + lengthBytes
        + " bytes at remote address "
        + Long.toUnsignedString(remoteAddress)
        + " lies outside the advertised region of "
        + remoteLength
        + " bytes at "
        + Long.toUnsignedString(remoteBase);
  }

  /**
   * A builder for a request whose other fields default to 0, {@link Direction#TO_PEER} and no
   * checksum.
   *
   * @param <T> the caller context type
   * @param context the caller context
   * @return the builder
   */
  public static <T extends Operands> Builder<T> builder(T context) {
    return new Builder<>(context);
  }

  /**
   * The request for the peer buffer an advertisement names.
   *
   * @param <T> the caller context type
   * @param clientId the client's identity
   * @param advertisement the peer's address, key and remote address
   * @param direction which way the bytes move
   * @param wantChecksum whether to checksum at completion
   * @param context the caller context
   * @return the request
   */
  public static <T extends Operands> TransferRequest<T> to(
      long clientId,
      Advertisement advertisement,
      Direction direction,
      boolean wantChecksum,
      T context) {
    return new TransferRequest<>(
        clientId,
        advertisement.address(),
        advertisement.remoteKey(),
        advertisement.remoteAddress(),
        direction,
        wantChecksum,
        context,
        advertisement.remoteAddress(),
        advertisement.lengthBytes());
  }

  @Override
  public boolean equals(Object other) {
    return other instanceof TransferRequest<?> that
        && clientId == that.clientId
        && Arrays.equals(peerAddress, that.peerAddress)
        && remoteKey == that.remoteKey
        && remoteAddress == that.remoteAddress
        && direction.equals(that.direction)
        && wantChecksum == that.wantChecksum
        && context.equals(that.context)
        && remoteBase == that.remoteBase
        && remoteLength == that.remoteLength;
  }

  @Override
  public int hashCode() {
    int hash = Long.hashCode(clientId);
    hash = 31 * hash + Arrays.hashCode(peerAddress);
    hash = 31 * hash + Long.hashCode(remoteKey);
    hash = 31 * hash + Long.hashCode(remoteAddress);
    hash = 31 * hash + direction.hashCode();
    hash = 31 * hash + Boolean.hashCode(wantChecksum);
    hash = 31 * hash + context.hashCode();
    hash = 31 * hash + Long.hashCode(remoteBase);
    return 31 * hash + Long.hashCode(remoteLength);
  }

  @Override
  public String toString() {
    return "TransferRequest[clientId="
        + clientId
        + ", peerAddress="
        + HexFormat.of().formatHex(peerAddress)
        + ", remoteKey="
        + Long.toUnsignedString(remoteKey)
        + ", remoteAddress=0x"
        + Long.toHexString(remoteAddress)
        + ", direction="
        + direction
        + ", wantChecksum="
        + wantChecksum
        + ", context="
        + context
        + (remoteLength == UNKNOWN_LENGTH
            ? ""
            : ", remoteBase=0x" + Long.toHexString(remoteBase) + ", remoteLength=" + remoteLength)
        + "]";
  }

  /**
   * Builds a {@link TransferRequest}. Not thread-safe; one builder per request.
   *
   * @param <T> the caller context type
   */
  public static final class Builder<T extends Operands> {
    private final T context;
    private long clientId;
    private byte[] peerAddress;
    private long remoteKey;
    private long remoteAddress;
    private long remoteBase;
    private long remoteLength = UNKNOWN_LENGTH;
    private Direction direction = Direction.TO_PEER;
    private boolean wantChecksum;

    private Builder(T context) {
      this.context = context;
    }

    /**
     * Sets the client id.
     *
     * @param value the client's identity
     * @return this builder
     */
    public Builder<T> clientId(long value) {
      this.clientId = value;
      return this;
    }

    /**
     * Sets the peer's fabric address; the request takes ownership of the array.
     *
     * @param value the address bytes
     * @return this builder
     */
    public Builder<T> peerAddress(byte[] value) {
      this.peerAddress = value;
      return this;
    }

    /**
     * Sets the peer's address, key and remote address from its advertisement, and the advertised
     * region ({@code remoteBase}, {@code remoteLength}) that bounds the transfer. A later {@link
     * #remoteAddress(long)} moves the transfer inside that region (an offset from {@code
     * value.remoteAddress()}); the bound stays.
     *
     * @param value the advertisement
     * @return this builder
     */
    public Builder<T> advertisement(Advertisement value) {
      this.peerAddress = value.address();
      this.remoteKey = value.remoteKey();
      this.remoteAddress = value.remoteAddress();
      this.remoteBase = value.remoteAddress();
      this.remoteLength = value.lengthBytes();
      return this;
    }

    /**
     * Sets the remote key.
     *
     * @param value the peer's key
     * @return this builder
     */
    public Builder<T> remoteKey(long value) {
      this.remoteKey = value;
      return this;
    }

    /**
     * Sets the remote address (virtual address or offset, per provider).
     *
     * @param value the remote address
     * @return this builder
     */
    public Builder<T> remoteAddress(long value) {
      this.remoteAddress = value;
      return this;
    }

    /**
     * Sets the direction.
     *
     * @param value the direction
     * @return this builder
     */
    public Builder<T> direction(Direction value) {
      this.direction = value;
      return this;
    }

    /**
     * Sets whether to checksum at completion.
     *
     * @param value whether to checksum
     * @return this builder
     */
    public Builder<T> wantChecksum(boolean value) {
      this.wantChecksum = value;
      return this;
    }

    /**
     * Builds the request.
     *
     * @return the request
     * @throws NullPointerException naming a missing field
     */
    public TransferRequest<T> build() {
      return new TransferRequest<>(
          clientId,
          peerAddress,
          remoteKey,
          remoteAddress,
          direction,
          wantChecksum,
          context,
          remoteBase,
          remoteLength);
    }
  }
}
