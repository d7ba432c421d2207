package dev.dma.core;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dma.api.DmaConfiguration;
import dev.dma.api.DmaException;
import dev.dma.api.Operands;
import dev.dma.api.RemoteAccess;
import dev.dma.spi.CompletionSink;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.function.Executable;

/**
 * The blocking calls' failures carry a reason a caller can act on: {@code CLOSED} after a close
 * (saying so, not "worker is gone"), {@code BAD_REQUEST} for a bad argument, {@code
 * PROVIDER_UNAVAILABLE} for a provider that is not there.
 */
@Timeout(value = 30, unit = TimeUnit.SECONDS)
class ControlPathReasonsTest {
  private static final byte[] PEER = {10, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9};

  private final Arena arena = Arena.ofShared();

  @AfterEach
  void freeMemory() {
    arena.close();
  }

  private static DmaException failure(Executable call) {
    return assertThrows(DmaException.class, call);
  }

  private static FabricService<Operands> start(LoopbackTestEndpoint endpoint) {
    return FabricService.<Operands>builder(DmaConfiguration.defaults())
        .provider(endpoint.provider())
        .completer(batch -> {})
        .start();
  }

  @Test
  void callsAfterCloseAreClosedAndSaySo() {
    FabricService<Operands> service = start(new LoopbackTestEndpoint());
    service.close();
    MemorySegment memory = arena.allocate(4096);
    for (Executable call :
        new Executable[] {() -> service.addPeer(7, PEER), () -> service.register(memory)}) {
      DmaException closed = failure(call);
      assertEquals(DmaException.Reason.CLOSED, closed.reason());
      assertEquals("the service is closed", closed.getMessage());
    }
  }

  @Test
  void aWorkerThatFailedByItselfIsGoneNotClosed() throws Exception {
    LoopbackTestEndpoint failing =
        new LoopbackTestEndpoint() {
          @Override
          public synchronized int reap(CompletionSink sink, int max) {
            throw new IllegalStateException("a provider bug the worker cannot survive");
          }
        };
    FabricService<Operands> service = start(failing);
    try {
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
      while (service.isRunning() && System.nanoTime() < deadline) {
        Thread.sleep(5);
      }
      DmaException gone = failure(() -> service.addPeer(7, PEER));
      assertEquals(DmaException.Reason.CLOSED, gone.reason());
      assertEquals("fabric worker is gone", gone.getMessage());
    } finally {
      service.close();
    }
  }

  @Test
  void badArgumentsToRegisterAreBadRequests() {
    FabricService<Operands> service = start(new LoopbackTestEndpoint());
    try {
      DmaException heap = failure(() -> service.register(MemorySegment.ofArray(new byte[64])));
      assertEquals(DmaException.Reason.BAD_REQUEST, heap.reason());
      assertEquals("cannot register a heap segment; register native memory", heap.getMessage());
      DmaException empty = failure(() -> service.register(arena.allocate(0)));
      assertEquals(DmaException.Reason.BAD_REQUEST, empty.reason());
    } finally {
      service.close();
    }
  }

  @Test
  void aPassiveTargetRefusesAHeapSegmentAsABadRequestAndCallsAfterCloseAsClosed() {
    PassiveTarget target =
        PassiveTarget.builder(DmaConfiguration.defaults())
            .provider(new LoopbackTestEndpoint().provider())
            .idle(Duration.ofMillis(1))
            .start();
    try {
      DmaException heap =
          failure(() -> target.expose(MemorySegment.ofArray(new byte[64]), RemoteAccess.READ));
      assertEquals(DmaException.Reason.BAD_REQUEST, heap.reason());
      assertEquals("cannot expose a heap segment; expose native memory", heap.getMessage());
    } finally {
      target.close();
    }
    DmaException closed = failure(() -> target.expose(arena.allocate(64), RemoteAccess.READ_WRITE));
    assertEquals(DmaException.Reason.CLOSED, closed.reason());
    assertEquals("passive target is closed", closed.getMessage());
  }

  @Test
  void aProviderThatIsNotInstalledIsUnavailableForServicesAndTargets() {
    DmaConfiguration named = DmaConfiguration.builder().providers("efa-direct").build();
    for (Executable call :
        new Executable[] {
          () -> FabricService.start(named, batch -> {}), () -> PassiveTarget.start(named)
        }) {
      DmaException missing = failure(call);
      assertEquals(DmaException.Reason.PROVIDER_UNAVAILABLE, missing.reason());
      assertTrue(
          missing.getMessage().contains("add the jar of dev.dma:dma-provider-efa"),
          missing.getMessage());
    }
  }
}
