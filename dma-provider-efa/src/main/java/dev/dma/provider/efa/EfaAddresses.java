package dev.dma.provider.efa;

import dev.dma.api.DmaException;
import java.util.Arrays;

/**
 * EFA endpoint addresses ({@code FI_ADDR_EFA}, SEED-SPEC section 7): 32 bytes, {@code struct
 * efa_ep_addr}: a 16-byte GID, a 2-byte QPN, 2 bytes of padding, a 4-byte QKEY and an 8-byte
 * pointer field. A peer's identity is its GID and QPN, the first {@value #IDENTITY_BYTES} bytes:
 * the device hands a closed endpoint's QPN to the next endpoint on the card, so GID and QPN name
 * the slot, and the QKEY only tells its incarnations apart. The peer table of {@code dma-core}
 * shares address-vector entries by this identity and evicts a stale incarnation (same identity,
 * other bytes) when a client re-advertises.
 *
 * <p>Stateless and thread-safe.
 */
public final class EfaAddresses {
  /** The length of every EFA address. */
  public static final int ADDRESS_BYTES = 32;

  /** The identity prefix: GID (16 bytes) and QPN (2 bytes). */
  public static final int IDENTITY_BYTES = 18;

  /** Offset of the 2-byte QPN, native-endian. */
  public static final int QPN_OFFSET = 16;

  /** Offset of the 4-byte QKEY, native-endian. */
  public static final int QKEY_OFFSET = 20;

  private EfaAddresses() {}

  /**
   * Checks that {@code address} can be an EFA address: exactly {@value #ADDRESS_BYTES} bytes. Any
   * other length is refused before it reaches {@code fi_av_insert}, which would read 32 bytes
   * whatever the array holds.
   *
   * @param address the bytes
   * @throws DmaException of kind FABRIC, {@code efa address is {n} bytes, not 32}, or {@code peer
   *     address is missing} for null
   */
  public static void check(byte[] address) {
    if (address == null) {
      throw DmaException.fabric(DmaException.Reason.BAD_REQUEST, "peer address is missing");
    }
    if (address.length != ADDRESS_BYTES) {
      throw DmaException.fabric(
          "efa address is " + address.length + " bytes, not " + ADDRESS_BYTES);
    }
  }

  /**
   * The identity of an EFA address: its first {@value #IDENTITY_BYTES} bytes (GID and QPN).
   *
   * @param address the bytes, checked by {@link #check(byte[])}
   * @return a new array of {@value #IDENTITY_BYTES} bytes
   * @throws DmaException as {@link #check(byte[])}
   */
  public static byte[] identity(byte[] address) {
    check(address);
    return Arrays.copyOf(address, IDENTITY_BYTES);
  }
}
