package dev.dma.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dma.api.Advertisement;
import dev.dma.api.Completion;
import dev.dma.api.DmaConfiguration;
import dev.dma.api.RemoteAccess;
import dev.dma.api.TransferRequest;
import dev.dma.core.FabricService;
import dev.dma.core.PassiveTarget;
import dev.dma.libfabric.Libfabric;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * More clients than shm has peer slots (256) join and leave one server over its life, beside a
 * client that stays. shm hands a removed peer's slot to a later peer with the old peer's id still
 * set, and a transfer to it is a SIGSEGV (on 1.17 the second client to join after one left, on 2.1
 * and 2.6 once 256 were added): the JVM dies, so this test fails as a crashed fork. dma retires a
 * removed shm peer instead and resets the endpoint, once the transfers in flight are done, to free
 * the slots. Every write lands, on every version.
 */
@Timeout(value = 240, unit = TimeUnit.SECONDS)
class ShmPeerSlotsTest {
  private static final int JOINS = 300;

  @BeforeAll
  static void libfabric() {
    Assumptions.assumeTrue(Libfabric.availability().available(), Libfabric.availability().reason());
  }

  private static void write(
      FabricService<Buffer> service,
      Collector<Buffer> completions,
      long clientId,
      Advertisement ad,
      MemorySegment source,
      int value)
      throws InterruptedException {
    source.fill((byte) value);
    assertTrue(service.submit(TransferRequest.write(clientId, ad, new Buffer(value, source))));
    Completion<Buffer> done = completions.take();
    assertTrue(done.outcome().isDone(), () -> "client " + clientId + ": " + done.outcome());
  }

  @Test
  void moreClientsThanShmHasSlotsComeAndGoWithoutACrashOrAFailure() throws Exception {
    DmaConfiguration configuration = DmaConfiguration.builder().providers("libfabric:shm").build();
    Collector<Buffer> completions = new Collector<>();
    AtomicInteger addressChanges = new AtomicInteger();
    try (Arena arena = Arena.ofShared();
        PassiveTarget stays = PassiveTarget.start(configuration);
        FabricService<Buffer> service =
            FabricService.<Buffer>builder(configuration)
                .completer(completions)
                .onLocalAddressChange(_ -> addressChanges.incrementAndGet())
                .start()) {
      MemorySegment source = arena.allocate(64);
      MemorySegment staysMemory = arena.allocate(64);
      Advertisement staysAd = stays.expose(staysMemory, RemoteAccess.READ_WRITE).advertisement();
      service.addPeer(1, staysAd.address());
      for (int i = 0; i < JOINS; i++) {
        long clientId = 1_000 + i;
        int value = 1 + i % 250;
        try (PassiveTarget visitor = PassiveTarget.start(configuration)) {
          MemorySegment memory = arena.allocate(64);
          Advertisement ad = visitor.expose(memory, RemoteAccess.READ_WRITE).advertisement();
          service.addPeer(clientId, ad.address());
          write(service, completions, clientId, ad, source, value);
          assertEquals((byte) value, memory.get(ValueLayout.JAVA_BYTE, 63), "join " + i);
          // The lifecycle of the README: the server forgets the client before it closes.
          service.removePeer(clientId);
        }
        if (i % 10 == 0) {
          write(service, completions, 1, staysAd, source, value);
          assertEquals((byte) value, staysMemory.get(ValueLayout.JAVA_BYTE, 0), "join " + i);
        }
      }
      System.out.printf("%d joins, %d endpoint resets%n", JOINS, addressChanges.get());
      // shm never gets a slot back from a removal; the resets free them.
      assertTrue(addressChanges.get() >= 1, "never reset, yet 300 peers fit in 256 slots");
      assertEquals(0, service.outstanding());
    }
  }
}
