package dev.dma.it;

import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.dma.api.Advertisement;
import dev.dma.api.Checksum;
import dev.dma.api.Checksums;
import dev.dma.api.Completion;
import dev.dma.api.DmaConfiguration;
import dev.dma.api.RemoteAccess;
import dev.dma.api.TransferDone;
import dev.dma.api.TransferRequest;
import dev.dma.core.FabricServiceGroup;
import dev.dma.core.PassiveTarget;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * Striping on real libfabric: two tcp endpoints bound to 127.0.0.1 as two devices, one passive
 * target, a 4 MiB write and read split in two.
 */
class StripedGroupTcpTest {
  private static final long LENGTH = 4L * 1024 * 1024;

  @Test
  void aStripedWriteAndReadOverTwoLoopbackEndpointsLandWithOneMatchingChecksum() throws Exception {
    DmaConfiguration configuration =
        DmaConfiguration.builder()
            .providers("tcp")
            .bind("127.0.0.1")
            .interfaces(List.of("lo", "lo"))
            .build();
    DmaConfiguration targetConfiguration =
        DmaConfiguration.builder().providers("tcp").bind("127.0.0.1").build();
    Collector<Buffer> completions = new Collector<>();
    try (Arena arena = Arena.ofShared();
        FabricServiceGroup<Buffer> group =
            FabricServiceGroup.<Buffer>builder(configuration)
                .completer(completions)
                .stripeThresholdBytes(1024 * 1024)
                .start();
        PassiveTarget target = PassiveTarget.start(targetConfiguration)) {
      assertEquals(2, group.services().size());
      assertEquals(2, group.stripeChunks());
      MemorySegment remote = arena.allocate(LENGTH, 4096);
      MemorySegment local = arena.allocate(LENGTH, 4096);
      MemorySegment landing = arena.allocate(LENGTH, 4096);
      Patterns.fill(local, 4);
      Advertisement ad = target.expose(remote, RemoteAccess.READ_WRITE).advertisement();

      assertEquals(
          true,
          group.submit(
              TransferRequest.write(1, ad, new Buffer(1, local)).withChecksum(Checksum.CRC32C)));
      Completion<Buffer> written = completions.take();
      TransferDone sent = written.outcome().done();
      assertEquals(1, written.context().id());
      assertEquals(LENGTH, sent.bytes());
      assertEquals(Checksums.crc32c(local), sent.checksum().orElseThrow());
      assertEquals(Checksums.crc32c(local), Checksums.crc32c(remote));

      assertEquals(
          true,
          group.submit(
              TransferRequest.read(1, ad, LENGTH, new Buffer(2, landing))
                  .withChecksum(Checksum.CRC32C)));
      Completion<Buffer> read = completions.take();
      assertEquals(2, read.context().id());
      assertEquals(LENGTH, read.outcome().done().bytes());
      assertEquals(Checksums.crc32c(local), read.outcome().done().checksum().orElseThrow());
      assertEquals(Checksums.crc32c(local), Checksums.crc32c(landing));

      long deadline = System.nanoTime() + 10_000_000_000L;
      while (group.outstanding() != 0 && System.nanoTime() < deadline) {
        Thread.onSpinWait();
      }
      assertEquals(0, group.outstanding());
      assertEquals(0, completions.pending(), "one completion per striped transfer");
    }
  }
}
