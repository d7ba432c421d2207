package dev.dma.it;

import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.dma.api.Advertisement;
import dev.dma.api.Checksum;
import dev.dma.api.Checksums;
import dev.dma.api.Completion;
import dev.dma.api.DmaConfiguration;
import dev.dma.api.DmaException;
import dev.dma.api.RemoteAccess;
import dev.dma.api.TransferDone;
import dev.dma.api.TransferRequest;
import dev.dma.core.FabricServiceGroup;
import dev.dma.core.PassiveTarget;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Striping on real libfabric: two tcp endpoints bound to 127.0.0.1 as two devices, one passive
 * target, a 4 MiB write and read split in two.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class StripedGroupTcpTest {
  private static final long LENGTH = 4L * 1024 * 1024;

  private static DmaConfiguration twoLoopbackDevices() {
    return DmaConfiguration.builder()
        .providers("tcp")
        .bind("127.0.0.1")
        .interfaces(List.of("lo", "lo"))
        .build();
  }

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
      assertEquals(2, written.chunks(), "striped over two endpoints on one NIC (lo,lo)");
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

  /**
   * 3 MiB into a 2 MiB advertisement over real tcp: refused whole, BAD_REQUEST naming the request,
   * and not one byte of the target changes, though the first 1.5 MiB chunk would have fit (before,
   * it was written).
   */
  @Test
  void aStripedWritePastTheAdvertisedEndWritesNothingOnTheTarget() throws Exception {
    long advertised = 2L * 1024 * 1024;
    long length = 3L * 1024 * 1024;
    DmaConfiguration targetConfiguration =
        DmaConfiguration.builder().providers("tcp").bind("127.0.0.1").build();
    Collector<Buffer> completions = new Collector<>();
    try (Arena arena = Arena.ofShared();
        FabricServiceGroup<Buffer> group =
            FabricServiceGroup.<Buffer>builder(twoLoopbackDevices())
                .completer(completions)
                .stripeThresholdBytes(1024 * 1024)
                .start();
        PassiveTarget target = PassiveTarget.start(targetConfiguration)) {
      MemorySegment remote = arena.allocate(advertised, 4096);
      Patterns.fill(remote, 5);
      int before = Checksums.crc32c(remote);
      Advertisement ad = target.expose(remote, RemoteAccess.READ_WRITE).advertisement();
      assertEquals(advertised, ad.lengthBytes());
      MemorySegment local = arena.allocate(length, 4096);
      Patterns.fill(local, 6);
      TransferRequest<Buffer> request = TransferRequest.write(1, ad, new Buffer(1, local));
      assertEquals(true, group.submit(request));
      Completion<Buffer> refused = completions.take();
      // Before, chunk 0 had landed by the time the failure came (it completes before the stripe).
      assertEquals(before, Checksums.crc32c(remote), "the target is untouched");
      DmaException error = refused.outcome().error();
      assertEquals(DmaException.Reason.BAD_REQUEST, error.reason());
      // The plain path's text: the client and its address (tcp renders it host:port) first.
      String prefix = "client 1 at 127.0.0.1:";
      String message = error.getMessage();
      assertEquals(true, message.startsWith(prefix), message);
      String rest = message.substring(message.indexOf(": ", prefix.length()) + 2);
      assertEquals(request.outOfBoundsReason(length), rest);
      assertEquals(true, rest.startsWith("transfer of " + length + " bytes"), message);

      // A good write after it still lands, so the refusal's silence is not a dead connection.
      MemorySegment fits = local.asSlice(0, advertised);
      assertEquals(true, group.submit(TransferRequest.write(1, ad, new Buffer(2, fits))));
      assertEquals(2, completions.take().context().id());
      assertEquals(Checksums.crc32c(fits), Checksums.crc32c(remote));
      long deadline = System.nanoTime() + 10_000_000_000L;
      while (group.outstanding() != 0 && System.nanoTime() < deadline) {
        Thread.onSpinWait();
      }
      assertEquals(0, group.outstanding());
      assertEquals(0, completions.pending(), "one completion per striped transfer");
    }
  }
}
