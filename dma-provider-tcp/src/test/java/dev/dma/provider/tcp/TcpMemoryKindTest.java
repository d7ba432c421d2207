package dev.dma.provider.tcp;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dma.api.Advertisement;
import dev.dma.api.Completion;
import dev.dma.api.DmaConfiguration;
import dev.dma.api.DmaException;
import dev.dma.api.MemoryKind;
import dev.dma.api.Operands;
import dev.dma.api.RemoteAccess;
import dev.dma.api.TransferRequest;
import dev.dma.core.FabricService;
import dev.dma.core.PassiveTarget;
import dev.dma.libfabric.Libfabric;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A kind of memory libfabric's endpoint cannot register, reaching a real tcp endpoint (which needs
 * no local registration for host memory, so only the kind sends it to {@code register}), fails that
 * transfer with the endpoint's refusal, and the service serves the next host transfer.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class TcpMemoryKindTest {
  private static final DmaConfiguration CONFIG =
      DmaConfiguration.builder().providers("tcp").bind("127.0.0.1").build();

  /** A test-only device kind, iface 1 ({@code FI_HMEM_CUDA}). */
  private record DeviceKind(String name, boolean cpuReadable, int hmemIface)
      implements MemoryKind {}

  private static final MemoryKind DEVICE = new DeviceKind("TEST_DEVICE", false, 1);

  /** A context over host memory that reports the kind it is given. */
  private record Kinded(MemorySegment segment, MemoryKind kind) implements Operands {
    @Override
    public MemorySegment source() {
      return segment;
    }

    @Override
    public MemoryKind memoryKind() {
      return kind;
    }
  }

  @BeforeAll
  static void libfabric() {
    Assumptions.assumeTrue(Libfabric.availability().available(), Libfabric.availability().reason());
  }

  @Test
  void aKindTheEndpointCannotRegisterFailsThatTransferOnly() throws Exception {
    LinkedBlockingQueue<Completion<Kinded>> completions = new LinkedBlockingQueue<>();
    try (Arena arena = Arena.ofShared();
        PassiveTarget target = PassiveTarget.start(CONFIG);
        FabricService<Kinded> server =
            FabricService.<Kinded>builder(CONFIG).completer(completions::addAll).start()) {
      MemorySegment memory = arena.allocate(64);
      Advertisement ad = target.expose(memory, RemoteAccess.READ_WRITE).advertisement();
      server.addPeer(1, ad.address());
      // The provider libfabric serves tcp through on this library (net on 1.17, tcp from 1.18).
      String provider = TcpProvider.libfabricProvider();
      String refusal =
          "memory kind TEST_DEVICE (fi_hmem_iface 1) is not supported by provider "
              + provider
              + ": dma registers host memory only; use host memory for this transfer";

      MemorySegment device = arena.allocate(64);
      device.fill((byte) 0x11);
      assertTrue(server.submit(TransferRequest.write(1, ad, new Kinded(device, DEVICE))));
      Completion<Kinded> refused = completions.poll(30, TimeUnit.SECONDS);
      assertNotNull(refused, "no completion within 30 s");
      DmaException error = refused.outcome().error();
      assertEquals(DmaException.Reason.BAD_REQUEST, error.reason(), error.getMessage());
      // The worker names the transfer's client before the endpoint's refusal, as for any post.
      assertTrue(error.getMessage().startsWith("client 1 at 127.0.0.1:"), error.getMessage());
      assertTrue(error.getMessage().endsWith(": " + refusal), error.getMessage());
      assertEquals(0, refused.posts());
      assertEquals(-1, memory.mismatch(arena.allocate(64)), "nothing landed");

      MemorySegment host = arena.allocate(64);
      host.fill((byte) 0x22);
      assertTrue(server.submit(TransferRequest.write(1, ad, new Kinded(host, MemoryKind.HOST))));
      Completion<Kinded> done = completions.poll(30, TimeUnit.SECONDS);
      assertNotNull(done, "no completion within 30 s");
      assertTrue(done.outcome().isDone(), () -> done.outcome().error().toString());
      assertEquals(-1, memory.mismatch(host));
      assertEquals(0, server.outstanding());

      // The explicit registration path refuses it with the same text.
      DmaException pinned =
          assertThrows(DmaException.class, () -> server.register(arena.allocate(64), DEVICE));
      assertEquals(refusal, pinned.getMessage());
    }
  }
}
