package dev.dma.provider.efa;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dma.api.Advertisement;
import dev.dma.api.Checksums;
import dev.dma.api.Completion;
import dev.dma.api.DmaConfiguration;
import dev.dma.api.RemoteAccess;
import dev.dma.api.TransferRequest;
import dev.dma.core.FabricServiceGroup;
import dev.dma.core.PassiveTarget;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Every EFA device of this host, as one group on real efa-direct: discovery lists them, a target
 * inserts every device's address (initiator first), and transfers spread over the devices land.
 * Runs only with {@code -Ddma.efa=true} on an EFA host.
 */
class EfaHardwareGroupTest {
  @BeforeAll
  static void hardware() {
    EfaHardware.require(EfaFabric.EFA_DIRECT);
  }

  @Test
  void oneServicePerDeviceAndTransfersLandFromEach() throws Exception {
    DmaConfiguration configuration = DmaConfiguration.builder().providers("efa-direct").build();
    EfaDirectProvider provider = new EfaDirectProvider();
    List<String> devices = provider.discoverDomains(configuration);
    assertFalse(devices.isEmpty());
    System.out.println("EFA devices: " + devices);
    Collector<Buffer> completions = new Collector<>();
    int size = 64 * 1024;
    int count = 256;
    try (Arena arena = Arena.ofShared();
        FabricServiceGroup<Buffer> group =
            FabricServiceGroup.start(configuration, provider, completions);
        PassiveTarget target = PassiveTarget.start(configuration, provider, Duration.ZERO)) {
      assertEquals(devices, group.devices());
      for (byte[] address : group.localAddresses()) {
        target.insertPeer(address);
      }
      MemorySegment remote = arena.allocate((long) size * count, 4096);
      MemorySegment local = arena.allocate((long) size * count, 4096);
      Patterns.fill(local, 99);
      Advertisement ad = target.expose(remote, RemoteAccess.READ_WRITE).advertisement();
      group.addPeer(1, ad.address());
      for (int i = 0; i < count; i++) {
        Advertisement at =
            new Advertisement(ad.address(), ad.remoteKey(), ad.remoteAddress() + (long) i * size);
        assertTrue(
            group.submit(
                TransferRequest.write(1, at, new Buffer(i, local.asSlice((long) i * size, size)))));
      }
      for (Completion<Buffer> done : completions.take(count)) {
        assertTrue(done.outcome().isDone(), () -> done.outcome().error().getMessage());
      }
      assertEquals(Checksums.crc32c(local), Checksums.crc32c(remote));
      assertEquals(0, group.outstanding());
    }
  }
}
