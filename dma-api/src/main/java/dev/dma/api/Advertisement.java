package dev.dma.api;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.List;

/**
 * What a passive client tells the server so the server can RMA into its buffer: its fabric
 * address, the remote key of its registered buffer, and that buffer's remote address (a virtual
 * address on EFA, an offset on tcp).
 *
 * <p>On the wire it is three fields, exactly as in the original protocol so a Java server serves
 * clients of either: the address as lowercase hex (uppercase accepted when parsing), then the key
 * and the remote address as unsigned decimal ASCII. Immutable; {@link #address()} returns a copy.
 *
 * @param address the client's fabric address bytes
 * @param remoteKey the remote key of the client's buffer
 * @param remoteAddress the client buffer's remote address
 */
public record Advertisement(byte[] address, long remoteKey, long remoteAddress) {

  /** The number of wire fields an advertisement takes. */
  public static final int FIELD_COUNT = 3;

  /**
   * Copies the address.
   *
   * @throws NullPointerException if {@code address} is null
   */
  public Advertisement {
    address = address.clone();
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
   * Parses the three wire fields.
   *
   * @param fields address (hex), remote key (decimal), remote address (decimal)
   * @return the advertisement
   * @throws AdvertisementException with {@link AdvertisementException.Reason#ARITY} for a field
   *     count other than three, {@code HEX} for a bad address, {@code INTEGER} for a bad number
   */
  public static Advertisement fromFields(List<String> fields) {
    if (fields.size() != FIELD_COUNT) {
      throw new AdvertisementException(AdvertisementException.Reason.ARITY);
    }
    byte[] address = decodeHex(fields.get(0));
    long remoteKey = parseUnsigned(fields.get(1));
    long remoteAddress = parseUnsigned(fields.get(2));
    return new Advertisement(address, remoteKey, remoteAddress);
  }

  /**
   * Parses the three wire fields given as raw bytes (for example RESP bulk strings).
   *
   * @param fields address, remote key and remote address as ASCII bytes
   * @return the advertisement
   * @throws AdvertisementException as {@link #fromFields(List)}
   */
  public static Advertisement fromRawFields(List<byte[]> fields) {
    if (fields.size() != FIELD_COUNT) {
      throw new AdvertisementException(AdvertisementException.Reason.ARITY);
    }
    return fromFields(
        fields.stream().map(field -> new String(field, StandardCharsets.UTF_8)).toList());
  }

  /**
   * The three wire fields.
   *
   * @return lowercase hex address, decimal key, decimal remote address
   */
  public List<String> toFields() {
    return List.of(
        encodeHex(address),
        Long.toUnsignedString(remoteKey),
        Long.toUnsignedString(remoteAddress));
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
      throw new AdvertisementException(AdvertisementException.Reason.HEX);
    }
    byte[] bytes = new byte[text.length() / 2];
    for (int i = 0; i < bytes.length; i++) {
      int high = Character.digit(text.charAt(2 * i), 16);
      int low = Character.digit(text.charAt(2 * i + 1), 16);
      // Character.digit also accepts non-ASCII digits; the wire format is ASCII only.
      if (high < 0 || low < 0 || text.charAt(2 * i) > 'f' || text.charAt(2 * i + 1) > 'f') {
        throw new AdvertisementException(AdvertisementException.Reason.HEX);
      }
      bytes[i] = (byte) (high << 4 | low);
    }
    return bytes;
  }

  private static long parseUnsigned(String field) {
    // Long.parseUnsignedLong accepts a leading '+' and non-ASCII digits; the wire format does not.
    if (field.isEmpty() || !field.chars().allMatch(c -> c >= '0' && c <= '9')) {
      throw new AdvertisementException(AdvertisementException.Reason.INTEGER);
    }
    try {
      return Long.parseUnsignedLong(field);
    } catch (NumberFormatException overflow) {
      throw new AdvertisementException(AdvertisementException.Reason.INTEGER);
    }
  }

  @Override
  public boolean equals(Object other) {
    return other instanceof Advertisement that
        && Arrays.equals(address, that.address)
        && remoteKey == that.remoteKey
        && remoteAddress == that.remoteAddress;
  }

  @Override
  public int hashCode() {
    return 31 * (31 * Arrays.hashCode(address) + Long.hashCode(remoteKey))
        + Long.hashCode(remoteAddress);
  }

  @Override
  public String toString() {
    return String.join(" ", toFields());
  }
}
