package dev.dma.api;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.List;

/**
 * What a passive client tells the server so the server can RMA into its buffer: its fabric address,
 * the remote key of its registered buffer, that buffer's remote address (a virtual address on EFA,
 * an offset on tcp) and, when known, how many bytes it exposes.
 *
 * <p>On the wire it is three fields, exactly as in the original protocol so a Java server serves
 * clients of either: the address as lowercase hex (uppercase accepted when parsing), then the key
 * and the remote address as unsigned decimal ASCII; and, optionally, a fourth: the exposed length
 * as decimal ASCII. {@link #toFields()} writes the fourth field only when the length is known, so a
 * peer that advertises no length reads back unchanged. A server uses the length to refuse a
 * transfer outside the exposed region ({@link TransferRequest#outOfBoundsReason(long)}) instead of
 * handing it to a provider that may not check.
 *
 * <p>Construction and parsing refuse what no exposed region can be: an empty address, a length that
 * is neither {@link #UNKNOWN_LENGTH} nor positive, and a region that wraps past the top of the
 * address space. Immutable; {@link #address()} returns a copy.
 *
 * @param address the client's fabric address bytes, not empty
 * @param remoteKey the remote key of the client's buffer
 * @param remoteAddress the client buffer's remote address
 * @param lengthBytes the bytes exposed from {@code remoteAddress} on, or {@link #UNKNOWN_LENGTH}
 */
public record Advertisement(byte[] address, long remoteKey, long remoteAddress, long lengthBytes) {

  /** The number of wire fields every advertisement has: address, key, remote address. */
  public static final int FIELD_COUNT = 3;

  /** The number of wire fields of an advertisement that carries its length. */
  public static final int FIELD_COUNT_WITH_LENGTH = 4;

  /** The {@link #lengthBytes()} of an advertisement that did not say (three wire fields). */
  public static final long UNKNOWN_LENGTH = -1;

  /**
   * Checks the fields and copies the address.
   *
   * @throws NullPointerException if {@code address} is null
   * @throws AdvertisementException with {@link AdvertisementException.Reason#ADDRESS} for an empty
   *     address, {@link AdvertisementException.Reason#LENGTH} for a length neither {@link
   *     #UNKNOWN_LENGTH} nor positive, or one that runs past the top of the address space
   */
  public Advertisement {
    address = address.clone();
    if (address.length == 0) {
      throw new AdvertisementException(
          AdvertisementException.Reason.ADDRESS, "the fabric address is empty");
    }
    if (lengthBytes != UNKNOWN_LENGTH) {
      if (lengthBytes <= 0) {
        throw new AdvertisementException(
            AdvertisementException.Reason.LENGTH,
            "the exposed length must be positive, not " + lengthBytes);
      }
      // Unsigned: [remoteAddress, remoteAddress + lengthBytes) must not wrap past 2^64.
      if (Long.compareUnsigned(lengthBytes, -remoteAddress) > 0 && remoteAddress != 0) {
        throw new AdvertisementException(
            AdvertisementException.Reason.LENGTH,
            "an exposed length of "
                + lengthBytes
                + " from remote address "
                + Long.toUnsignedString(remoteAddress)
                + " runs past the top of the address space");
      }
    }
  }

  /**
   * An advertisement that does not say its length, as the original protocol's three fields.
   *
   * @param address the client's fabric address bytes, not empty
   * @param remoteKey the remote key of the client's buffer
   * @param remoteAddress the client buffer's remote address
   * @throws NullPointerException if {@code address} is null
   * @throws AdvertisementException with {@link AdvertisementException.Reason#ADDRESS} for an empty
   *     address
   */
  public Advertisement(byte[] address, long remoteKey, long remoteAddress) {
    this(address, remoteKey, remoteAddress, UNKNOWN_LENGTH);
  }

  /**
   * A copy of the client's fabric address.
   *
   * @return the address bytes
   */
  @Override
  public byte[] address() {
    return address.clone();
  }

  /**
   * Whether the advertisement says how many bytes it exposes.
   *
   * @return {@code lengthBytes() != UNKNOWN_LENGTH}
   */
  public boolean lengthKnown() {
    return lengthBytes != UNKNOWN_LENGTH;
  }

  /**
   * Parses the three or four wire fields.
   *
   * @param fields address (hex), remote key (decimal), remote address (decimal), and optionally the
   *     exposed length (decimal)
   * @return the advertisement; its length is {@link #UNKNOWN_LENGTH} when there were three fields
   * @throws AdvertisementException with {@link AdvertisementException.Reason#ARITY} for a field
   *     count other than three or four, {@code HEX} for a bad address, {@code ADDRESS} for an empty
   *     one, {@code INTEGER} for a bad key or remote address, {@code LENGTH} for a bad length; the
   *     message names the field
   */
  public static Advertisement fromFields(List<String> fields) {
    if (fields.size() != FIELD_COUNT && fields.size() != FIELD_COUNT_WITH_LENGTH) {
      throw new AdvertisementException(
          AdvertisementException.Reason.ARITY,
          // The protocol's text names the three fields; the detail adds only the count and the
          // optional fourth, so the forms are said once.
          "got " + fields.size() + " fields, not 3 (or 4 with the exposed length last)");
    }
    String hex = fields.get(0);
    if (hex.isEmpty()) {
      throw new AdvertisementException(
          AdvertisementException.Reason.ADDRESS, "the address field is empty");
    }
    byte[] address = decodeHex(hex);
    long remoteKey = parseUnsigned(fields.get(1), "remote key");
    long remoteAddress = parseUnsigned(fields.get(2), "remote address");
    long lengthBytes =
        fields.size() == FIELD_COUNT_WITH_LENGTH ? parseLength(fields.get(3)) : UNKNOWN_LENGTH;
    return new Advertisement(address, remoteKey, remoteAddress, lengthBytes);
  }

  /**
   * Parses the three or four wire fields given as raw bytes (for example RESP bulk strings).
   *
   * @param fields address, remote key, remote address and optionally length, as ASCII bytes
   * @return the advertisement
   * @throws AdvertisementException as {@link #fromFields(List)}
   */
  public static Advertisement fromRawFields(List<byte[]> fields) {
    // fromFields checks the field count and each field.
    return fromFields(
        fields.stream().map(field -> new String(field, StandardCharsets.UTF_8)).toList());
  }

  /**
   * The wire fields: three when the length is unknown (the original protocol), four when known.
   *
   * @return lowercase hex address, decimal key, decimal remote address, and the decimal length when
   *     known
   */
  public List<String> toFields() {
    if (lengthBytes == UNKNOWN_LENGTH) {
      return List.of(
          encodeHex(address),
          Long.toUnsignedString(remoteKey),
          Long.toUnsignedString(remoteAddress));
    }
    return List.of(
        encodeHex(address),
        Long.toUnsignedString(remoteKey),
        Long.toUnsignedString(remoteAddress),
        Long.toString(lengthBytes));
  }

  /**
   * Lowercase hex, two characters per byte, no prefix.
   *
   * @param bytes the bytes
   * @return the hex text
   */
  public static String encodeHex(byte[] bytes) {
    char[] text = new char[bytes.length * 2];
    for (int i = 0; i < bytes.length; i++) {
      text[2 * i] = Character.forDigit((bytes[i] >> 4) & 0xf, 16);
      text[2 * i + 1] = Character.forDigit(bytes[i] & 0xf, 16);
    }
    return new String(text);
  }

  /**
   * Decodes hex, upper or lower case.
   *
   * @param text an even number of hex digits
   * @return the bytes
   * @throws AdvertisementException with {@link AdvertisementException.Reason#HEX} for an odd length
   *     or any other character
   */
  public static byte[] decodeHex(String text) {
    if (text.length() % 2 != 0) {
      throw new AdvertisementException(
          AdvertisementException.Reason.HEX, "the address has an odd number of hex digits");
    }
    byte[] bytes = new byte[text.length() / 2];
    for (int i = 0; i < bytes.length; i++) {
      int high = Character.digit(text.charAt(2 * i), 16);
      int low = Character.digit(text.charAt(2 * i + 1), 16);
      // Character.digit also accepts non-ASCII digits; the wire format is ASCII only.
      if (high < 0 || low < 0 || text.charAt(2 * i) > 'f' || text.charAt(2 * i + 1) > 'f') {
        throw new AdvertisementException(
            AdvertisementException.Reason.HEX, "the address has a character that is not hex");
      }
      bytes[i] = (byte) (high << 4 | low);
    }
    return bytes;
  }

  private static boolean asciiDigits(String field) {
    // Long.parseUnsignedLong accepts a leading '+' and non-ASCII digits; the wire format does not.
    return !field.isEmpty() && field.chars().allMatch(c -> c >= '0' && c <= '9');
  }

  private static long parseUnsigned(String field, String name) {
    if (asciiDigits(field)) {
      try {
        return Long.parseUnsignedLong(field);
      } catch (NumberFormatException overflow) {
        // Falls through to the error below: the text is right, the value too large.
      }
    }
    throw new AdvertisementException(
        AdvertisementException.Reason.INTEGER,
        "the " + name + " \"" + field + "\" is not an unsigned 64-bit decimal number");
  }

  private static long parseLength(String field) {
    if (asciiDigits(field)) {
      try {
        // Signed: no segment is longer than Long.MAX_VALUE bytes.
        long length = Long.parseLong(field);
        if (length > 0) {
          return length;
        }
      } catch (NumberFormatException overflow) {
        // Falls through to the error below.
      }
    }
    throw new AdvertisementException(
        AdvertisementException.Reason.LENGTH,
        "the length \"" + field + "\" is not a positive decimal number of bytes below 2^63");
  }

  @Override
  public boolean equals(Object other) {
    return other instanceof Advertisement that
        && Arrays.equals(address, that.address)
        && remoteKey == that.remoteKey
        && remoteAddress == that.remoteAddress
        && lengthBytes == that.lengthBytes;
  }

  @Override
  public int hashCode() {
    int hash =
        31 * (31 * Arrays.hashCode(address) + Long.hashCode(remoteKey))
            + Long.hashCode(remoteAddress);
    return 31 * hash + Long.hashCode(lengthBytes);
  }

  @Override
  public String toString() {
    return String.join(" ", toFields());
  }
}
