package dev.dma.it;

import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.dma.api.Advertisement;
import dev.dma.api.Checksums;
import dev.dma.api.Completion;
import dev.dma.api.Direction;
import dev.dma.api.DmaConfiguration;
import dev.dma.api.Operands;
import dev.dma.api.TransferRequest;
import dev.dma.core.FabricService;
import dev.dma.core.PassiveTarget;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.LinkedBlockingQueue;
import org.junit.jupiter.api.Test;

/** The README's quick start, verbatim between the markers, so the README cannot rot. */
class QuickStartTest {
  @Test
  void theReadmeExampleMovesABufferThereAndBack() throws Exception {
    assertEquals(0, QuickStart.run());
  }

  /** The example class as the README shows it. */
  static final class QuickStart {
    // README-BEGIN
    static int run() throws Exception {
      var config = DmaConfiguration.builder().providers("tcp").bind("127.0.0.1").build();
      var completions = new LinkedBlockingQueue<Completion<Operands>>();
      try (var arena = Arena.ofShared();
          var client = PassiveTarget.start(config);                        // the passive side
          var server = FabricService.start(config, completions::addAll)) { // the side doing DMA
        // The client registers a buffer and advertises it (on your own control channel).
        MemorySegment clientBuffer = arena.allocate(1 << 20);
        Advertisement ad = client.expose(clientBuffer, true, true).advertisement();

        // The server writes 1 MiB into it...
        MemorySegment value = arena.allocate(1 << 20).fill((byte) 42);
        server.submit(TransferRequest.to(7, ad, Direction.TO_PEER, true, Operands.of(value)));
        int sent = completions.take().outcome().done().crc32c();

        // ...and reads it back.
        MemorySegment back = arena.allocate(1 << 20);
        server.submit(TransferRequest.to(7, ad, Direction.fromPeer(1 << 20), true, Operands.of(back)));
        int received = completions.take().outcome().done().crc32c();

        System.out.printf("sent %08x, client holds %08x, read back %08x%n",
            sent, Checksums.crc32c(clientBuffer), received);
        return sent == received && sent == Checksums.crc32c(clientBuffer) ? 0 : 1;
      }
    }
    // README-END
  }
}
