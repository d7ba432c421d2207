package dev.dma.libfabric;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dma.api.Advertisement;
import dev.dma.api.DmaConfiguration;
import dev.dma.api.RemoteAccess;
import dev.dma.spi.FabricEndpoint;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.Arrays;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Many passive endpoints on one domain, progressed by one completion queue: each has its own
 * address, each advertises its own window of the one registration, writes land in the window they
 * were sent to and nowhere else, and a removed endpoint's window is left alone.
 */
class PassiveEndpointsTest {
  private static final long WINDOW = 4096;

  @BeforeAll
  static void libfabric() {
    Assumptions.assumeTrue(Libfabric.availability().available(), Libfabric.availability().reason());
  }

  @ParameterizedTest
  @ValueSource(strings = {"xnet", "libfabric:shm"})
  @Timeout(120)
  void writesLandInEachEndpointsOwnWindow(String which) {
    String name = which.equals("xnet") ? LoopbackTest.xnet() : which;
    LoopbackTest.assumeOffered(name);
    DmaConfiguration configuration = LoopbackTest.configuration(name);
    EndpointPolicy policy = LibfabricProvider.policyFor(name);
    try (Arena arena = Arena.ofConfined();
        FabricEndpoint initiator = LibfabricEndpoint.open(policy, configuration)) {
      MemorySegment memory = arena.allocate(3 * WINDOW, 4096);
      MemorySegment source = arena.allocate(WINDOW, 4096);
      try (PassiveEndpoints set =
          PassiveEndpoints.open(policy, configuration, memory, RemoteAccess.READ_WRITE)) {
        assertFalse(set.provider().isEmpty());
        Advertisement[] ads = new Advertisement[3];
        for (int i = 0; i < 3; i++) {
          assertEquals(i, set.add());
          ads[i] = set.advertisement(i, i * WINDOW, WINDOW);
        }
        assertEquals(3, set.size());
        assertFalse(Arrays.equals(ads[0].address(), ads[2].address()), "addresses of their own");
        set.remove(1);
        assertEquals(2, set.size());
        initiator.openSlots(1);
        long descriptor = 0;
        if (initiator.requiresLocalRegistration()) {
          descriptor = initiator.descriptor(initiator.register(source.address(), WINDOW));
        }
        for (int i : new int[] {0, 2}) {
          source.fill((byte) (0x10 + i));
          long peer = initiator.insertPeer(ads[i].address());
          write(initiator, set, source, descriptor, peer, ads[i]);
        }
        for (int i = 0; i < 3; i++) {
          byte expected = i == 1 ? 0 : (byte) (0x10 + i);
          MemorySegment window = memory.asSlice(i * WINDOW, WINDOW);
          for (long b = 0; b < WINDOW; b++) {
            assertEquals(
                expected,
                window.get(java.lang.foreign.ValueLayout.JAVA_BYTE, b),
                "window " + i + " byte " + b);
          }
        }
        assertEquals(0, set.errors());
      }
    }
  }

  /** Posts one write and pumps the initiator and the set until it completes, bounded. */
  private static void write(
      FabricEndpoint initiator,
      PassiveEndpoints set,
      MemorySegment source,
      long descriptor,
      long peer,
      Advertisement ad) {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
    int rc;
    while ((rc =
            initiator.postWrite(
                0, peer, source.address(), WINDOW, descriptor, ad.remoteAddress(), ad.remoteKey()))
        == FabricEndpoint.AGAIN) {
      initiator.progress();
      set.progress();
      assertTrue(System.nanoTime() < deadline, "post kept answering -FI_EAGAIN");
    }
    assertEquals(FabricEndpoint.POSTED, rc);
    Loopback.Recorder sink = new Loopback.Recorder(1);
    while (sink.completed + sink.failed == 0) {
      initiator.reap(sink, 1);
      set.progress();
      assertTrue(System.nanoTime() < deadline, "the write did not complete in 60 s");
    }
    assertEquals(1, sink.completed, "write failed: " + sink.message[0]);
  }
}
