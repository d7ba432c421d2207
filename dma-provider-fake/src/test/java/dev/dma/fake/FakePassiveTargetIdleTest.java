package dev.dma.fake;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dma.api.Advertisement;
import dev.dma.api.Completion;
import dev.dma.api.DmaConfiguration;
import dev.dma.api.DmaException;
import dev.dma.api.Operands;
import dev.dma.api.RemoteAccess;
import dev.dma.api.TransferRequest;
import dev.dma.core.FabricService;
import dev.dma.core.PassiveTarget;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.time.Duration;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A truncated peer address is a bad request on the fake as on tcp. On the fake, whose writes wait
 * for the target's progress when scripted to (as tcp's do), a sleeping {@link PassiveTarget} is
 * woken by the write that needs it, not by the end of its sleep.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class FakePassiveTargetIdleTest {
  @Test
  void aTruncatedPeerAddressIsABadRequest() {
    try (FakeFabric fabric = FakeFabric.create("bad-address")) {
      DmaConfiguration config =
          DmaConfiguration.builder().providers("fake").interfaces(fabric.name()).build();
      try (FabricService<Operands> server = FabricService.start(config, batch -> {})) {
        DmaException bad =
            assertThrows(DmaException.class, () -> server.addPeer(1, new byte[] {1, 2, 3}));
        assertEquals(DmaException.Reason.BAD_REQUEST, bad.reason());
        assertTrue(bad.getMessage().contains("3 bytes"), bad.getMessage());
      }
    }
  }

  @Test
  void aWriteThatNeedsTheTargetWakesItFromALongSleep() throws Exception {
    LinkedBlockingQueue<Completion<Operands>> completions = new LinkedBlockingQueue<>();
    try (FakeFabric fabric = FakeFabric.create("idle-wake")) {
      fabric.script().targetProgressRequired(true);
      DmaConfiguration config =
          DmaConfiguration.builder().providers("fake").interfaces(fabric.name()).build();
      try (Arena arena = Arena.ofShared();
          PassiveTarget target =
              PassiveTarget.builder(config).idle(Duration.ofSeconds(30)).start();
          FabricService<Operands> server = FabricService.start(config, completions::addAll)) {
        MemorySegment memory = arena.allocate(64);
        Advertisement ad = target.expose(memory, RemoteAccess.READ_WRITE).advertisement();
        for (int i = 1; i <= 3; i++) {
          Thread.sleep(100); // the target is asleep by now (its spin phase lasts milliseconds)
          MemorySegment value = arena.allocate(64).fill((byte) i);
          long start = System.nanoTime();
          assertTrue(server.submit(TransferRequest.write(1, ad, Operands.of(value))));
          Completion<Operands> done = completions.poll(20, TimeUnit.SECONDS);
          long millis = (System.nanoTime() - start) / 1_000_000;
          assertNotNull(done, "the write never completed: the sleeping target was not woken");
          assertTrue(done.outcome().isDone(), done.toString());
          assertEquals((byte) i, memory.get(ValueLayout.JAVA_BYTE, 0));
          assertTrue(millis < 5_000, "the write waited " + millis + " ms for a 30 s sleep");
        }
      }
    }
  }
}
