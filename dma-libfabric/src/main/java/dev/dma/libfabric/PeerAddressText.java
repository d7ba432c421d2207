package dev.dma.libfabric;

import java.nio.charset.StandardCharsets;
import java.util.HexFormat;

/**
 * A libfabric peer address as a person reads it in a failure message. Stateless; called on failure
 * paths only, from any thread.
 */
final class PeerAddressText {
  // sa_family values in host (little-endian) byte order, as libfabric's sockaddr addresses hold.
  private static final int AF_INET = 2;
  private static final int AF_INET6 = 10;
  private static final int SOCKADDR_IN_BYTES = 16;
  private static final int SOCKADDR_IN6_BYTES = 28;

  private PeerAddressText() {}

  /**
   * The address in words: {@code 10.0.0.2:4711} for a {@code sockaddr_in}, {@code [fe80::1]:4711}
   * for a {@code sockaddr_in6}, a printable name (shm's) up to its first NUL as itself, otherwise
   * the bytes in hex.
   *
   * @param address the address bytes, possibly malformed
   * @return the text, never empty
   */
  static String of(byte[] address) {
    if (address.length >= 4) {
      int family = (address[0] & 0xff) | (address[1] & 0xff) << 8;
      int port = (address[2] & 0xff) << 8 | (address[3] & 0xff);
      if (family == AF_INET && address.length == SOCKADDR_IN_BYTES) {
        return (address[4] & 0xff)
            + "."
            + (address[5] & 0xff)
            + "."
            + (address[6] & 0xff)
            + "."
            + (address[7] & 0xff)
            + ":"
            + port;
      }
      if (family == AF_INET6 && address.length == SOCKADDR_IN6_BYTES) {
        StringBuilder text = new StringBuilder("[");
        for (int group = 0; group < 8; group++) {
          if (group > 0) {
            text.append(':');
          }
          int at = 8 + 2 * group;
          text.append(Integer.toHexString((address[at] & 0xff) << 8 | (address[at + 1] & 0xff)));
        }
        return text.append("]:").append(port).toString();
      }
    }
    int end = 0;
    while (end < address.length && address[end] != 0) {
      if (address[end] < 0x20 || address[end] > 0x7e) {
        return address.length == 0 ? "(empty)" : HexFormat.of().formatHex(address);
      }
      end++;
    }
    if (end == 0) {
      return address.length == 0 ? "(empty)" : HexFormat.of().formatHex(address);
    }
    return new String(address, 0, end, StandardCharsets.US_ASCII);
  }
}
