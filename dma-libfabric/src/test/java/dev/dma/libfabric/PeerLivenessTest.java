package dev.dma.libfabric;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dma.api.Advertisement;
import dev.dma.api.RemoteAccess;
import dev.dma.spi.ExposedRegion;
import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.channels.ServerSocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * {@link LibfabricEndpoint#peerGone} against real endpoints: an open peer is never gone, and being
 * probed leaves it serving; a closed one is gone, on every provider that can look.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class PeerLivenessTest {

  static Stream<String> providers() {
    return Stream.of(
        "libfabric:tcp;ofi_rxm", "libfabric:sockets", "libfabric:shm", LoopbackTest.xnet());
  }

  @ParameterizedTest
  @MethodSource("providers")
  void anOpenPeerIsNotGoneAndAClosedOneIs(String name) throws InterruptedException {
    try (Loopback loopback = new Loopback(ErrorPathsTest.opener(name))) {
      byte[] address = loopback.target.localAddress();
      for (int i = 0; i < 3; i++) {
        assertNull(loopback.initiator.peerGone(address), name + ": an open peer looked gone");
      }
      // Probed three times, it still serves: the write lands.
      MemorySegment remote = loopback.arena.allocate(4096, 4096);
      MemorySegment source = loopback.arena.allocate(4096, 4096);
      Loopback.fill(source, 7);
      try (ExposedRegion region = loopback.expose(remote, RemoteAccess.READ_WRITE)) {
        Advertisement ad = region.advertisement();
        loopback.transfer(true, source, Loopback.remote(ad, 0), ad.remoteKey());
        assertEquals(-1L, source.mismatch(remote));
      }
      loopback.target.close();
      // An address found listening is not tried again for a second (tcp); shm answers at once.
      long closedAt = System.nanoTime();
      String gone = loopback.initiator.peerGone(address);
      while (gone == null && System.nanoTime() - closedAt < TimeUnit.SECONDS.toNanos(5)) {
        Thread.sleep(50);
        gone = loopback.initiator.peerGone(address);
      }
      long tookMs = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - closedAt);
      assertNotNull(gone, name + ": a closed peer did not look gone");
      assertTrue(
          tookMs < TimeUnit.NANOSECONDS.toMillis(PeerLiveness.REPROBE_NANOS) + 500,
          name + ": took " + tookMs + " ms");
      assertTrue(gone.contains(PeerAddressText.of(address)), gone);
    }
  }

  @Test
  void shmTellsAnExitedProcessFromALiveOne() throws Exception {
    // A live process whose region file does not exist: gone (the endpoint closed).
    long self = ProcessHandle.current().pid();
    String closed = PeerLiveness.shmGone(shmAddress(self + ":0:99999"));
    assertNotNull(closed);
    assertTrue(closed.contains("no longer exists"), closed);
    // A process that exited: gone, whatever its files.
    Process exited = new ProcessBuilder("true").start();
    assertTrue(exited.waitFor(30, TimeUnit.SECONDS));
    String dead = PeerLiveness.shmGone(shmAddress(exited.pid() + ":0:0"));
    assertNotNull(dead);
    assertTrue(dead.contains("has exited"), dead);
    // Not an shm name: nothing to tell.
    assertNull(PeerLiveness.shmGone(new byte[] {2, 0, 0, 1, 127, 0, 0, 1}));
  }

  @Test
  void udpAndEfaCannotTell() {
    PeerLiveness rxd = new PeerLiveness("udp;ofi_rxd");
    byte[] loopbackPort1 = loopback(1);
    assertNull(rxd.gone(loopbackPort1));
    assertNull(new PeerLiveness("efa").gone(new byte[32]));
    // The same address on tcp: port 1 on loopback refuses.
    try (PeerLiveness tcp = new PeerLiveness("tcp")) {
      assertNotNull(tcp.gone(loopbackPort1));
    }
  }

  /**
   * A peer in the middle of exiting: its kernel completes the probe's connection to its listener,
   * then closes the listener (here as soon as the connection waits in its queue), which resets the
   * connection. That is gone, not listening; a listener that stays open and quiet is listening.
   */
  @Test
  void aListenerThatClosesAsTheProbeConnectsIsGoneAndAQuietOneIsNot() throws Exception {
    try (PeerLiveness tcp = new PeerLiveness("tcp")) {
      ServerSocketChannel closing = listener();
      int port = ((InetSocketAddress) closing.getLocalAddress()).getPort();
      Thread closer =
          Thread.ofPlatform()
              .start(
                  () -> {
                    // Closed only once the probe's connection is established in its queue, so the
                    // probe connects first whatever the scheduler does (bounded: 10 s).
                    long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
                    while (!queued(port) && System.nanoTime() < until) {
                      LockSupport.parkNanos(100_000L);
                    }
                    try {
                      closing.close();
                    } catch (IOException ignored) {
                      // a test listener
                    }
                  });
      String gone = tcp.gone(addressOf(closing));
      assertTrue(closer.join(Duration.ofSeconds(20)));
      assertNotNull(gone, "a listener closed after the probe connected looked open");
      assertTrue(gone.contains("closed with a connection attempt in its queue"), gone);

      try (ServerSocketChannel quiet = listener()) {
        long started = System.nanoTime();
        assertNull(tcp.gone(addressOf(quiet)), "an open listener looked gone");
        long tookNanos = System.nanoTime() - started;
        assertTrue(
            tookNanos < PeerLiveness.SETTLE_NANOS + TimeUnit.SECONDS.toNanos(1),
            "took " + tookNanos / 1_000_000 + " ms");
      }
    }
  }

  /**
   * Whether an established connection to local {@code port} is in the kernel's tables (tcp6 too:
   * Java's channels are dual-stack sockets, listed there even when bound to 127.0.0.1).
   */
  private static boolean queued(int port) {
    String local = String.format(":%04X", port);
    for (String table : new String[] {"/proc/net/tcp", "/proc/net/tcp6"}) {
      try {
        for (String line : Files.readAllLines(Path.of(table))) {
          String[] fields = line.trim().split("\\s+");
          // sl, local_address, rem_address, st: 01 is ESTABLISHED.
          if (fields.length > 3 && fields[1].endsWith(local) && fields[3].equals("01")) {
            return true;
          }
        }
      } catch (IOException unreadable) {
        // no such table (IPv6 off): the other one answers
      }
    }
    return false;
  }

  private static ServerSocketChannel listener() throws IOException {
    ServerSocketChannel listener = ServerSocketChannel.open();
    listener.bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0));
    return listener;
  }

  private static byte[] addressOf(ServerSocketChannel listener) throws IOException {
    return loopback(((InetSocketAddress) listener.getLocalAddress()).getPort());
  }

  /**
   * 127.0.0.1:{@code port} as a {@code sockaddr_in} the way libfabric holds it: family in host
   * order, port in network order.
   */
  private static byte[] loopback(int port) {
    return new byte[] {2, 0, (byte) (port >> 8), (byte) port, 127, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0};
  }

  private static byte[] shmAddress(String file) {
    return ("fi_shm://" + file + "\0").getBytes(StandardCharsets.US_ASCII);
  }
}
