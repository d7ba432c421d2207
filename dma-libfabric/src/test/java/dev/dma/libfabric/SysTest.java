package dev.dma.libfabric;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dma.api.DmaConfiguration;
import dev.dma.libfabric.internal.Native;
import dev.dma.spi.EndpointInfo;
import java.util.List;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** Link and smoke (SEED-SPEC 11, {@code sys}), plus what an open endpoint reports. */
class SysTest {
  @BeforeAll
  static void libfabric() {
    Assumptions.assumeTrue(Libfabric.availability().available(), Libfabric.availability().reason());
  }

  @Test
  void reportsAVersion() {
    assertTrue(Libfabric.version() > 0);
    assertTrue(Libfabric.apiVersion() > 0 && Libfabric.apiVersion() <= Libfabric.version());
  }

  @Test
  void discoversTheTcpProvider() {
    List<String> names = Libfabric.providerNames();
    assertTrue(names.stream().anyMatch(name -> name.contains("tcp")), names.toString());
  }

  /** The kernel's answer ShmFailedReads relies on: mapped, not mapped, cannot tell. */
  @Test
  void processMappedTellsMappedFromUnmappedFromUnknown() {
    long self = ProcessHandle.current().pid();
    try (java.lang.foreign.Arena arena = java.lang.foreign.Arena.ofConfined()) {
      long mapped = arena.allocate(8192, 4096).address();
      assertEquals(1, Native.processMapped(self, mapped, 8192));
      assertEquals(1, Native.processMapped(self, mapped + 8191, 1));
      // Below vm.mmap_min_addr nothing is ever mapped; a range running past a mapping's end
      // reads its first byte and not its last.
      assertEquals(0, Native.processMapped(self, 0x8000, 64));
      assertEquals(0, Native.processMapped(self, mapped, 1L << 46));
    }
    // No such process (beyond pid_max): the kernel cannot say.
    assertEquals(-1, Native.processMapped(1L << 30, 0x10000, 1));
  }

  @Test
  void loadingKeepsTheJvmsSignalHandlers() {
    long before = Native.currentSegvHandler();
    Libfabric.providerNames();
    try (var _ = new LibfabricProvider().open(LoopbackTest.configuration("libfabric:shm"))) {
      assertEquals(
          before, Native.currentSegvHandler(), "fi_endpoint(shm) replaced the SIGSEGV handler");
    }
  }

  @Test
  void describesWhatLibfabricReturned() {
    try (LibfabricEndpoint endpoint =
        LibfabricEndpoint.open(
            EndpointPolicy.of("tcp;ofi_rxm"),
            DmaConfiguration.builder().bind("127.0.0.1").build())) {
      EndpointInfo info = endpoint.describe();
      assertEquals("tcp;ofi_rxm", info.provider());
      assertEquals(2, info.addrFormat());
      assertEquals(16, endpoint.localAddress().length);
      assertEquals("lo", endpoint.domainName());
      assertFalse(info.requiresLocalMr());
      assertEquals(6, info.lines().size());
      assertTrue(endpoint.maxTx() > 0);
    }
    try (LibfabricEndpoint endpoint =
        LibfabricEndpoint.open(EndpointPolicy.of("shm"), DmaConfiguration.defaults())) {
      assertTrue(endpoint.describe().usesVirtualAddressing(), "shm returns FI_MR_VIRT_ADDR");
      assertTrue(new String(endpoint.localAddress()).startsWith("fi_shm://"));
    }
  }

  @Test
  void discoversDomains() {
    List<String> domains =
        new LibfabricProvider()
            .discoverDomains(DmaConfiguration.builder().providers("libfabric:tcp;ofi_rxm").build());
    assertTrue(domains.contains("lo"), domains.toString());
    assertEquals(domains.stream().distinct().toList(), domains);
  }

  @Test
  void peerIdentityIsThePoliciesPrefix() {
    DmaConfiguration loopback = DmaConfiguration.builder().bind("127.0.0.1").build();
    try (LibfabricEndpoint all =
            LibfabricEndpoint.open(EndpointPolicy.of("tcp;ofi_rxm"), loopback);
        LibfabricEndpoint prefix =
            LibfabricEndpoint.open(
                EndpointPolicy.of("tcp;ofi_rxm").withIdentityLength(8), loopback)) {
      byte[] address = all.localAddress();
      assertEquals(16, all.peerIdentity(address).length);
      assertEquals(
          java.util.Arrays.toString(java.util.Arrays.copyOf(address, 8)),
          java.util.Arrays.toString(prefix.peerIdentity(address)));
    }
  }

  @Test
  void aClosedEndpointRefusesWorkInsteadOfCrashing() {
    LibfabricEndpoint endpoint =
        LibfabricEndpoint.open(
            EndpointPolicy.of("tcp;ofi_rxm"), DmaConfiguration.builder().bind("127.0.0.1").build());
    endpoint.openSlots(2);
    long peer = endpoint.insertPeer(endpoint.localAddress());
    endpoint.close();
    endpoint.close();
    Loopback.Recorder sink = new Loopback.Recorder(2);
    org.junit.jupiter.api.Assertions.assertThrows(
        dev.dma.api.DmaException.class, () -> endpoint.reap(sink, 2));
    org.junit.jupiter.api.Assertions.assertThrows(
        dev.dma.api.DmaException.class, endpoint::progress);
    assertEquals(-22, endpoint.postWrite(0, peer, 0, 1, 0, 0, 0));
    assertEquals(-22, endpoint.postRead(0, peer, 0, 1, 0, 0, 0));
    org.junit.jupiter.api.Assertions.assertThrows(
        dev.dma.api.DmaException.class, () -> endpoint.insertPeer(endpoint.localAddress()));
  }

  @Test
  void acceptsLibfabricNames() {
    LibfabricProvider provider = new LibfabricProvider();
    assertTrue(provider.accepts("libfabric:sockets"));
    assertTrue(provider.accepts("libfabric:efa/efa-direct"));
    assertFalse(provider.accepts("libfabric:"));
    assertFalse(provider.accepts("tcp"));
    EndpointPolicy policy = LibfabricProvider.policyFor("libfabric:efa/efa-direct");
    assertEquals("efa", policy.providerName());
    assertEquals("efa-direct", policy.fabricName());
  }
}
