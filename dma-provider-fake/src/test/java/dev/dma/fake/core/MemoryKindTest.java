package dev.dma.fake.core;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dma.api.Advertisement;
import dev.dma.api.Checksum;
import dev.dma.api.Completion;
import dev.dma.api.Direction;
import dev.dma.api.DmaConfiguration;
import dev.dma.api.DmaException;
import dev.dma.api.MemoryKind;
import dev.dma.api.Operands;
import dev.dma.api.RemoteAccess;
import dev.dma.api.TransferRequest;
import dev.dma.core.AsyncFabricService;
import dev.dma.core.FabricService;
import dev.dma.core.FabricServiceGroup;
import dev.dma.core.internal.Intake;
import dev.dma.fake.FakeEndpoint;
import dev.dma.fake.FakeFabric;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A context's {@link MemoryKind} reaches intake and the provider: a checksummed transfer of memory
 * the CPU cannot read is refused before anything is posted, and the kind of every other transfer
 * reaches the endpoint's {@code register}.
 */
@Timeout(60)
class MemoryKindTest {

  /** A test-only kind: device memory the CPU cannot read, registered through a device iface. */
  private record DeviceKind(String name, boolean cpuReadable, int hmemIface)
      implements MemoryKind {}

  private static final MemoryKind DEVICE = new DeviceKind("TEST_DEVICE", false, 1);

  /** A context over one segment (really host memory) that reports the kind it is given. */
  private record Kinded(long id, MemorySegment segment, MemoryKind kind) implements Operands {
    @Override
    public MemorySegment source() {
      return segment;
    }

    @Override
    public MemorySegment allocate(long lengthBytes) {
      return segment;
    }

    @Override
    public MemoryKind memoryKind() {
      return kind;
    }
  }

  @Test
  void aChecksummedTransferOfMemoryTheCpuCannotReadIsRefusedAtIntakeWithNothingPosted()
      throws Exception {
    Recorder<Kinded> recorder = new Recorder<>();
    try (FakeFabric fabric = FakeFabric.create("memory-kind-checksum");
        Arena arena = Arena.ofShared()) {
      fabric.script().requireLocalRegistration(true);
      FakeEndpoint target = fabric.openEndpoint();
      MemorySegment remote = arena.allocate(4096);
      Advertisement ad = target.expose(remote, RemoteAccess.READ_WRITE).advertisement();
      DmaConfiguration configuration =
          DmaConfiguration.builder().providers("fake").interfaces(List.of(fabric.name())).build();
      try (FabricService<Kinded> service =
          FabricService.<Kinded>builder(configuration).completer(recorder).start()) {
        long postsBefore = fabric.counters().postAttempts();
        long registrationsBefore = fabric.counters().registrations();
        MemorySegment local = arena.allocate(4096);
        int id = 0;
        for (Direction direction : List.of(Direction.TO_PEER, new Direction.FromPeer(4096))) {
          assertTrue(
              service.submit(
                  TransferRequest.of(1, ad, direction, new Kinded(++id, local, DEVICE))
                      .withChecksum(Checksum.CRC32C)));
          Completion<Kinded> refused = recorder.take();
          DmaException error = refused.outcome().error();
          assertEquals(DmaException.Reason.BAD_REQUEST, error.reason(), direction.toString());
          assertEquals(Intake.unreadableChecksum(DEVICE), error.getMessage());
          assertEquals(
              "a checksummed transfer's operand is TEST_DEVICE memory, which the CPU cannot read"
                  + " to take its checksum; send it without a checksum, or copy it to host memory"
                  + " first",
              error.getMessage());
          assertEquals(DmaException.TargetMemory.UNCHANGED, error.targetMemory());
          assertEquals(0, refused.posts());
        }
        assertEquals(postsBefore, fabric.counters().postAttempts(), "nothing was posted");
        assertEquals(registrationsBefore, fabric.counters().registrations(), "nothing registered");

        // The same memory without a checksum goes through, and so does a checksummed host one.
        assertTrue(service.submit(TransferRequest.write(1, ad, new Kinded(++id, local, DEVICE))));
        Completion<Kinded> plain = recorder.take();
        assertTrue(plain.outcome().isDone(), () -> plain.outcome().error().toString());
        assertTrue(
            service.submit(
                TransferRequest.write(1, ad, new Kinded(++id, local, MemoryKind.HOST))
                    .withChecksum(Checksum.CRC32C)));
        Completion<Kinded> summed = recorder.take();
        assertTrue(summed.outcome().isDone(), () -> summed.outcome().error().toString());
        assertEquals(0, service.outstanding());
      }
      target.close();
    }
  }

  @Test
  void theAsyncApiCarriesTheContextsKind() throws Exception {
    try (FakeFabric fabric = FakeFabric.create("memory-kind-async");
        Arena arena = Arena.ofShared()) {
      fabric.script().requireLocalRegistration(true);
      FakeEndpoint target = fabric.openEndpoint();
      MemorySegment remote = arena.allocate(4096);
      Advertisement ad = target.expose(remote, RemoteAccess.READ_WRITE).advertisement();
      DmaConfiguration configuration =
          DmaConfiguration.builder().providers("fake").interfaces(List.of(fabric.name())).build();
      try (AsyncFabricService<Kinded> service = AsyncFabricService.start(configuration)) {
        FakeEndpoint initiator =
            fabric.endpoints().stream().filter(e -> e != target).findFirst().orElseThrow();
        MemorySegment local = arena.allocate(64);
        // A checksum over memory the CPU cannot read is refused through the futures too.
        CompletableFuture<Completion<Kinded>> refused =
            service.transfer(
                TransferRequest.write(1, ad, new Kinded(1, local, DEVICE))
                    .withChecksum(Checksum.CRC32C));
        ExecutionException failed =
            assertThrows(ExecutionException.class, () -> refused.get(30, TimeUnit.SECONDS));
        assertEquals(Intake.unreadableChecksum(DEVICE), failed.getCause().getMessage());
        // And the kind reaches the provider's register.
        Completion<Kinded> done =
            service
                .transfer(TransferRequest.write(1, ad, new Kinded(2, local, DEVICE)))
                .get(30, TimeUnit.SECONDS);
        assertTrue(done.outcome().isDone(), () -> done.outcome().error().toString());
        assertSame(DEVICE, initiator.lastRegisteredKind());
      }
      target.close();
    }
  }

  @Test
  void theContextsKindReachesTheProvidersRegister() throws Exception {
    Recorder<Kinded> recorder = new Recorder<>();
    try (FakeFabric fabric = FakeFabric.create("memory-kind-register");
        Arena arena = Arena.ofShared()) {
      fabric.script().requireLocalRegistration(true);
      FakeEndpoint target = fabric.openEndpoint();
      MemorySegment remote = arena.allocate(4096);
      Advertisement ad = target.expose(remote, RemoteAccess.READ_WRITE).advertisement();
      DmaConfiguration configuration =
          DmaConfiguration.builder().providers("fake").interfaces(List.of(fabric.name())).build();
      try (FabricService<Kinded> service =
          FabricService.<Kinded>builder(configuration).completer(recorder).start()) {
        FakeEndpoint initiator =
            fabric.endpoints().stream().filter(e -> e != target).findFirst().orElseThrow();
        MemorySegment device = arena.allocate(64);
        device.fill((byte) 0x3C);
        assertTrue(service.submit(TransferRequest.write(1, ad, new Kinded(1, device, DEVICE))));
        Completion<Kinded> done = recorder.take();
        assertTrue(done.outcome().isDone(), () -> done.outcome().error().toString());
        assertSame(DEVICE, initiator.lastRegisteredKind());
        assertEquals(-1, remote.asSlice(0, 64).mismatch(device));

        assertTrue(
            service.submit(
                TransferRequest.write(1, ad, new Kinded(2, arena.allocate(64), MemoryKind.HOST))));
        assertTrue(recorder.take().outcome().isDone());
        assertSame(MemoryKind.HOST, initiator.lastRegisteredKind());

        // The explicit registration path carries the kind too.
        service.register(arena.allocate(4096), DEVICE).close();
        assertSame(DEVICE, initiator.lastRegisteredKind());
      }
      target.close();
    }
  }

  @Test
  void memoryOtherThanSystemMemoryIsRegisteredWhereHostMemoryNeedsNone() throws Exception {
    Recorder<Kinded> recorder = new Recorder<>();
    try (FakeFabric fabric = FakeFabric.create("memory-kind-unregistered");
        Arena arena = Arena.ofShared()) {
      fabric.script().requireLocalRegistration(false);
      FakeEndpoint target = fabric.openEndpoint();
      MemorySegment remote = arena.allocate(4096);
      Advertisement ad = target.expose(remote, RemoteAccess.READ_WRITE).advertisement();
      DmaConfiguration configuration =
          DmaConfiguration.builder().providers("fake").interfaces(List.of(fabric.name())).build();
      try (FabricService<Kinded> service =
          FabricService.<Kinded>builder(configuration).completer(recorder).start()) {
        long registrationsBefore = fabric.counters().registrations();
        assertTrue(
            service.submit(
                TransferRequest.write(1, ad, new Kinded(1, arena.allocate(64), MemoryKind.HOST))));
        assertTrue(recorder.take().outcome().isDone());
        assertEquals(registrationsBefore, fabric.counters().registrations(), "host: none");
        assertTrue(
            service.submit(
                TransferRequest.write(1, ad, new Kinded(2, arena.allocate(64), DEVICE))));
        Completion<Kinded> done = recorder.take();
        assertTrue(done.outcome().isDone(), () -> done.outcome().error().toString());
        assertEquals(registrationsBefore + 1, fabric.counters().registrations(), "device: one");
        assertFalse(fabric.endpoints().isEmpty());
      }
      target.close();
    }
  }

  @Test
  void eachChunkOfAStripedTransferRegistersWithItsTransfersKind() throws Exception {
    Recorder<Kinded> recorder = new Recorder<>();
    try (FakeFabric fabric = FakeFabric.create("memory-kind-striped");
        Arena arena = Arena.ofShared()) {
      fabric.script().requireLocalRegistration(true);
      FakeEndpoint target = fabric.openEndpoint();
      MemorySegment remote = arena.allocate(8192, 4096);
      Advertisement ad = target.expose(remote, RemoteAccess.READ_WRITE).advertisement();
      String device = fabric.name();
      DmaConfiguration configuration =
          DmaConfiguration.builder().providers("fake").interfaces(List.of(device, device)).build();
      try (FabricServiceGroup<Kinded> group =
          FabricServiceGroup.<Kinded>builder(configuration)
              .completer(recorder)
              .stripeThresholdBytes(1)
              .stripeChunks(2)
              .start()) {
        MemorySegment local = arena.allocate(8192, 4096);
        local.fill((byte) 0x5C);
        assertEquals(
            FabricService.Offer.ACCEPTED,
            group.offer(TransferRequest.write(1, ad, new Kinded(1, local, DEVICE))));
        Completion<Kinded> done = recorder.take();
        assertTrue(done.outcome().isDone(), () -> done.outcome().error().toString());
        assertEquals(2, done.chunks());
        assertEquals(-1, remote.mismatch(local));
        List<FakeEndpoint> initiators =
            fabric.endpoints().stream().filter(e -> e != target).toList();
        assertEquals(2, initiators.size());
        for (FakeEndpoint initiator : initiators) {
          assertSame(DEVICE, initiator.lastRegisteredKind(), "every chunk's registration");
        }
      }
      target.close();
    }
  }

  @Test
  void aContextReportingNoKindFailsItsChecksummedTransferOnly() throws Exception {
    Recorder<Kinded> recorder = new Recorder<>();
    try (FakeFabric fabric = FakeFabric.create("memory-kind-null");
        Arena arena = Arena.ofShared()) {
      FakeEndpoint target = fabric.openEndpoint();
      MemorySegment remote = arena.allocate(4096);
      Advertisement ad = target.expose(remote, RemoteAccess.READ_WRITE).advertisement();
      DmaConfiguration configuration =
          DmaConfiguration.builder().providers("fake").interfaces(List.of(fabric.name())).build();
      try (FabricService<Kinded> service =
          FabricService.<Kinded>builder(configuration).completer(recorder).start()) {
        assertTrue(
            service.submit(
                TransferRequest.write(1, ad, new Kinded(1, arena.allocate(64), null))
                    .withChecksum(Checksum.CRC32C)));
        DmaException error = recorder.take().outcome().error();
        assertEquals(DmaException.Reason.BAD_REQUEST, error.reason());
        assertEquals(Operands.NO_MEMORY_KIND, error.getMessage());
        assertTrue(
            service.submit(
                TransferRequest.write(1, ad, new Kinded(2, arena.allocate(64), MemoryKind.HOST))
                    .withChecksum(Checksum.CRC32C)));
        assertTrue(recorder.take().outcome().isDone());
      }
      target.close();
    }
  }
}
