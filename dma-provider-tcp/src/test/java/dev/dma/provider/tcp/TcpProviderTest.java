package dev.dma.provider.tcp;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import dev.dma.api.Advertisement;
import dev.dma.api.Checksums;
import dev.dma.api.DmaConfiguration;
import dev.dma.api.DmaException;
import dev.dma.api.Operands;
import dev.dma.api.RemoteAccess;
import dev.dma.core.FabricProviders;
import dev.dma.core.FabricServiceGroup;
import dev.dma.libfabric.Libfabric;
import dev.dma.libfabric.LibfabricEndpoint;
import dev.dma.libfabric.Loopback;
import dev.dma.spi.CompletionSink;
import dev.dma.spi.ExposedRegion;
import dev.dma.spi.FabricEndpoint;
import dev.dma.spi.FabricProvider;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Arrays;
import java.util.List;
import java.util.function.Supplier;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;
import org.junit.jupiter.params.provider.ValueSource;

/** Provider {@code tcp} over real libfabric on 127.0.0.1. */
class TcpProviderTest {
  static final DmaConfiguration LOOPBACK = DmaConfiguration.builder().bind("127.0.0.1").build();

  /** 127.0.0.1:1 as a sockaddr_in: family 2 (little-endian), port 1 (network order), address. */
  static final byte[] DEAD_PEER = {2, 0, 0, 1, 127, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0};

  @BeforeAll
  static void libfabric() {
    Assumptions.assumeTrue(Libfabric.availability().available(), Libfabric.availability().reason());
  }

  static Supplier<FabricEndpoint> opener() {
    TcpProvider provider = new TcpProvider();
    return () -> provider.open(LOOPBACK);
  }

  @Test
  void isFoundAndSelectedByName() {
    List<FabricProvider> installed = FabricProviders.installed();
    assertTrue(installed.stream().anyMatch(p -> p instanceof TcpProvider), installed.toString());
    FabricProvider selected =
        FabricProviders.select(DmaConfiguration.builder().providers("tcp").build());
    assertInstanceOf(TcpProvider.class, selected);
    assertEquals("tcp", selected.name());
    assertEquals(100, selected.priority());
    assertTrue(selected.availability().available());
    // Naming no provider selects by priority: tcp, never the libfabric family (it needs a name).
    assertInstanceOf(TcpProvider.class, FabricProviders.select(DmaConfiguration.defaults()));
    assertInstanceOf(
        dev.dma.libfabric.LibfabricProvider.class,
        FabricProviders.select("libfabric:sockets", installed));
  }

  @Test
  void choosesByWhatTheLibraryOffersNotByItsVersion() {
    // The rule, whatever library is loaded: tcp wherever it serves RDM with RMA (1.18 to 1.22 are
    // 1.x and have no net), net otherwise.
    assertEquals("tcp", TcpProvider.choose(name -> name.equals("tcp")));
    assertEquals("net", TcpProvider.choose(name -> false));
    // What fi_getinfo says here: tcp serves RDM from 1.18 on (on 1.17 only tcp;ofi_rxm answers).
    boolean tcpServesRdm = Libfabric.version() >= (1 << 16 | 18);
    assertEquals(
        tcpServesRdm, Libfabric.serves(dev.dma.libfabric.EndpointPolicy.of("tcp")), "tcp RDM");
    assertEquals(!tcpServesRdm, Libfabric.serves(dev.dma.libfabric.EndpointPolicy.of("net")));
    String expected = tcpServesRdm ? "tcp" : "net";
    assertEquals(expected, TcpProvider.libfabricProvider());
    try (FabricEndpoint endpoint = opener().get()) {
      assertEquals(expected, endpoint.describe().provider());
      assertEquals(2, endpoint.describe().addrFormat());
      byte[] address = endpoint.localAddress();
      assertEquals(16, address.length);
      assertEquals(127, address[4]);
      assertTrue(endpoint.maxTx() >= 64, "transmit depth " + endpoint.maxTx());
      assertEquals(false, endpoint.requiresLocalRegistration());
    }
    assertTrue(new TcpProvider().discoverDomains(DmaConfiguration.defaults()).contains("lo"));
  }

  @Test
  void withBindTheDefaultDevicesAreThoseServingThatAddress() {
    TcpProvider provider = new TcpProvider();
    List<String> every = provider.discoverDomains(DmaConfiguration.defaults());
    assertTrue(every.contains("lo"), every.toString());
    // On a host with eth0 and lo, unbound lists both; bound to loopback, lo alone.
    assertEquals(List.of("lo"), provider.discoverDomains(LOOPBACK));
    DmaConfiguration bound = LOOPBACK.toBuilder().providers("tcp").build();
    try (FabricServiceGroup<Operands> group =
        FabricServiceGroup.<Operands>builder(bound)
            .provider(provider)
            .completer(batch -> {})
            .start()) {
      assertEquals(List.of("lo"), group.devices(), "a default group bound to 127.0.0.1");
    }
  }

  @Test
  void withoutBindTheEndpointTakesLibfabricsFirstInterface() {
    try (LibfabricEndpoint endpoint =
        (LibfabricEndpoint) new TcpProvider().open(DmaConfiguration.defaults())) {
      byte[] address = endpoint.localAddress();
      assertEquals(2, address[0]); // AF_INET
      System.out.println(
          "tcp without bind: domain "
              + endpoint.domainName()
              + ", address "
              + (address[4] & 0xff)
              + "."
              + (address[5] & 0xff)
              + "."
              + (address[6] & 0xff)
              + "."
              + (address[7] & 0xff)
              + ":"
              + ((address[2] & 0xff) << 8 | (address[3] & 0xff)));
    }
  }

  @Test
  void writesAndReadsLandIntact() {
    long[] sizes = {1, 4096, 1 << 20, 64 << 20};
    try (Loopback loopback = new Loopback(opener())) {
      long max = sizes[sizes.length - 1];
      MemorySegment remote = loopback.arena.allocate(max, 4096);
      MemorySegment local = loopback.arena.allocate(max, 4096);
      try (ExposedRegion region = loopback.expose(remote, RemoteAccess.READ_WRITE)) {
        Advertisement ad = region.advertisement();
        assertEquals(0, ad.remoteAddress(), "tcp addresses by offset");
        long seed = 11;
        for (long size : sizes) {
          MemorySegment source = local.asSlice(0, size);
          Loopback.fill(source, seed++);
          remote.fill((byte) 0);
          loopback.transfer(true, source, 0, ad.remoteKey());
          assertEquals(
              Checksums.crc32c(source), Checksums.crc32c(remote.asSlice(0, size)), "write " + size);
          long offset = size == max ? 0 : 4096;
          MemorySegment far = remote.asSlice(offset, size);
          Loopback.fill(far, seed++);
          MemorySegment landing = local.asSlice(0, size);
          landing.fill((byte) 0);
          loopback.transfer(false, landing, offset, ad.remoteKey());
          assertEquals(Checksums.crc32c(far), Checksums.crc32c(landing), "read " + size);
        }
      }
    }
  }

  /** Frees slots first in first out, so every slot and range is used. */
  static final class FreeSlots implements CompletionSink {
    final int[] ring;
    int head;
    int count;
    int completed;
    String lastError;

    FreeSlots(int slots) {
      ring = new int[slots];
      for (int i = 0; i < slots; i++) {
        ring[i] = i;
      }
      count = slots;
    }

    @Override
    public void completed(int slot) {
      ring[(head + count) % ring.length] = slot;
      count++;
      completed++;
    }

    @Override
    public void failed(int slot, int errno, int providerErrno, String message) {
      ring[(head + count) % ring.length] = slot;
      count++;
      lastError = message;
    }
  }

  @Test
  void tenThousandTransfersThroughAWindowOf64() {
    int transfers = 10_000;
    try (Loopback loopback = new Loopback(opener())) {
      int window = Loopback.SLOTS;
      MemorySegment remote = loopback.arena.allocate(window * 4096L, 4096);
      MemorySegment local = loopback.arena.allocate(window * 4096L, 4096);
      Loopback.fill(local, 5);
      try (ExposedRegion region = loopback.expose(remote, RemoteAccess.READ_WRITE)) {
        long key = region.advertisement().remoteKey();
        FreeSlots slots = new FreeSlots(window);
        int posted = 0;
        long deadline = System.nanoTime() + Loopback.DEADLINE_NS;
        while (slots.completed < transfers) {
          while (posted < transfers && slots.count > 0) {
            int slot = slots.ring[slots.head];
            long offset = slot * 4096L;
            int rc =
                (posted & 1) == 0
                    ? loopback.initiator.postWrite(
                        slot, loopback.peer, local.address() + offset, 4096, 0, offset, key)
                    : loopback.initiator.postRead(
                        slot, loopback.peer, local.address() + offset, 4096, 0, offset, key);
            if (rc == FabricEndpoint.AGAIN) {
              break; // reap, then post again
            }
            assertEquals(FabricEndpoint.POSTED, rc, () -> loopback.initiator.errorText(rc));
            slots.head = (slots.head + 1) % window;
            slots.count--;
            posted++;
          }
          loopback.initiator.reap(slots, window);
          loopback.target.progress();
          if (slots.lastError != null) {
            fail(slots.lastError);
          }
          if (System.nanoTime() > deadline) {
            fail(slots.completed + " of " + transfers + " completed in 60 s");
          }
        }
        assertEquals(Checksums.crc32c(local), Checksums.crc32c(remote));
        assertNotEquals(
            Checksums.crc32c(new byte[window * 4096]), Checksums.crc32c(remote), "nothing landed");
      }
    }
  }

  @Test
  void aPostToADeadPeerIsRefusedOrFailsButNeverCrashes() {
    try (FabricEndpoint endpoint = opener().get();
        Loopback.Arena2 memory = new Loopback.Arena2()) {
      endpoint.openSlots(1);
      long peer = endpoint.insertPeer(DEAD_PEER);
      MemorySegment buffer = memory.arena.allocate(64, 64);
      Loopback.Recorder sink = new Loopback.Recorder(1);
      int again = 0;
      int refused = 0;
      for (int attempt = 0; attempt < 2_000; attempt++) {
        int rc = endpoint.postWrite(0, peer, buffer.address(), 64, 0, 0, 1);
        if (rc == FabricEndpoint.AGAIN) {
          again++;
          endpoint.reap(sink, 1);
          continue;
        }
        if (rc != FabricEndpoint.POSTED) {
          refused++; // refused: fine
          break;
        }
        long deadline = System.nanoTime() + Loopback.DEADLINE_NS;
        while (sink.completed + sink.failed == 0) {
          endpoint.reap(sink, 1);
          assertTrue(System.nanoTime() < deadline, "a write to a dead peer hung");
        }
        assertEquals(0, sink.completed, "a write to 127.0.0.1:1 reported success");
        break;
      }
      assertTrue(again > 0 || refused > 0 || sink.failed > 0);
    }
  }

  @Test
  void closingTheTargetMidStreamFailsOutstandingOperations() {
    try (Loopback loopback = new Loopback(opener())) {
      MemorySegment remote = loopback.arena.allocate(1 << 20, 4096);
      MemorySegment local = loopback.arena.allocate(1 << 20, 4096);
      ExposedRegion region = loopback.expose(remote, RemoteAccess.READ_WRITE);
      long key = region.advertisement().remoteKey();
      loopback.transfer(true, local.asSlice(0, 64), 0, key);
      int posted = 0;
      for (int slot = 0; slot < Loopback.SLOTS; slot++) {
        if (loopback.initiator.postWrite(slot, loopback.peer, local.address(), 1 << 20, 0, 0, key)
            != FabricEndpoint.POSTED) {
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
        assertTrue(
            System.nanoTime() < deadline,
            (sink.completed + sink.failed) + " of " + posted + " reaped");
      }
      assertTrue(sink.failed > 0, "closing the target failed none of " + posted + " writes");
    }
  }

  enum BadAccess {
    WRONG_KEY,
    OUT_OF_BOUNDS,
    NO_WRITE_ACCESS
  }

  @ParameterizedTest
  @EnumSource(BadAccess.class)
  void badRemoteAccessFailsThatOperationWithAnErrorCompletion(BadAccess bad) {
    try (Loopback loopback = new Loopback(opener())) {
      MemorySegment local = loopback.arena.allocate(4096, 4096);
      try (ExposedRegion good =
              loopback.expose(loopback.arena.allocate(4096, 4096), RemoteAccess.READ_WRITE);
          ExposedRegion readOnly =
              loopback.expose(loopback.arena.allocate(4096, 4096), RemoteAccess.READ)) {
        Advertisement ad = good.advertisement();
        loopback.transfer(true, local.asSlice(0, 64), 0, ad.remoteKey());
        long address = 0;
        long key = ad.remoteKey();
        switch (bad) {
          case WRONG_KEY -> key += 1000;
          case OUT_OF_BOUNDS -> address = 4096 - 32;
          case NO_WRITE_ACCESS -> key = readOnly.advertisement().remoteKey();
        }
        assertEquals(
            FabricEndpoint.POSTED,
            loopback.post(true, 1, loopback.peer, local.asSlice(0, 64), address, key));
        assertEquals(2, loopback.await(1), bad + " completed successfully");
        assertTrue(
            loopback.sink.message[1].startsWith("completion error: "), loopback.sink.message[1]);
        assertTrue(loopback.sink.errno[1] > 0);
        // Only that operation: slot 0's earlier write stands, and the initiator still reaches a
        // fresh target.
        assertEquals(1, loopback.sink.state[0]);
        try (FabricEndpoint other = opener().get()) {
          MemorySegment otherMemory = loopback.arena.allocate(4096, 4096);
          local.fill((byte) 0x3c);
          try (ExposedRegion region = other.expose(otherMemory, RemoteAccess.READ_WRITE)) {
            long otherPeer = loopback.initiator.insertPeer(other.localAddress());
            long deadline = System.nanoTime() + Loopback.DEADLINE_NS;
            int rc;
            while ((rc =
                    loopback.initiator.postWrite(
                        2,
                        otherPeer,
                        local.address(),
                        64,
                        0,
                        0,
                        region.advertisement().remoteKey()))
                == FabricEndpoint.AGAIN) {
              loopback.initiator.reap(loopback.sink, 4);
              other.progress();
              assertTrue(System.nanoTime() < deadline);
            }
            assertEquals(FabricEndpoint.POSTED, rc);
            while (loopback.sink.state[2] == 0) {
              loopback.initiator.reap(loopback.sink, 4);
              other.progress();
              assertTrue(System.nanoTime() < deadline);
            }
            assertEquals(1, loopback.sink.state[2], () -> loopback.sink.message[2]);
            assertEquals((byte) 0x3c, otherMemory.get(ValueLayout.JAVA_BYTE, 0));
          }
        }
      }
    }
  }

  @ParameterizedTest
  @ValueSource(ints = {0, 3, 15, 17})
  void truncatedOrLongPeerAddressesFailInsertPeer(int length) {
    try (FabricEndpoint endpoint = opener().get()) {
      byte[] address = Arrays.copyOf(endpoint.localAddress(), length);
      DmaException failure = assertThrows(DmaException.class, () -> endpoint.insertPeer(address));
      assertEquals(DmaException.Kind.FABRIC, failure.kind());
      assertEquals(
          "peer address is "
              + length
              + " bytes, but "
              + endpoint.describe().provider()
              + " addresses are 16 bytes",
          failure.getMessage());
    }
  }

  @Test
  void garbagePeerAddressesFailInsertPeer() {
    try (FabricEndpoint endpoint = opener().get()) {
      byte[] garbage = new byte[16];
      Arrays.fill(garbage, (byte) 0xff);
      DmaException failure = assertThrows(DmaException.class, () -> endpoint.insertPeer(garbage));
      assertEquals(
          "peer address is not a socket address: family 65535, expected 2", failure.getMessage());
    }
  }
}
