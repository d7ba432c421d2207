package dev.dma.it;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dma.api.Advertisement;
import dev.dma.api.Checksums;
import dev.dma.api.Completion;
import dev.dma.api.DmaConfiguration;
import dev.dma.api.DmaException;
import dev.dma.api.RemoteAccess;
import dev.dma.api.TransferRequest;
import dev.dma.core.FabricService;
import dev.dma.libfabric.Libfabric;
import dev.dma.libfabric.LibfabricProvider;
import dev.dma.spi.ExposedRegion;
import dev.dma.spi.FabricEndpoint;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.Arrays;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The endpoint reset behind the completion deadline, on real tcp;ofi_rxm over loopback: a target
 * that stops progressing leaves a delivery-complete write without its completion (the write lands
 * only while the target reads its queue); the deadline fails it after the reset, the reset binds a
 * new port, the service publishes the new address to its listener and {@code localAddress()}, and
 * once the target progresses again and the peer is added back, writes land.
 */
class EndpointResetTest {
  private static final String PROVIDER = "libfabric:tcp;ofi_rxm";

  @Test
  @Timeout(value = 60, unit = TimeUnit.SECONDS)
  void aStalledTargetCostsOneResetAndTheNewAddressIsPublished() throws Exception {
    Assumptions.assumeTrue(Libfabric.availability().available(), Libfabric.availability().reason());
    DmaConfiguration configuration =
        DmaConfiguration.builder()
            .providers(PROVIDER)
            .bind("127.0.0.1")
            .completionDeadline(Duration.ofMillis(500))
            .build();
    LinkedBlockingQueue<byte[]> published = new LinkedBlockingQueue<>();
    Collector<Buffer> completions = new Collector<>();
    AtomicBoolean progressing = new AtomicBoolean(true);
    AtomicBoolean stop = new AtomicBoolean();
    // Set by the progress thread once it has seen progressing == false and left progress(): only
    // then is the target sure to stay still.
    AtomicBoolean paused = new AtomicBoolean();
    try (Arena arena = Arena.ofShared();
        FabricEndpoint target = new LibfabricProvider().open(configuration);
        FabricService<Buffer> service =
            FabricService.<Buffer>builder(configuration)
                .completer(completions)
                .onLocalAddressChange(published::add)
                .start()) {
      MemorySegment remote = arena.allocate(1 << 16, 4096);
      MemorySegment local = arena.allocate(1 << 16, 4096);
      ExposedRegion region = target.expose(remote, RemoteAccess.READ_WRITE);
      Advertisement ad = region.advertisement();
      // The target's progress, which the test switches off and on; one thread owns the endpoint.
      Thread progress =
          Thread.ofPlatform()
              .start(
                  () -> {
                    while (!stop.get()) {
                      if (progressing.get()) {
                        paused.set(false);
                        target.progress();
                      } else {
                        paused.set(true);
                      }
                      Thread.onSpinWait();
                    }
                  });
      try {
        Patterns.fill(local, 1);
        write(service, ad, local, 1);
        Completion<Buffer> first = completions.take();
        assertTrue(first.outcome().isDone(), () -> "warm-up: " + first.outcome().error());
        byte[] before = service.localAddress();

        progressing.set(false);
        long pauseBy = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (!paused.get()) {
          assertTrue(System.nanoTime() < pauseBy, "the progress thread did not pause");
          Thread.onSpinWait();
        }
        Patterns.fill(local, 2);
        long started = System.nanoTime();
        write(service, ad, local, 2);
        Completion<Buffer> stalled = completions.take();
        long tookMs = (System.nanoTime() - started) / 1_000_000;
        assertFalse(stalled.outcome().isDone(), "the write completed without target progress");
        assertEquals(DmaException.Reason.DEADLINE, stalled.outcome().error().reason());
        assertTrue(tookMs >= 450 && tookMs < 5_000, "failed after " + tookMs + " ms");

        byte[] after = published.poll(5, TimeUnit.SECONDS);
        assertNotNull(after, "no new address was published after the reset");
        assertFalse(Arrays.equals(before, after), "the reset kept the old address");
        assertArrayEquals(after, service.localAddress());

        progressing.set(true);
        service.addPeer(1, ad.address());
        Patterns.fill(local, 3);
        write(service, ad, local, 3);
        Completion<Buffer> healed = completions.take();
        assertTrue(healed.outcome().isDone(), () -> "after the reset: " + healed.outcome().error());
        assertEquals(Checksums.crc32c(local), Checksums.crc32c(remote));
        assertEquals(0, service.outstanding());
      } finally {
        stop.set(true);
        progress.join(10_000);
        region.close();
      }
    }
  }

  private static void write(
      FabricService<Buffer> service, Advertisement ad, MemorySegment local, int id) {
    assertTrue(service.submit(TransferRequest.write(1, ad, new Buffer(id, local))));
  }
}
