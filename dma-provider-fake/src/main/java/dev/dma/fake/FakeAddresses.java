package dev.dma.fake;

import dev.dma.api.Advertisement;
import java.nio.ByteBuffer;
import java.util.Arrays;
import org.jspecify.annotations.Nullable;

/**
 * The fake's address formats. Plain: 16 bytes, {@code "FAKE"}, the fabric's serial (4 bytes) and
 * the endpoint's serial (8 bytes), all of which are the identity. EFA-shaped: 32 bytes, a 16-byte
 * GID ({@code "FAKE"}, the fabric's serial, 8 zero bytes), a 2-byte QPN, a 4-byte QKEY (the
 * endpoint's serial) and 10 zero bytes, whose identity is GID and QPN (18 bytes), as on EFA.
 * Stateless.
 */
final class FakeAddresses {
  static final int PLAIN_BYTES = 16;
  static final int EFA_BYTES = 32;
  static final int EFA_IDENTITY_BYTES = 18;
  private static final byte[] MAGIC = {'F', 'A', 'K', 'E'};

  private FakeAddresses() {}

  static byte[] plain(int fabricSerial, long endpointSerial) {
    return ByteBuffer.allocate(PLAIN_BYTES)
        .put(MAGIC)
        .putInt(fabricSerial)
        .putLong(endpointSerial)
        .array();
  }

  static byte[] efa(int fabricSerial, int qpn, long endpointSerial) {
    return ByteBuffer.allocate(EFA_BYTES)
        .put(MAGIC)
        .putInt(fabricSerial)
        .putLong(0)
        .putShort((short) qpn)
        .putInt((int) endpointSerial)
        .array();
  }

  /**
   * Why {@code address} is not an address of this format, or null when it is.
   *
   * @param address the bytes
   * @param efa whether the EFA-shaped format is expected
   */
  static @Nullable String problem(byte[] address, boolean efa) {
    if (address == null) {
      return "the peer address is null";
    }
    int expected = efa ? EFA_BYTES : PLAIN_BYTES;
    if (address.length != expected) {
      return (efa ? "efa" : "fake") + " address is " + address.length + " bytes, not " + expected;
    }
    if (!Arrays.equals(address, 0, MAGIC.length, MAGIC, 0, MAGIC.length)) {
      return "not a fake fabric address: " + Advertisement.encodeHex(address);
    }
    return null;
  }

  static byte[] identity(byte[] address, boolean efa) {
    return efa ? Arrays.copyOf(address, EFA_IDENTITY_BYTES) : address.clone();
  }
}
