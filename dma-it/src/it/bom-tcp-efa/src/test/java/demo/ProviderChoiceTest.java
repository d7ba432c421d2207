package demo;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dma.api.Advertisement;
import dev.dma.api.Checksum;
import dev.dma.api.Checksums;
import dev.dma.api.Completion;
import dev.dma.api.DmaConfiguration;
import dev.dma.api.DmaException;
import dev.dma.api.Operands;
import dev.dma.api.RemoteAccess;
import dev.dma.api.TransferRequest;
import dev.dma.core.FabricProviders;
import dev.dma.core.FabricService;
import dev.dma.core.PassiveTarget;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** Both tcp and EFA on the class path of a host without EFA. */
class ProviderChoiceTest {
  @Test
  void efaDirectSaysWhyItIsUnavailable() {
    DmaConfiguration efa = DmaConfiguration.builder().providers("efa-direct").build();
    DmaException error =
        assertThrows(DmaException.class, () -> FabricService.start(efa, batch -> {}));
    assertTrue(
        error.getMessage().startsWith("provider \"efa-direct\" is unavailable: "),
        error.getMessage());
    assertTrue(error.getMessage().contains("tcp (available)"), error.getMessage());
    assertEquals(null, error.getCause(), "a libfabric stack trace reached the user");
  }

  @Test
  void namingNoProviderPicksTcpHereAndItMovesBytes() throws Exception {
    DmaConfiguration unnamed = DmaConfiguration.builder().bind("127.0.0.1").build();
    assertEquals("tcp", FabricProviders.select(unnamed).name());
    LinkedBlockingQueue<Completion<Operands>> done = new LinkedBlockingQueue<>();
    try (Arena arena = Arena.ofShared();
        PassiveTarget client = PassiveTarget.start(unnamed);
        FabricService<Operands> server = FabricService.start(unnamed, done::addAll)) {
      assertEquals("tcp", server.providerName());
      MemorySegment clientBuffer = arena.allocate(4096);
      Advertisement ad = client.expose(clientBuffer, RemoteAccess.READ_WRITE).advertisement();
      MemorySegment value = arena.allocate(4096).fill((byte) 9);
      assertTrue(
          server.submit(
              TransferRequest.write(1, ad, Operands.of(value)).withChecksum(Checksum.CRC32C)));
      assertEquals(
          Checksums.crc32c(value),
          done.poll(30, TimeUnit.SECONDS).outcome().done().checksum().orElseThrow());
      assertEquals(Checksums.crc32c(value), Checksums.crc32c(clientBuffer));
    }
  }
}
