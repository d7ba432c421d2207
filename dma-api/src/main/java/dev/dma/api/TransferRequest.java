package dev.dma.api;

import java.util.Arrays;
import java.util.HexFormat;
import java.util.Objects;
import org.jspecify.annotations.Nullable;

/**
 * One RMA transfer to submit: which client and peer buffer, which way, and the caller context that
 * supplies the local memory and comes back in the {@link Completion}.
 *
 * <p>The common forms read as what they do:
 *
 * <pre>{@code
 * service.submit(TransferRequest.write(clientId, advertisement, Operands.of(value)));
 * service.submit(TransferRequest.read(clientId, advertisement, length, Operands.of(landing))
 *     .withChecksum(Checksum.CRC32C));
 * }</pre>
 *
 * A write's length is its source segment's size ({@link Operands#source()}); a read's is the length
 * it names ({@link Direction#fromPeer(long)}), since there is no local source to measure. {@link
 * #builder} sets any field, for example a remote address inside the advertised region.
 *
 * <p>A server with many clients keeps each client's {@link Peer}, returned by {@code addPeer} when
 * the client says hello, and builds the client's requests from it, so the service posts them
 * without looking the client up:
 *
 * <pre>{@code
 * Peer peer = service.addPeer(clientId, advertisement.address());
 * service.submit(TransferRequest.write(peer, advertisement, Operands.of(value)));
 * }</pre>
 *
 * <p>Ownership: the request owns {@code peerAddress}; do not change the array after building the
 * request. The context is owned by the service from submit until its completion is delivered.
 * Immutable otherwise; any thread may build and submit one.
 *
 * @param <T> the caller context type
 * @param clientId identity for address-vector accounting and per-client drain and removal; the
 *     client's id and its current address together are its incarnation: a client that restarts may
 *     keep its id, and a transfer carrying its new address is served even when its old incarnation
 *     was marked unreachable (README, "The client lifecycle")
 * @param peerAddress the peer's opaque fabric address (raw bytes; hex on the wire)
 * @param remoteKey the peer's remote key for its registered buffer
 * @param remoteAddress the peer buffer's virtual address on virtual-addressing providers (EFA), or
 *     an offset from its start (0 for the whole buffer) on offset-addressed ones (tcp); passed
 *     through unchanged
 * @param direction which way the bytes move
 * @param checksum whether the completion carries a CRC-32C over the local operand ({@link
 *     Checksum#CRC32C}, computed on the checksum pool) or not ({@link Checksum#NONE})
 * @param context the caller context; supplies the operand and is handed back
 * @param remoteBase the advertised region's remote address ({@link Advertisement#remoteAddress()}),
 *     in the same addressing as {@code remoteAddress}: the request's {@code remoteAddress} may lie
 *     anywhere inside {@code [remoteBase, remoteBase + remoteLength)}; meaningless when {@code
 *     remoteLength} is {@link #UNKNOWN_LENGTH}
 * @param remoteLength the advertised region's length ({@link Advertisement#lengthBytes()}), or
 *     {@link #UNKNOWN_LENGTH} when the peer did not say, and then no bound is checked
 * @param retryWrite whether a write may be posted again after the provider reported its connection
 *     lost ({@code ENOTCONN}, {@code EPIPE}, {@code ECONNRESET}, {@code ECONNABORTED}: the target
 *     dropped that connection, so nothing more arrives over it). Off by default, because a write
 *     whose acknowledgement was lost may already have landed: a target that consumes what lands (a
 *     mailbox, a queue) would see it twice. Turn it on for writes whose landing twice is harmless
 *     (a value written to its own slot). Reads are always posted again in that case, and after an
 *     endpoint reset: they change no remote memory, and dma's own endpoint is closed before the
 *     repost, so no earlier attempt writes the landing buffer. A write is never posted again after
 *     an endpoint reset, whatever this says: closing dma's end does not stop the bytes already sent
 *     over the old connection from landing later, perhaps after a repost had succeeded and the
 *     caller had written that range again. {@link Completion#posts()} says how many times a
 *     transfer was posted
 * @param peer the peer {@code addPeer} returned for this client and address, or {@code null}: with
 *     it, the service that issued it posts without looking the client up ({@link Peer}); it changes
 *     nothing else. Its client id and address must be the request's
 */
public record TransferRequest<T extends Operands>(
    long clientId,
    byte[] peerAddress,
    long remoteKey,
    long remoteAddress,
    Direction direction,
    Checksum checksum,
    T context,
    long remoteBase,
    long remoteLength,
    boolean retryWrite,
    @Nullable Peer peer) {

  /** The {@link #remoteLength()} of a request whose peer region has no advertised length. */
  public static final long UNKNOWN_LENGTH = Advertisement.UNKNOWN_LENGTH;

  /**
   * A request that leaves {@code retryWrite} off, the default: a write is posted at most once.
   *
   * @param clientId the client's identity
   * @param peerAddress the peer's fabric address
   * @param remoteKey the peer's remote key
   * @param remoteAddress the remote address
   * @param direction which way the bytes move
   * @param checksum the checksum choice
   * @param context the caller context
   * @param remoteBase the advertised region's remote address
   * @param remoteLength the advertised region's length, or {@link #UNKNOWN_LENGTH}
   */
  public TransferRequest(
      long clientId,
      byte[] peerAddress,
      long remoteKey,
      long remoteAddress,
      Direction direction,
      Checksum checksum,
      T context,
      long remoteBase,
      long remoteLength) {
    this(
        clientId,
        peerAddress,
        remoteKey,
        remoteAddress,
        direction,
        checksum,
        context,
        remoteBase,
        remoteLength,
        false,
        null);
  }

  /**
   * A request without a {@link Peer}: the service looks its client up by id and address.
   *
   * @param clientId the client's identity
   * @param peerAddress the peer's fabric address
   * @param remoteKey the peer's remote key
   * @param remoteAddress the remote address
   * @param direction which way the bytes move
   * @param checksum the checksum choice
   * @param context the caller context
   * @param remoteBase the advertised region's remote address
   * @param remoteLength the advertised region's length, or {@link #UNKNOWN_LENGTH}
   * @param retryWrite whether a write may be posted again after a lost connection
   */
  public TransferRequest(
      long clientId,
      byte[] peerAddress,
      long remoteKey,
      long remoteAddress,
      Direction direction,
      Checksum checksum,
      T context,
      long remoteBase,
      long remoteLength,
      boolean retryWrite) {
    this(
        clientId,
        peerAddress,
        remoteKey,
        remoteAddress,
        direction,
        checksum,
        context,
        remoteBase,
        remoteLength,
        retryWrite,
        null);
  }

  /**
   * Checks the required fields.
   *
   * @throws NullPointerException naming the missing field
   * @throws IllegalArgumentException if {@code peerAddress} is empty, {@code remoteLength} is
   *     neither {@link #UNKNOWN_LENGTH} nor positive, or {@code peer} is another client's or has
   *     another address
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
    if (checksum == null) {
      throw new NullPointerException("checksum");
    }
    if (context == null) {
      throw new NullPointerException("context");
    }
    if (peer != null && (peer.clientId() != clientId || !peer.hasAddress(peerAddress))) {
      throw new IllegalArgumentException(
          peer.clientId() != clientId
              ? "the peer is client "
                  + peer.clientId()
                  + "'s, not client "
                  + clientId
                  + "'s: build the request from the peer addPeer returned for this client"
              : "client "
                  + clientId
                  + "'s advertised address "
                  + HexFormat.of().formatHex(peerAddress)
                  + " is not the peer's "
                  + HexFormat.of().formatHex(peer.address())
                  + ": the client advertised a new address; addPeer it and carry the peer that"
                  + " returns");
    }
  }

  /**
   * A write of the context's {@link Operands#source()} into the whole buffer an advertisement
   * names, without a checksum.
   *
   * @param <T> the caller context type
   * @param clientId the client's identity
   * @param to the peer's advertisement: its address, key, remote address and length (the bound)
   * @param context the caller context; its source's size is the transfer length
   * @return the request
   */
  public static <T extends Operands> TransferRequest<T> write(
      long clientId, Advertisement to, T context) {
    return of(clientId, to, Direction.TO_PEER, context);
  }

  /**
   * A read of {@code lengthBytes} from the start of the buffer an advertisement names into the
   * context's {@link Operands#allocate(long)}, without a checksum.
   *
   * @param <T> the caller context type
   * @param clientId the client's identity
   * @param from the peer's advertisement: its address, key, remote address and length (the bound)
   * @param lengthBytes how many bytes to read; not negative
   * @param context the caller context
   * @return the request
   * @throws IllegalArgumentException if {@code lengthBytes} is negative
   */
  public static <T extends Operands> TransferRequest<T> read(
      long clientId, Advertisement from, long lengthBytes, T context) {
    return of(clientId, from, Direction.fromPeer(lengthBytes), context);
  }

  /**
   * A transfer either way over the buffer an advertisement names, without a checksum: the general
   * form of {@link #write} and {@link #read}, for code that chooses the direction at run time.
   *
   * @param <T> the caller context type
   * @param clientId the client's identity
   * @param advertisement the peer's address, key, remote address and length (the bound)
   * @param direction which way the bytes move
   * @param context the caller context
   * @return the request
   */
  public static <T extends Operands> TransferRequest<T> of(
      long clientId, Advertisement advertisement, Direction direction, T context) {
    return over(clientId, null, advertisement, direction, context);
  }

  /** A request over the whole region an advertisement names, with the defaults of the factories. */
  private static <T extends Operands> TransferRequest<T> over(
      long clientId, @Nullable Peer peer, Advertisement region, Direction direction, T context) {
    return new TransferRequest<>(
        clientId,
        region.address(),
        region.remoteKey(),
        region.remoteAddress(),
        direction,
        Checksum.NONE,
        context,
        region.remoteAddress(),
        region.lengthBytes(),
        false,
        peer);
  }

  /**
   * A write of the context's {@link Operands#source()} into the whole buffer an advertisement
   * names, carrying the client's {@link Peer} so that its service posts it without a lookup.
   *
   * @param <T> the caller context type
   * @param to the peer {@code addPeer} returned for the client
   * @param region the client's advertisement: key, remote address and length (the bound); its
   *     address must be the peer's
   * @param context the caller context; its source's size is the transfer length
   * @return the request
   * @throws IllegalArgumentException if the advertisement's address is not the peer's
   */
  public static <T extends Operands> TransferRequest<T> write(
      Peer to, Advertisement region, T context) {
    return of(to, region, Direction.TO_PEER, context);
  }

  /**
   * A read of {@code lengthBytes} from the start of the buffer an advertisement names, carrying the
   * client's {@link Peer}.
   *
   * @param <T> the caller context type
   * @param from the peer {@code addPeer} returned for the client
   * @param region the client's advertisement; its address must be the peer's
   * @param lengthBytes how many bytes to read; not negative
   * @param context the caller context
   * @return the request
   * @throws IllegalArgumentException if {@code lengthBytes} is negative or the advertisement's
   *     address is not the peer's
   */
  public static <T extends Operands> TransferRequest<T> read(
      Peer from, Advertisement region, long lengthBytes, T context) {
    return of(from, region, Direction.fromPeer(lengthBytes), context);
  }

  /**
   * A transfer either way over the buffer an advertisement names, carrying the client's {@link
   * Peer}: the general form of {@link #write(Peer, Advertisement, Operands)} and {@link #read(Peer,
   * Advertisement, long, Operands)}.
   *
   * @param <T> the caller context type
   * @param peer the peer {@code addPeer} returned for the client
   * @param region the client's advertisement; its address must be the peer's
   * @param direction which way the bytes move
   * @param context the caller context
   * @return the request
   * @throws IllegalArgumentException if the advertisement's address is not the peer's
   */
  public static <T extends Operands> TransferRequest<T> of(
      Peer peer, Advertisement region, Direction direction, T context) {
    return over(peer.clientId(), peer, region, direction, context);
  }

  /**
   * This request with another checksum choice, for example {@code withChecksum(Checksum.CRC32C)}
   * for a CRC-32C over the local operand at completion.
   *
   * @param value {@link Checksum#CRC32C} or {@link Checksum#NONE}
   * @return a request equal to this one but for its checksum
   */
  public TransferRequest<T> withChecksum(Checksum value) {
    return checksum == value ? this : with(value, retryWrite);
  }

  /**
   * This request with writes allowed to be posted again after a lost connection ({@link
   * #retryWrite()}); reads are always allowed.
   *
   * @param value whether a write may be posted again
   * @return a request equal to this one but for that choice
   */
  public TransferRequest<T> withRetryWrite(boolean value) {
    return retryWrite == value ? this : with(checksum, value);
  }

  /** A copy with the two per-request choices replaced; every other field is the same. */
  private TransferRequest<T> with(Checksum newChecksum, boolean newRetryWrite) {
    return new TransferRequest<>(
        clientId,
        peerAddress,
        remoteKey,
        remoteAddress,
        direction,
        newChecksum,
        context,
        remoteBase,
        remoteLength,
        newRetryWrite,
        peer);
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
  public @Nullable String outOfBoundsReason(long lengthBytes) {
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
   * A builder for any request; fields not set default to 0, {@link Direction#TO_PEER}, {@link
   * Checksum#NONE} and no advertised bound.
   *
   * @param <T> the caller context type
   * @param context the caller context
   * @return the builder
   */
  public static <T extends Operands> Builder<T> builder(T context) {
    return new Builder<>(context);
  }

  /**
   * Equal when every field but {@link #peer()} is: the peer is a shortcut that changes nothing
   * about what the request means.
   *
   * @param other another object
   * @return whether it is an equal request
   */
  @Override
  public boolean equals(Object other) {
    return other instanceof TransferRequest<?> that
        && clientId == that.clientId
        && Arrays.equals(peerAddress, that.peerAddress)
        && remoteKey == that.remoteKey
        && remoteAddress == that.remoteAddress
        && direction.equals(that.direction)
        && checksum == that.checksum
        && context.equals(that.context)
        && remoteBase == that.remoteBase
        && remoteLength == that.remoteLength
        && retryWrite == that.retryWrite;
  }

  @Override
  public int hashCode() {
    int hash = Long.hashCode(clientId);
    hash = 31 * hash + Arrays.hashCode(peerAddress);
    hash = 31 * hash + Long.hashCode(remoteKey);
    hash = 31 * hash + Long.hashCode(remoteAddress);
    hash = 31 * hash + direction.hashCode();
    hash = 31 * hash + checksum.hashCode();
    hash = 31 * hash + context.hashCode();
    hash = 31 * hash + Long.hashCode(remoteBase);
    hash = 31 * hash + Long.hashCode(remoteLength);
    return 31 * hash + Boolean.hashCode(retryWrite);
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
        + ", checksum="
        + checksum
        + ", context="
        + context
        + (remoteLength == UNKNOWN_LENGTH
            ? ""
            : ", remoteBase=0x" + Long.toHexString(remoteBase) + ", remoteLength=" + remoteLength)
        + (retryWrite ? ", retryWrite=true" : "")
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
    private byte @Nullable [] peerAddress;
    private long remoteKey;
    private long remoteAddress;
    private long remoteBase;
    private long remoteLength = UNKNOWN_LENGTH;
    private Direction direction = Direction.TO_PEER;
    private Checksum checksum = Checksum.NONE;
    private boolean retryWrite;
    private @Nullable Peer peer;

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
     * Sets the client's {@link Peer}, its id and its address: the peer {@code addPeer} returned, so
     * that its service posts the request without a lookup. A later {@link #clientId} or {@link
     * #peerAddress} must agree with it, and an {@link #advertisement} must carry its address.
     *
     * @param value the peer
     * @return this builder
     */
    public Builder<T> peer(Peer value) {
      this.peer = value;
      this.clientId = value.clientId();
      this.peerAddress = value.address();
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
     * Sets whether the completion carries a checksum.
     *
     * @param value {@link Checksum#CRC32C} or {@link Checksum#NONE}
     * @return this builder
     */
    public Builder<T> checksum(Checksum value) {
      this.checksum = value;
      return this;
    }

    /**
     * Sets whether a write may be posted again after its connection was lost ({@link
     * TransferRequest#retryWrite()}); off by default.
     *
     * @param value whether a write may be posted again
     * @return this builder
     */
    public Builder<T> retryWrite(boolean value) {
      this.retryWrite = value;
      return this;
    }

    /**
     * Builds the request.
     *
     * @return the request
     * @throws NullPointerException naming a missing field
     * @throws IllegalArgumentException for a peer that is not the request's client and address
     */
    public TransferRequest<T> build() {
      return new TransferRequest<>(
          clientId,
          Objects.requireNonNull(peerAddress, "peerAddress"),
          remoteKey,
          remoteAddress,
          direction,
          checksum,
          context,
          remoteBase,
          remoteLength,
          retryWrite,
          peer);
    }
  }
}
