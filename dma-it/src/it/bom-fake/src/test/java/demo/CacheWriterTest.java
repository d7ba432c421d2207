package demo;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
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
import dev.dma.fake.FakeEndpoint;
import dev.dma.fake.FakeFabric;
import dev.dma.fake.OpMatcher;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.List;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** How a user's service unit-tests its dma code: the fake fabric and its fault script. */
class CacheWriterTest {
  @Test
  void aScriptedFailureFailsOneTransferAndTheRestLand() throws Exception {
    try (FakeFabric fabric = FakeFabric.create("cache-writer-test");
        Arena arena = Arena.ofShared()) {
      FakeEndpoint client = fabric.openEndpoint();
      MemorySegment clientMemory = arena.allocate(4096);
      Advertisement ad = client.expose(clientMemory, RemoteAccess.READ_WRITE).advertisement();
      fabric.script().againTimes(3).failOp(OpMatcher.nth(1), 13, -13, "denied by the test");

      LinkedBlockingQueue<Completion<Operands>> done = new LinkedBlockingQueue<>();
      DmaConfiguration configuration =
          DmaConfiguration.builder().providers("fake").interfaces(List.of(fabric.name())).build();
      try (FabricService<Operands> service = FabricService.start(configuration, done::addAll)) {
        MemorySegment value = arena.allocate(4096);
        value.fill((byte) 7);
        for (int i = 0; i < 3; i++) {
          assertTrue(
              service.submit(
                  TransferRequest.write(1, ad, Operands.of(value)).withChecksum(Checksum.CRC32C)));
        }
        int failed = 0;
        for (int i = 0; i < 3; i++) {
          Completion<Operands> completion = done.poll(10, TimeUnit.SECONDS);
          if (!completion.outcome().isDone()) {
            failed++;
            assertTrue(completion.outcome().error().getMessage().contains("denied by the test"));
          } else {
            assertEquals(
                Checksums.crc32c(value), completion.outcome().done().checksum().orElseThrow());
          }
        }
        assertEquals(1, failed);
        assertEquals(Checksums.crc32c(value), Checksums.crc32c(clientMemory));
        assertFalse(fabric.counters().againAnswers() == 0);
      }
      client.close();
    }
  }
}
