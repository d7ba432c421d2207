package dev.dma.libfabric;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import dev.dma.api.Advertisement;
import dev.dma.api.DmaConfiguration;
import dev.dma.api.DmaException;
import dev.dma.api.RemoteAccess;
import dev.dma.spi.ExposedRegion;
import dev.dma.spi.FabricEndpoint;
import java.lang.foreign.MemorySegment;
import java.util.Arrays;
import java.util.function.Supplier;
import java.util.stream.Stream;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Failures stay contained: a dead peer, a target that goes away, bad remote access and malformed
 * addresses each fail the operation or the call they belong to, never the JVM.
 */
class ErrorPathsTest {
  /** 127.0.0.1:1 as a sockaddr_in: family 2 (little-endian), port 1 (network order), address. */
  static final byte[] DEAD_PEER = {2, 0, 0, 1, 127, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0};

  @BeforeAll
  static void libfabric() {
    Assumptions.assumeTrue(Libfabric.availability().available(), Libfabric.availability().reason());
  }

  /** Providers whose error behaviour is sane; shm hangs or crashes on these (LIBFABRIC-FFM 8-9). */
  static Stream<String> socketProviders() {
    return Stream.of("libfabric:tcp;ofi_rxm", "libfabric:sockets", LoopbackTest.xnet());
  }

  static Supplier<FabricEndpoint> opener(String name) {
    LoopbackTest.assumeOffered(name);
    LibfabricProvider provider = new LibfabricProvider();
    DmaConfiguration configuration = LoopbackTest.configuration(name);
    return () -> provider.open(configuration);
  }

  @ParameterizedTest
  @MethodSource("socketProviders")
  void aPostToADeadPeerIsRefusedOrFailsButNeverCrashes(String name) {
    try (FabricEndpoint endpoint = opener(name).get();
        Loopback.Arena2 memory = new Loopback.Arena2()) {
      endpoint.openSlots(1);
      long peer = endpoint.insertPeer(DEAD_PEER);
      MemorySegment buffer = memory.arena.allocate(64, 64);
      buffer.fill((byte) 0xab);
      Loopback.Recorder sink = new Loopback.Recorder(1);
      int again = 0;
      int refused = 0;
      for (int attempt = 0; attempt < 2_000 && sink.failed == 0; attempt++) {
        int rc = endpoint.postWrite(0, peer, buffer.address(), 64, 0, 0, 1);
        if (rc == FabricEndpoint.AGAIN) {
          again++;
          endpoint.reap(sink, 1);
          continue;
        }
        if (rc != FabricEndpoint.POSTED) {
          refused++;
          break;
        }
        // Posted: it must fail, not succeed, and not hang.
        long deadline = System.nanoTime() + Loopback.DEADLINE_NS;
        while (sink.completed == 0 && sink.failed == 0) {
          endpoint.reap(sink, 1);
          if (System.nanoTime() > deadline) {
            fail("a write to a dead peer neither completed nor failed in 60 s");
          }
        }
        assertEquals(0, sink.completed, "a write to 127.0.0.1:1 reported success");
      }
      assertTrue(again > 0 || refused > 0 || sink.failed > 0);
      System.out.println(
          name
              + " dead peer: again="
              + again
              + " refused="
              + refused
              + " failed="
              + sink.failed
              + (sink.message[0] == null ? "" : " (" + sink.message[0] + ")"));
    }
  }

  @ParameterizedTest
  @MethodSource("socketProviders")
  void closingTheTargetMidStreamFailsOutstandingOperations(String name) {
    try (Loopback loopback = new Loopback(opener(name))) {
      MemorySegment remote = loopback.arena.allocate(1 << 20, 4096);
      MemorySegment local = loopback.arena.allocate(1 << 20, 4096);
      ExposedRegion region = loopback.expose(remote, RemoteAccess.READ_WRITE);
      Advertisement ad = region.advertisement();
      loopback.transfer(true, local.asSlice(0, 64), ad.remoteAddress(), ad.remoteKey());
      int posted = 0;
      for (int slot = 0; slot < Loopback.SLOTS; slot++) {
        int rc =
            loopback.initiator.postWrite(
                slot,
                loopback.peer,
                local.address(),
                local.byteSize(),
                0,
                ad.remoteAddress(),
                ad.remoteKey());
        if (rc != FabricEndpoint.POSTED) {
          break;
        }
        posted++;
      }
      assertTrue(posted > 0);
      region.close();
      loopback.target.close();
      Loopback.Recorder sink = new Loopback.Recorder(Loopback.SLOTS);
      long deadline = System.nanoTime() + Loopback.DEADLINE_NS;
      while (sink.completed + sink.failed < posted) {
        loopback.initiator.reap(sink, Loopback.SLOTS);
        if (System.nanoTime() > deadline) {
          fail((sink.completed + sink.failed) + " of " + posted + " reaped in 60 s");
        }
      }
      assertTrue(sink.failed > 0, "closing the target failed none of " + posted + " writes");
      System.out.println(
          name + " target closed: " + sink.completed + " ok, " + sink.failed + " failed");
    }
  }

  enum BadAccess {
    WRONG_KEY,
    OUT_OF_BOUNDS,
    NO_WRITE_ACCESS
  }

  static Stream<org.junit.jupiter.params.provider.Arguments> badAccesses() {
    return socketProviders()
        .flatMap(
            name ->
                Arrays.stream(BadAccess.values())
                    .map(bad -> org.junit.jupiter.params.provider.Arguments.of(name, bad)));
  }

  @ParameterizedTest
  @MethodSource("badAccesses")
  void badRemoteAccessFailsThatOperationOnly(String name, BadAccess bad) {
    Supplier<FabricEndpoint> opener = opener(name);
    try (Loopback loopback = new Loopback(opener)) {
      MemorySegment remote = loopback.arena.allocate(4096, 4096);
      MemorySegment local = loopback.arena.allocate(4096, 4096);
      local.fill((byte) 0x5a);
      try (ExposedRegion good = loopback.expose(remote, RemoteAccess.READ_WRITE);
          ExposedRegion readOnly =
              loopback.expose(loopback.arena.allocate(4096, 4096), RemoteAccess.READ)) {
        Advertisement ad = good.advertisement();
        loopback.transfer(true, local.asSlice(0, 64), ad.remoteAddress(), ad.remoteKey());
        long address = ad.remoteAddress();
        long key = ad.remoteKey();
        switch (bad) {
          case WRONG_KEY -> key = key + 1000;
          case OUT_OF_BOUNDS -> address = address + 4096 - 32;
          case NO_WRITE_ACCESS -> {
            address = readOnly.advertisement().remoteAddress();
            key = readOnly.advertisement().remoteKey();
          }
        }
        int rc = loopback.post(true, 1, loopback.peer, local.asSlice(0, 64), address, key);
        assertEquals(FabricEndpoint.POSTED, rc);
        assertEquals(2, loopback.await(1), name + " " + bad + " completed successfully");
        String message = loopback.sink.message[1];
        assertTrue(
            message.matches(
                "completion error: .+ \\(err=\\d+\\)(; provider: .*)?"
                    + " \\(prov_errno=-?\\d+[^)]*\\)"),
            message);
        // xnet (net, tcp, and rxm over them) stores a stale errno with its cancellations: its text
        // must not pose as the cause.
        assertFalse(message.contains("No such file or directory"), message);
        assertFalse(message.contains("Operation now in progress"), message);
        if (message.contains("Operation canceled")) {
          assertTrue(message.contains("the connection to the peer closed"), message);
        }
        assertNotEquals(0, loopback.sink.errno[1]);
        System.out.println(name + " " + bad + ": " + message);

        // The initiator stays usable: a fresh target takes a write.
        try (FabricEndpoint other = opener.get()) {
          MemorySegment otherMemory = loopback.arena.allocate(4096, 4096);
          try (ExposedRegion region = other.expose(otherMemory, RemoteAccess.READ_WRITE)) {
            long otherPeer = loopback.initiator.insertPeer(other.localAddress());
            Advertisement otherAd = region.advertisement();
            long deadline = System.nanoTime() + Loopback.DEADLINE_NS;
            int posted;
            while ((posted =
                    loopback.initiator.postWrite(
                        2,
                        otherPeer,
                        local.address(),
                        64,
                        0,
                        otherAd.remoteAddress(),
                        otherAd.remoteKey()))
                == FabricEndpoint.AGAIN) {
              loopback.initiator.reap(loopback.sink, 4);
              other.progress();
              assertTrue(System.nanoTime() < deadline, "stuck at -FI_EAGAIN");
            }
            assertEquals(FabricEndpoint.POSTED, posted);
            loopback.sink.state[2] = 0;
            while (loopback.sink.state[2] == 0) {
              loopback.initiator.reap(loopback.sink, 4);
              other.progress();
              assertTrue(System.nanoTime() < deadline, "write to a fresh target did not complete");
            }
            assertEquals(1, loopback.sink.state[2], () -> loopback.sink.message[2]);
            assertEquals(0x5a, otherMemory.get(java.lang.foreign.ValueLayout.JAVA_BYTE, 63));
          }
        }
      }
    }
  }

  @org.junit.jupiter.api.Test
  void completionMessagesLeaveOutStaleOrEmptyProviderText() {
    // net/tcp cancel with a stale errno: the cause is named, the errno text is not shown.
    String canceled = CompletionErrors.message("net", 125, 2, "No such file or directory");
    assertFalse(canceled.contains("No such file or directory"), canceled);
    assertTrue(
        canceled.startsWith(
            "completion error: Operation canceled (err=125); provider: the"
                + " connection to the peer closed"),
        canceled);
    assertTrue(canceled.endsWith("(prov_errno=2, a stale errno, not the cause)"), canceled);
    String rxm = CompletionErrors.message("tcp;ofi_rxm", 125, 115, "Operation now in progress");
    assertFalse(rxm.contains("Operation now in progress"), rxm);
    assertTrue(rxm.contains("the connection to the peer closed"), rxm);
    assertEquals(
        "completion error: Input/output error (err=5)",
        CompletionErrors.message("shm", 5, 0, "Success"));
    assertEquals(
        "completion error: Permission denied (err=13); provider: the target refused the"
            + " remote key, address range or access (prov_errno=-13)",
        CompletionErrors.message("sockets", 13, -13, "Permission denied"));
    assertEquals(
        "completion error: Input/output error (err=5); provider: bad thing (prov_errno=9)",
        CompletionErrors.message("efa", 5, 9, "bad thing"));
  }

  @org.junit.jupiter.api.Test
  void socketsNamesAPeerThatNothingAnswersFor() {
    try (java.lang.foreign.Arena arena = java.lang.foreign.Arena.ofConfined();
        FabricEndpoint endpoint = opener("libfabric:sockets").get()) {
      endpoint.openSlots(1);
      // 127.0.0.1:1, where nothing listens: a peer that never started.
      byte[] dead = {2, 0, 0, 1, 127, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0};
      long peer = endpoint.insertPeer(dead);
      MemorySegment local = arena.allocate(64, 64);
      int rc = endpoint.postWrite(0, peer, local.address(), 64, 0, 0, 1);
      assertEquals(-2, rc, "sockets answers a failed connect with -FI_ENOENT");
      String text = endpoint.errorText(rc);
      assertTrue(text.startsWith("No such file or directory: sockets could not connect"), text);
    }
  }

  static Stream<String> allProviders() {
    return LoopbackTest.providers();
  }

  @ParameterizedTest
  @MethodSource("allProviders")
  void malformedPeerAddressesNeverReachTheAddressVector(String name) {
    try (FabricEndpoint endpoint = opener(name).get()) {
      byte[] own = endpoint.localAddress();
      DmaException truncated =
          assertThrows(
              DmaException.class, () -> endpoint.insertPeer(Arrays.copyOf(own, own.length - 1)));
      assertEquals(DmaException.Kind.FABRIC, truncated.kind());
      // A socket address of another length; an address string (shm) without its NUL.
      assertTrue(
          truncated.getMessage().contains("bytes")
              || truncated.getMessage().contains("NUL-terminated"),
          truncated.getMessage());
      assertThrows(DmaException.class, () -> endpoint.insertPeer(new byte[0]));
      assertThrows(DmaException.class, () -> endpoint.insertPeer(new byte[3]));
      byte[] garbage = new byte[own.length];
      Arrays.fill(garbage, (byte) 0xee);
      DmaException bad = assertThrows(DmaException.class, () -> endpoint.insertPeer(garbage));
      assertTrue(bad.getMessage().startsWith("peer address is not"), bad.getMessage());
      assertThrows(DmaException.class, () -> endpoint.peerIdentity(garbage));
      // Its own address is fine, and posting against a handle never handed out is refused.
      long handle = endpoint.insertPeer(own);
      endpoint.openSlots(1);
      assertEquals(-22, endpoint.postWrite(0, handle + 1000, 0, 1, 0, 0, 0));
      assertEquals(0, endpoint.removePeer(handle));
      assertEquals(
          -22,
          endpoint.postWrite(0, handle, 0, 1, 0, 0, 0),
          "a removed handle must not reach libfabric");
    }
  }

  @Test
  void openFailuresNameTheStep() {
    DmaException unknown =
        assertThrows(
            DmaException.class,
            () ->
                LibfabricEndpoint.open(
                    EndpointPolicy.of("no-such-provider"), DmaConfiguration.defaults()));
    assertEquals("fi_getinfo: No data available (-61)", unknown.getMessage());
    DmaException domain =
        assertThrows(
            DmaException.class,
            () ->
                LibfabricEndpoint.open(
                    EndpointPolicy.of("tcp;ofi_rxm"),
                    DmaConfiguration.builder()
                        .interfaces(java.util.List.of("nonexistent0"))
                        .bind("127.0.0.1")
                        .build()));
    assertEquals("no fabric domain named \"nonexistent0\"", domain.getMessage());
  }
}
