package dev.dma.libfabric;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dma.api.Advertisement;
import dev.dma.api.DmaConfiguration;
import dev.dma.api.RemoteAccess;
import dev.dma.spi.ExposedRegion;
import dev.dma.spi.FabricEndpoint;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;

/**
 * rxd ({@code udp;ofi_rxd}) keeps at most {@link InfoFacts#RXD_MAX_DEPTH} operations in flight: a
 * burst of mixed 16 KiB writes and reads through a window of 64 stalled for good under contention
 * (10 of 10 tries with {@link BurstProbe}), through 16 never.
 */
class RxdDepthTest {
  static InfoFacts facts(String provider, long txSize) {
    return new InfoFacts(provider, "f", "d", 0, 0, 2, 3, 0, 1, 2, txSize, 64);
  }

  @Test
  void rxdDepthIsCappedAndOthersAreNot() {
    assertEquals(16, facts("udp;ofi_rxd", 1024).transmitDepth());
    assertEquals(8, facts("udp;ofi_rxd", 8).transmitDepth());
    assertEquals(1024, facts("tcp", 1024).transmitDepth());
    assertEquals(2048, facts("tcp;ofi_rxm", 2048).transmitDepth());
  }

  @Test
  void aBurstAtTheReportedDepthCompletes() {
    Assumptions.assumeTrue(Libfabric.availability().available(), Libfabric.availability().reason());
    Assumptions.assumeTrue(Libfabric.providerNames().contains("udp;ofi_rxd"), "no rxd here");
    DmaConfiguration configuration = DmaConfiguration.builder().bind("127.0.0.1").build();
    EndpointPolicy policy = LibfabricProvider.policyFor("libfabric:udp;ofi_rxd");
    int size = 16 * 1024;
    int operations = 600;
    try (Arena arena = Arena.ofShared();
        LibfabricEndpoint initiator = LibfabricEndpoint.open(policy, configuration);
        LibfabricEndpoint target = LibfabricEndpoint.open(policy, configuration)) {
      int window = initiator.maxTx();
      assertEquals(InfoFacts.RXD_MAX_DEPTH, window, "what the fabric worker will cap in flight at");
      initiator.openSlots(window);
      MemorySegment remote = arena.allocate(2L * window * size, 4096);
      MemorySegment local = arena.allocate((long) window * size, 4096);
      try (ExposedRegion region = target.expose(remote, RemoteAccess.READ_WRITE)) {
        Advertisement ad = region.advertisement();
        long peer = initiator.insertPeer(target.localAddress());
        FreeSlots sink = new FreeSlots(window);
        int posted = 0;
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        while (sink.reaped() < operations) {
          assertTrue(
              System.nanoTime() < deadline,
              "stalled after "
                  + sink.completed
                  + " completions, "
                  + (posted - sink.completed)
                  + " in flight");
          while (posted < operations && sink.any()) {
            int slot = sink.peek();
            boolean write = (posted & 1) == 0;
            long at = ad.remoteAddress() + (long) slot * size + (write ? 0 : (long) window * size);
            long from = local.address() + (long) slot * size;
            int rc =
                write
                    ? initiator.postWrite(slot, peer, from, size, 0, at, ad.remoteKey())
                    : initiator.postRead(slot, peer, from, size, 0, at, ad.remoteKey());
            if (rc == FabricEndpoint.AGAIN) {
              break;
            }
            assertEquals(FabricEndpoint.POSTED, rc);
            sink.take();
            posted++;
          }
          initiator.reap(sink, 16);
          target.progress();
        }
        assertEquals(0, sink.failed, "failed operations");
      }
    }
  }
}
