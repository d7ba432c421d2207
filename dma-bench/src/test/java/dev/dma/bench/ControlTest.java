package dev.dma.bench;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import dev.dma.api.Advertisement;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.Test;

class ControlTest {
  @Test
  void handshakeCarriesAdvertisementsAndTheServersAddress() throws Exception {
    Advertisement ad = new Advertisement(new byte[] {1, 2, (byte) 0xfe}, 77, 4096);
    Control.Offer offer =
        new Control.Offer("tcp", "net", List.of(new Control.TargetAd(ad, 1 << 20)));
    List<byte[]> inserted = new CopyOnWriteArrayList<>();
    try (ServerSocket server = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
      Thread thread = new Thread(() -> Control.serve(server, offer, inserted::add, true, m -> {}));
      thread.start();
      try (Control.Session session =
          Control.connect(
              "127.0.0.1", server.getLocalPort(), List.of(new byte[] {9, 8}, new byte[] {7}))) {
        assertEquals("tcp", session.offer().provider());
        assertEquals("net", session.offer().fabric());
        assertEquals(List.of(new Control.TargetAd(ad, 1 << 20)), session.offer().targets());
      }
      thread.join(5_000);
      assertEquals(2, inserted.size(), "both devices' addresses are inserted");
      assertArrayEquals(new byte[] {9, 8}, inserted.get(0));
      assertArrayEquals(new byte[] {7}, inserted.get(1));
    }
  }

  @Test
  void pastedAdvertisements() {
    Control.TargetAd ad = Control.TargetAd.parse("0a0b 12 4096 65536");
    assertEquals(65536, ad.lengthBytes());
    assertEquals("0a0b 12 4096 65536", ad.fields());
    assertEquals(Long.MAX_VALUE, Control.TargetAd.parse("0a0b 12 4096").lengthBytes());
    assertThrows(IllegalArgumentException.class, () -> Control.TargetAd.parse("0a0b 12"));
    assertThrows(IllegalArgumentException.class, () -> Control.TargetAd.parse("zz 12 4"));
  }
}
