package dev.dma.fake.core;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dma.api.Advertisement;
import dev.dma.api.Checksums;
import dev.dma.api.Completion;
import dev.dma.api.Direction;
import dev.dma.api.DmaConfiguration;
import dev.dma.api.TransferRequest;
import dev.dma.core.AsyncFabricService;
import dev.dma.fake.FakeEndpoint;
import dev.dma.fake.FakeFabric;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

class AsyncFabricServiceTest {
  @Test
  void aFuturePerTransferAndCancellingNeverCancelsTheRma() throws Exception {
    try (FakeFabric fabric = FakeFabric.create("async-test");
        Arena arena = Arena.ofShared()) {
      FakeEndpoint target = fabric.openEndpoint();
      MemorySegment remote = arena.allocate(4096);
      Advertisement ad = target.expose(remote, true, true).advertisement();
      DmaConfiguration configuration =
          DmaConfiguration.builder().providers("fake").interfaces(List.of(fabric.name())).build();
      AsyncFabricService<Buffer> service = AsyncFabricService.start(configuration);
      try {
        MemorySegment local = arena.allocate(4096);
        local.fill((byte) 0x42);
        Buffer buffer = new Buffer(1, local);
        Completion<Buffer> done =
            service
                .transfer(TransferRequest.to(1, ad, Direction.TO_PEER, true, buffer))
                .get(10, TimeUnit.SECONDS);
        assertEquals(buffer, done.context());
        assertEquals(Checksums.crc32c(local), done.outcome().done().checksum().orElseThrow());

        // Abandon a transfer whose completion is held: the bytes still land.
        fabric.script().holdCompletions();
        MemorySegment second = arena.allocate(4096);
        second.fill((byte) 0x17);
        CompletableFuture<Completion<Buffer>> abandoned =
            service.transfer(TransferRequest.to(1, ad, Direction.TO_PEER, false, new Buffer(2, second)));
        assertTrue(abandoned.cancel(true));
        assertEquals(1, service.outstanding());
        fabric.script().stopHolding();
        fabric.script().releaseCompletions();
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (service.outstanding() > 0 && System.nanoTime() < deadline) {
          Thread.sleep(1);
        }
        assertEquals(0, service.outstanding());
        assertEquals(Checksums.crc32c(second), Checksums.crc32c(remote));
      } finally {
        service.close();
      }
      // A closed service answers at once, handing the context back in a failed completion.
      Buffer late = new Buffer(3, arena.allocate(8));
      Completion<Buffer> refused =
          service.transfer(TransferRequest.to(1, ad, Direction.TO_PEER, false, late)).get();
      assertEquals(late, refused.context());
      assertEquals("fabric worker is gone", refused.outcome().error().getMessage());
      target.close();
    }
  }
}
