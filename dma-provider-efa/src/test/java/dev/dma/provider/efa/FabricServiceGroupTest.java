package dev.dma.provider.efa;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dma.api.Advertisement;
import dev.dma.api.Checksums;
import dev.dma.api.Completion;
import dev.dma.api.DmaConfiguration;
import dev.dma.api.DmaException;
import dev.dma.api.RemoteAccess;
import dev.dma.api.TransferRequest;
import dev.dma.core.FabricServiceGroup;
import dev.dma.core.MemoryRegion;
import dev.dma.core.PassiveTarget;
import dev.dma.fake.FakeEndpoint;
import dev.dma.fake.FakeFabric;
import dev.dma.fake.FakeProvider;
import dev.dma.spi.FabricProvider;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.List;
import java.util.Objects;
import org.junit.jupiter.api.Test;

/**
 * {@link FabricServiceGroup} (dma-core) over the EFA providers' rules, on the fake: two fake
 * fabrics, or two endpoints on one, as devices.
 */
class FabricServiceGroupTest {
  private static DmaConfiguration on(List<String> interfaces) {
    return DmaConfiguration.builder().providers("fake").interfaces(interfaces).build();
  }

  @Test
  void discoversEveryDeviceAndReachesEachWithAddPeer() {
    try (FakeFabric first = FakeFabric.create("group-device-a");
        FakeFabric second = FakeFabric.create("group-device-b")) {
      first.script().likeEfaDirect();
      second.script().likeEfaDirect();
      FabricProvider provider = new FakeEfaProvider(EfaFabric.EFA_DIRECT);
      List<String> discovered = provider.discoverDomains(on(List.of()));
      assertTrue(
          discovered.containsAll(List.of("group-device-a", "group-device-b")),
          discovered.toString());
      try (FabricServiceGroup<Buffer> group =
          FabricServiceGroup.start(
              on(List.of("group-device-a", "group-device-b")), provider, batch -> {})) {
        assertEquals(List.of("group-device-a", "group-device-b"), group.devices());
        assertEquals(2, group.services().size());
        assertEquals(2, group.localAddresses().size());
        byte[] client = first.openEndpoint().localAddress();
        group.addPeer(7, client);
        for (DeviceEndpoint each : DeviceEndpoint.of(group, first, second)) {
          assertTrue(each.endpoint().hasPeer(client), "device " + each.name() + " has the client");
        }
        DmaException bad = assertThrows(DmaException.class, () -> group.addPeer(8, new byte[31]));
        assertEquals("efa address is 31 bytes, not 32", bad.getMessage());
      }
    }
  }

  /** Each service's endpoint, found on the fabric it opened on. */
  record DeviceEndpoint(String name, FakeEndpoint endpoint) {
    static List<DeviceEndpoint> of(FabricServiceGroup<Buffer> group, FakeFabric... fabrics) {
      return java.util.stream.IntStream.range(0, fabrics.length)
          .mapToObj(
              i ->
                  new DeviceEndpoint(
                      fabrics[i].name(),
                      Objects.requireNonNull(
                          fabrics[i].endpoint(group.services().get(i).localAddress()))))
          .toList();
    }
  }

  @Test
  void aProviderWithNoDevicesFailsToStart() {
    FakeProvider fake = new FakeProvider();
    FabricProvider none =
        new FabricProvider() {
          @Override
          public String name() {
            return fake.name();
          }

          @Override
          public int priority() {
            return fake.priority();
          }

          @Override
          public dev.dma.spi.Availability availability() {
            return fake.availability();
          }

          @Override
          public dev.dma.spi.FabricEndpoint open(DmaConfiguration configuration) {
            return fake.open(configuration);
          }
        };
    DmaException error =
        assertThrows(
            DmaException.class, () -> FabricServiceGroup.start(on(List.of()), none, batch -> {}));
    assertEquals("provider \"fake\" lists no devices to start a service on", error.getMessage());
  }

  @Test
  void submissionsGoToTheLessLoadedDeviceAndLandExactly() throws Exception {
    // Two endpoints on one fake fabric: two NICs on one network, so either reaches the target.
    try (FakeFabric network = FakeFabric.create("group-network");
        Arena arena = Arena.ofShared()) {
      network.script().likeEfaDirect();
      FabricProvider provider = new FakeEfaProvider(EfaFabric.EFA_DIRECT);
      Collector<Buffer> completions = new Collector<>();
      DmaConfiguration configuration = on(List.of("group-network", "group-network"));
      try (FabricServiceGroup<Buffer> group =
              FabricServiceGroup.start(configuration, provider, completions);
          PassiveTarget target =
              PassiveTarget.start(on(List.of("group-network")), provider, Duration.ZERO)) {
        for (byte[] device : group.localAddresses()) {
          target.insertPeer(device); // initiator first, for every device
        }
        int size = 4096;
        int count = 64;
        MemorySegment remote = arena.allocate((long) size * count, 4096);
        MemorySegment local = arena.allocate((long) size * count, 4096);
        Patterns.fill(local, 42);
        try (MemoryRegion pinned = group.register(local)) {
          assertEquals(local.byteSize(), pinned.lengthBytes());
          Advertisement ad = target.expose(remote, RemoteAccess.READ_WRITE).advertisement();
          // Hold device 0's completions: it stays loaded, so every pick goes to device 1.
          network.script().holdCompletions();
          assertTrue(group.services().get(0).submit(write(ad, local, 0, size)));
          long deadline = System.nanoTime() + 5_000_000_000L;
          while (network.script().heldCompletions() < 1 && System.nanoTime() < deadline) {
            Thread.onSpinWait();
          }
          network.script().stopHolding();
          // One at a time, so device 1 is idle at every pick and device 0 holds one: with two
          // devices the two choices are always both, and the less loaded one wins every time.
          for (int i = 1; i < count; i++) {
            assertTrue(group.submit(write(ad, local, i, size)));
            Completion<Buffer> done = completions.take();
            assertTrue(done.outcome().isDone(), () -> done.outcome().error().getMessage());
          }
          assertEquals(
              1, group.services().get(0).outstanding(), "device 0 kept only its held write");
          network.script().releaseCompletions();
          assertTrue(completions.take().outcome().isDone());
          assertEquals(0, group.outstanding());
          assertEquals(Checksums.crc32c(local), Checksums.crc32c(remote));
        }
      }
      assertEquals(0, network.counters().violations(), network.counters().lastViolation());
    }
  }

  private static TransferRequest<Buffer> write(
      Advertisement ad, MemorySegment local, int i, int size) {
    Advertisement at =
        new Advertisement(ad.address(), ad.remoteKey(), ad.remoteAddress() + (long) i * size);
    return TransferRequest.write(1, at, new Buffer(i, local.asSlice((long) i * size, size)));
  }
}
