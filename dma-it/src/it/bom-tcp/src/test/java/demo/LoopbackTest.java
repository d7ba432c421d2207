package demo;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dma.api.Advertisement;
import dev.dma.api.Checksum;
import dev.dma.api.Checksums;
import dev.dma.api.Completion;
import dev.dma.api.DmaConfiguration;
import dev.dma.api.Operands;
import dev.dma.api.RemoteAccess;
import dev.dma.api.TransferRequest;
import dev.dma.core.FabricService;
import dev.dma.core.PassiveTarget;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** tcp chosen by name from the class path, bytes moved for real over loopback and back. */
class LoopbackTest {
  @Test
  void writesAndReadsBackOverTcp() throws Exception {
    DmaConfiguration configuration =
        DmaConfiguration.builder().providers("tcp").bind("127.0.0.1").build();
    LinkedBlockingQueue<Completion<Operands>> done = new LinkedBlockingQueue<>();
    try (Arena arena = Arena.ofShared();
        PassiveTarget client = PassiveTarget.start(configuration);
        FabricService<Operands> server = FabricService.start(configuration, done::addAll)) {
      MemorySegment clientBuffer = arena.allocate(1 << 20);
      Advertisement ad = client.expose(clientBuffer, RemoteAccess.READ_WRITE).advertisement();
      MemorySegment value = arena.allocate(1 << 20);
      for (long i = 0; i < value.byteSize(); i++) {
        value.set(java.lang.foreign.ValueLayout.JAVA_BYTE, i, (byte) (i * 13));
      }
      assertEquals("tcp", server.providerName());
      assertTrue(
          server.submit(
              TransferRequest.write(1, ad, Operands.of(value)).withChecksum(Checksum.CRC32C)));
      int sent = done.poll(30, TimeUnit.SECONDS).outcome().done().checksum().orElseThrow();
      assertEquals(Checksums.crc32c(value), sent);
      assertEquals(sent, Checksums.crc32c(clientBuffer));

      MemorySegment back = arena.allocate(1 << 20);
      assertTrue(
          server.submit(
              TransferRequest.read(1, ad, 1 << 20, Operands.of(back))
                  .withChecksum(Checksum.CRC32C)));
      assertEquals(sent, done.poll(30, TimeUnit.SECONDS).outcome().done().checksum().orElseThrow());
      assertEquals(sent, Checksums.crc32c(back));
    }
  }
}
