package dev.dma.libfabric;

import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.dma.api.DmaException;
import dev.dma.libfabric.internal.Abi;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

@Timeout(10)
class PeerAddressTextTest {
  @Test
  void anIpv4SockaddrReadsAsAddressAndPort() {
    byte[] address = new byte[16];
    address[0] = 2; // AF_INET, little-endian
    address[2] = 0x12; // port 4711 = 0x1267, network order
    address[3] = 0x67;
    address[4] = 10;
    address[7] = 2;
    assertEquals("10.0.0.2:4711", PeerAddressText.of(address));
  }

  @Test
  void anIpv6SockaddrReadsBracketed() {
    byte[] address = new byte[28];
    address[0] = 10;
    address[2] = 0x12;
    address[3] = 0x67;
    address[8] = (byte) 0xfe;
    address[9] = (byte) 0x80;
    address[23] = 1;
    assertEquals("[fe80:0:0:0:0:0:0:1]:4711", PeerAddressText.of(address));
  }

  @Test
  void aPrintableNameReadsAsItselfAndAnythingElseInHex() {
    byte[] shm = "fi_shm://4242:0:0\0\0\0".getBytes(StandardCharsets.US_ASCII);
    assertEquals("fi_shm://4242:0:0", PeerAddressText.of(shm));
    assertEquals("01ff", PeerAddressText.of(new byte[] {1, (byte) 0xff}));
    assertEquals("(empty)", PeerAddressText.of(new byte[0]));
  }

  @Test
  void tcpsCancelOnAClosedConnectionMeansAccessDeniedElsewhereTheErrnoDecides() {
    for (String tcp : new String[] {"net", "tcp", "tcp;ofi_rxm", "net;ofi_rxm"}) {
      assertEquals(
          DmaException.Reason.ACCESS_DENIED, CompletionErrors.reason(tcp, Abi.FI_ECANCELED), tcp);
    }
    assertEquals(DmaException.Reason.PROVIDER, CompletionErrors.reason("shm", Abi.FI_ECANCELED));
    assertEquals(
        DmaException.Reason.ACCESS_DENIED, CompletionErrors.reason("sockets", Abi.FI_EACCES));
  }
}
