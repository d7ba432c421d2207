package dev.dma.fake.core;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.sun.management.ThreadMXBean;
import dev.dma.api.Advertisement;
import dev.dma.api.DmaConfiguration;
import dev.dma.api.RemoteAccess;
import dev.dma.api.TransferRequest;
import dev.dma.core.FabricService;
import dev.dma.core.internal.Telemetry;
import dev.dma.fake.FakeEndpoint;
import dev.dma.fake.FakeFabric;
import io.opentelemetry.api.GlobalOpenTelemetry;
import java.lang.foreign.Arena;
import java.lang.management.ManagementFactory;
import java.util.List;
import java.util.concurrent.Semaphore;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * The worker allocates nothing per transfer beyond what the user gets back (the Completion and its
 * outcome), and with no OpenTelemetry SDK installed telemetry adds nothing at all.
 */
@Tag("allocation")
class WorkerAllocationTest {
  /**
   * The Completion (24 bytes with compressed oops); plain outcomes of a repeated length are shared.
   * Anything more per transfer (a boxed key, an iterator, a lambda) would show as 16 bytes or more.
   */
  private static final long BUDGET_BYTES_PER_TRANSFER = 32;

  @Test
  void withoutAnSdkTelemetryIsOff() {
    Telemetry telemetry = new Telemetry(GlobalOpenTelemetry.get(), "fake", "fake0", true);
    assertFalse(telemetry.tracing());
    assertFalse(telemetry.metrics());
  }

  @Test
  void theWorkerAllocatesOnlyTheCompletionPerTransfer() throws Exception {
    ThreadMXBean threads = (ThreadMXBean) ManagementFactory.getThreadMXBean();
    try (FakeFabric fabric = FakeFabric.create("allocation");
        Arena arena = Arena.ofShared()) {
      FakeEndpoint target = fabric.openEndpoint();
      Advertisement ad =
          target.expose(arena.allocate(4096), RemoteAccess.READ_WRITE).advertisement();
      DmaConfiguration configuration =
          DmaConfiguration.builder().providers("fake").interfaces(List.of(fabric.name())).build();
      Semaphore window = new Semaphore(64);
      long[] workerId = {-1};
      try (FabricService<Buffer> service =
          FabricService.<Buffer>builder(configuration)
              .completer(
                  batch -> {
                    workerId[0] = Thread.currentThread().threadId();
                    window.release(batch.size());
                  })
              .start()) {
        Buffer buffer = new Buffer(1, arena.allocate(64));
        TransferRequest<Buffer> request = TransferRequest.write(1, ad, buffer);
        int warmup = 200_000;
        int measured = 200_000;
        for (int i = 0; i < warmup; i++) {
          window.acquireUninterruptibly();
          assertTrue(service.submit(request));
        }
        window.acquireUninterruptibly(64);
        window.release(64);
        long before = threads.getThreadAllocatedBytes(workerId[0]);
        for (int i = 0; i < measured; i++) {
          window.acquireUninterruptibly();
          service.submit(request);
        }
        window.acquireUninterruptibly(64);
        long perTransfer = (threads.getThreadAllocatedBytes(workerId[0]) - before) / measured;
        assertTrue(
            perTransfer <= BUDGET_BYTES_PER_TRANSFER,
            "the worker allocated " + perTransfer + " bytes per transfer");
        System.out.println("worker bytes allocated per transfer: " + perTransfer);
      }
      target.close();
    }
  }
}
