package dev.dma.core;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dma.api.Advertisement;
import dev.dma.api.Completion;
import dev.dma.api.DmaConfiguration;
import dev.dma.api.DmaException;
import dev.dma.api.Operands;
import dev.dma.api.TransferRequest;
import dev.dma.spi.Availability;
import dev.dma.spi.FabricEndpoint;
import dev.dma.spi.FabricProvider;
import io.opentelemetry.api.OpenTelemetry;
import io.opentelemetry.api.trace.TracerProvider;
import io.opentelemetry.context.propagation.ContextPropagators;
import java.lang.foreign.Arena;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The futures API takes the batch form's options and hands every one to every service it starts,
 * over one service and over a group: the clock (a deadline passes only when the test's clock says),
 * OpenTelemetry (every device's worker asks it for its instruments) and the local-address listener
 * (told the address a reset gave the endpoint).
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class AsyncFabricServiceOptionsTest {
  private static final Duration DEADLINE = Duration.ofSeconds(1);

  /** A clock that stands still until the test moves it. */
  private static final class StillClock implements NanoClock {
    final AtomicLong nanos = new AtomicLong();

    @Override
    public long nanoTime() {
      return nanos.get();
    }
  }

  /** A no-op OpenTelemetry that records which threads asked it for a tracer provider. */
  private static final class Recording implements OpenTelemetry {
    final Set<String> askedBy = ConcurrentHashMap.newKeySet();

    @Override
    public TracerProvider getTracerProvider() {
      askedBy.add(Thread.currentThread().getName());
      return TracerProvider.noop();
    }

    @Override
    public ContextPropagators getPropagators() {
      return ContextPropagators.noop();
    }
  }

  /** Opens the endpoint the configuration's one interface names. */
  private static FabricProvider byName(Map<String, LoopbackTestEndpoint> endpoints) {
    return new FabricProvider() {
      @Override
      public String name() {
        return "loopback-test";
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
        return endpoints.get(configuration.interfaces().getFirst());
      }
    };
  }

  @ParameterizedTest(name = "group={0}")
  @ValueSource(booleans = {false, true})
  void everyOptionReachesEveryServiceStarted(boolean group) throws Exception {
    LoopbackTestEndpoint a = new LoopbackTestEndpoint(1);
    LoopbackTestEndpoint b = new LoopbackTestEndpoint(2);
    a.newAddressOnReset();
    b.newAddressOnReset();
    List<String> devices = group ? List.of("a", "b") : List.of("a");
    DmaConfiguration configuration =
        DmaConfiguration.builder().interfaces(devices).completionDeadline(DEADLINE).build();
    StillClock clock = new StillClock();
    Recording telemetry = new Recording();
    LinkedBlockingQueue<byte[]> newAddresses = new LinkedBlockingQueue<>();
    AsyncFabricService.Builder<Operands> builder =
        AsyncFabricService.<Operands>builder(configuration)
            .provider(byName(Map.of("a", a, "b", b)))
            .clock(clock)
            .openTelemetry(telemetry)
            .onLocalAddressChange(newAddresses::add)
            .executor(Runnable::run);
    if (group) {
      builder.group();
    }
    try (Arena arena = Arena.ofShared();
        AsyncFabricService<Operands> service = builder.start()) {
      assertEquals(devices, service.devices());
      assertEquals(devices.size(), service.localAddresses().size());
      long workers = telemetry.askedBy.stream().filter(name -> name.startsWith("fabric-")).count();
      assertEquals(devices.size(), workers, "every device's worker: " + telemetry.askedBy);

      Advertisement hole = a.advertisementFor(LoopbackTestEndpoint.BLACK_HOLE_KEY);
      CompletableFuture<Completion<Operands>> future =
          service.transfer(TransferRequest.write(9, hole, Operands.of(arena.allocate(64))));
      // Twice the deadline in real time: the service's clock stands still, so nothing expires.
      Thread.sleep(2 * DEADLINE.toMillis());
      assertFalse(future.isDone(), "expired on a clock other than the one given");

      clock.nanos.addAndGet(2 * DEADLINE.toNanos());
      ExecutionException failed =
          assertThrows(ExecutionException.class, () -> future.get(10, TimeUnit.SECONDS));
      DmaException error = assertInstanceOf(DmaException.class, failed.getCause());
      assertEquals(DmaException.Reason.DEADLINE, error.reason(), error.getMessage());

      // The reset that made the failure safe gave that endpoint a new address, and said so.
      byte[] changed = newAddresses.poll(10, TimeUnit.SECONDS);
      assertNotNull(changed, "onLocalAddressChange was not called");
      assertTrue(
          service.localAddresses().stream().anyMatch(now -> java.util.Arrays.equals(now, changed)),
          "the new address is among localAddresses()");
      LoopbackTestEndpoint reset = a.resets() > 0 ? a : b;
      assertArrayEquals(reset.localAddress(), changed);
    }
  }
}
