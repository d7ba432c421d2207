package dev.dma.core.internal;

import dev.dma.api.DmaException;
import dev.dma.api.MemoryKind;
import dev.dma.api.Operands;
import dev.dma.core.ChecksumPool;
import dev.dma.core.internal.peers.PeerTable;
import dev.dma.core.internal.regions.LocalRegions;
import dev.dma.core.internal.regions.RegionRegistry;
import dev.dma.spi.FabricEndpoint;
import java.lang.reflect.InvocationHandler;
import java.lang.reflect.Proxy;
import java.time.Duration;
import java.util.Arrays;
import java.util.Set;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Workers for dma-core's unit tests of the worker's parts, over an endpoint that does nothing: no
 * depth, no capability, no registration needed, every peer inserted as handle 1 (except one address
 * it refuses). Never run: a test calls the part under test with the worker's fields.
 */
final class InertWorkers {
  /** Memory the worker registers even on an endpoint that needs no local registration. */
  static final MemoryKind DEVICE =
      new MemoryKind() {
        @Override
        public String name() {
          return "DEVICE";
        }

        @Override
        public boolean cpuReadable() {
          return false;
        }

        @Override
        public int hmemIface() {
          return 1;
        }
      };

  /** The address whose insert the endpoint refuses. */
  static final byte[] REFUSED_ADDRESS = {9, 9, 9, 9};

  private InertWorkers() {}

  /** The endpoint: default methods as the interface has them, every other call answers nothing. */
  static FabricEndpoint endpoint() {
    InvocationHandler handler =
        (proxy, method, args) -> {
          if (method.isDefault()) {
            return InvocationHandler.invokeDefault(proxy, method, args);
          }
          if (method.getName().equals("insertPeer")) {
            if (Arrays.equals((byte[]) args[0], REFUSED_ADDRESS)) {
              throw DmaException.fabric(DmaException.Reason.BAD_REQUEST, "refused (by the test)");
            }
            return 1L;
          }
          Class<?> type = method.getReturnType();
          if (type == Set.class) {
            return Set.of();
          }
          if (type == boolean.class) {
            return false;
          }
          if (type == int.class) {
            return 0;
          }
          if (type == long.class) {
            return 0L;
          }
          if (type == byte[].class) {
            return new byte[16];
          }
          return null;
        };
    return (FabricEndpoint)
        Proxy.newProxyInstance(
            FabricEndpoint.class.getClassLoader(), new Class<?>[] {FabricEndpoint.class}, handler);
  }

  /** A worker with an in-flight cap of {@code cap} over a new {@link #endpoint()}. */
  static FabricWorker<Operands> worker(int cap, ChecksumPool pool) {
    return worker(cap, pool, 0);
  }

  /** The same, with {@code max_pinned_bytes} set (0: the default). */
  static FabricWorker<Operands> worker(int cap, ChecksumPool pool, long maxPinnedBytes) {
    FabricEndpoint endpoint = endpoint();
    return new FabricWorker<>(
        endpoint,
        new LocalRegions(endpoint, RegionRegistry.global(), maxPinnedBytes),
        new PeerTable(endpoint),
        new WorkerChannel(16),
        batch -> {},
        pool,
        new AtomicLong(),
        () -> 0L,
        cap,
        Duration.ofSeconds(1),
        Duration.ofSeconds(30),
        address -> {},
        Telemetry.OFF);
  }
}
