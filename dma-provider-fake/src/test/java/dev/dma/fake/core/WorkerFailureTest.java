package dev.dma.fake.core;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dma.api.Advertisement;
import dev.dma.api.Checksum;
import dev.dma.api.Completion;
import dev.dma.api.DmaConfiguration;
import dev.dma.api.DmaException;
import dev.dma.api.RemoteAccess;
import dev.dma.api.TransferRequest;
import dev.dma.core.FabricService;
import dev.dma.core.internal.FabricWorker;
import dev.dma.fake.FakeEndpoint;
import dev.dma.fake.FakeFabric;
import dev.dma.spi.Availability;
import dev.dma.spi.CompletionSink;
import dev.dma.spi.FabricEndpoint;
import dev.dma.spi.FabricProvider;
import java.lang.foreign.Arena;
import java.lang.reflect.InvocationHandler;
import java.lang.reflect.Proxy;
import java.time.Duration;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/**
 * What the worker does when its provider misbehaves in ways the fake's script cannot express: a
 * completion for a slot that holds nothing, and a provider call that kills the worker outright.
 */
class WorkerFailureTest {
  /** Opens a fake endpoint wrapped so the test can intercept reap. */
  private static FabricProvider wrapping(FakeFabric fabric, ReapHook hook) {
    return new FabricProvider() {
      @Override
      public String name() {
        return "wrapped-fake";
      }

      @Override
      public int priority() {
        return 0;
      }

      @Override
      public Availability availability() {
        return Availability.AVAILABLE;
      }

      @Override
      public FabricEndpoint open(DmaConfiguration configuration) {
        FakeEndpoint real = fabric.openEndpoint();
        InvocationHandler handler =
            (proxy, method, args) -> {
              if (method.getName().equals("reap")) {
                return hook.reap(real, (CompletionSink) args[0], (Integer) args[1]);
              }
              try {
                return method.invoke(real, args);
              } catch (java.lang.reflect.InvocationTargetException e) {
                throw e.getCause();
              }
            };
        return (FabricEndpoint)
            Proxy.newProxyInstance(
                FabricEndpoint.class.getClassLoader(),
                new Class<?>[] {FabricEndpoint.class},
                handler);
      }
    };
  }

  @FunctionalInterface
  private interface ReapHook {
    int reap(FakeEndpoint real, CompletionSink sink, int max);
  }

  @Test
  void aReapThatOutrunsInFlightNeverStallsTheWorker() throws Exception {
    try (FakeFabric fabric = FakeFabric.create("outrun");
        Arena arena = Arena.ofShared()) {
      FakeEndpoint target = fabric.openEndpoint();
      Advertisement ad =
          target.expose(arena.allocate(4096), RemoteAccess.READ_WRITE).advertisement();
      AtomicInteger spurious = new AtomicInteger();
      // Every completion is reported twice: the second names a slot that holds nothing any more.
      FabricProvider provider =
          wrapping(
              fabric,
              (real, sink, max) ->
                  real.reap(
                      new CompletionSink() {
                        @Override
                        public void completed(int slot) {
                          sink.completed(slot);
                          sink.completed(slot);
                          spurious.incrementAndGet();
                        }

                        @Override
                        public void failed(int slot, int errno, int providerErrno, String message) {
                          sink.failed(slot, errno, providerErrno, message);
                        }
                      },
                      max));
      Recorder<Buffer> recorder = new Recorder<>();
      try (FabricService<Buffer> service =
          FabricService.<Buffer>builder(DmaConfiguration.builder().maxInFlight(2).build())
              .provider(provider)
              .completer(recorder)
              .start()) {
        Set<Long> seen = new HashSet<>();
        for (int i = 0; i < 50; i++) {
          assertTrue(
              service.submit(TransferRequest.write(1, ad, new Buffer(i, arena.allocate(64)))));
        }
        for (Completion<Buffer> completion : recorder.take(50)) {
          assertTrue(completion.outcome().isDone());
          assertTrue(seen.add(completion.context().id), "completed twice");
        }
        assertEquals(0, service.outstanding());
        assertTrue(spurious.get() >= 50);
      }
      target.close();
    }
  }

  @Test
  void aWorkerKilledByItsProviderFailsEverythingItHeldAndNothingHangs() throws Exception {
    try (FakeFabric fabric = FakeFabric.create("killed");
        Arena arena = Arena.ofShared()) {
      FakeEndpoint target = fabric.openEndpoint();
      Advertisement ad =
          target.expose(arena.allocate(4096), RemoteAccess.READ_WRITE).advertisement();
      AtomicBoolean kill = new AtomicBoolean();
      FabricProvider provider =
          wrapping(
              fabric,
              (real, sink, max) -> {
                if (kill.get()) {
                  throw new StackOverflowError("provider bug (expected by the test)");
                }
                return real.reap(sink, max);
              });
      Recorder<Buffer> recorder = new Recorder<>();
      FabricService<Buffer> service =
          FabricService.<Buffer>builder(DmaConfiguration.builder().build())
              .provider(provider)
              .completer(recorder)
              .start();
      fabric.script().holdCompletions();
      for (int i = 0; i < 5; i++) {
        assertTrue(
            service.submit(
                TransferRequest.write(1, ad, new Buffer(i, arena.allocate(64)))
                    .withChecksum(i % 2 == 0 ? Checksum.CRC32C : Checksum.NONE)));
      }
      long heldBy = System.nanoTime() + Duration.ofSeconds(30).toNanos();
      while (fabric.script().heldCompletions() < 5) {
        assertTrue(System.nanoTime() < heldBy, "the 5 transfers were not all held within 30 s");
        Thread.sleep(1);
      }
      kill.set(true);
      // Every transfer it held comes back, once, failed with the worker's text.
      for (Completion<Buffer> completion : recorder.take(5)) {
        assertFalse(completion.outcome().isDone());
        assertEquals(FabricWorker.WORKER_GONE, completion.outcome().error().getMessage());
      }
      assertEquals(0, service.outstanding());
      assertFalse(service.submit(TransferRequest.write(1, ad, new Buffer(9, arena.allocate(8)))));
      assertEquals(
          FabricWorker.WORKER_GONE,
          assertThrows(DmaException.class, () -> service.addPeer(2, ad.address())).getMessage());
      assertFalse(service.isRunning());
      service.close();
      assertEquals(0, fabric.counters().violations(), fabric.counters().lastViolation());
      target.close();
      List<FakeEndpoint> endpoints = fabric.endpoints();
      assertTrue(
          endpoints.stream().allMatch(FakeEndpoint::isClosed), "the worker's endpoint stayed open");
    }
  }
}
