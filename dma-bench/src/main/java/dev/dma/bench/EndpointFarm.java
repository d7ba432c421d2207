package dev.dma.bench;

import dev.dma.api.Advertisement;
import dev.dma.api.DmaConfiguration;
import dev.dma.api.DmaException;
import dev.dma.api.RemoteAccess;
import dev.dma.core.FabricProviders;
import dev.dma.libfabric.EndpointPolicy;
import dev.dma.libfabric.LibfabricProvider;
import dev.dma.libfabric.PassiveEndpoints;
import dev.dma.provider.tcp.TcpProvider;
import dev.dma.spi.ExposedRegion;
import dev.dma.spi.FabricEndpoint;
import dev.dma.spi.FabricProvider;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.FutureTask;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;

/**
 * Many passive clients in one process, cheaply: {@code slots} windows of {@code slotBytes} in one
 * buffer, and one endpoint per client that joins, all progressed by one thread ({@code
 * dma-bench-farm}). On libfabric providers the endpoints share one domain and one completion queue
 * ({@link PassiveEndpoints}), so a progress pass is one {@code fi_cq_read} whatever the number of
 * clients; on the fake provider every client is an endpoint of its own ({@link FabricEndpoint}s,
 * which cost little in one JVM and land bytes inside the server's post).
 *
 * <p>Idle: while {@linkplain #load the server says it is sending}, the thread spins (yielding every
 * 64 passes), because on tcp the target's progress is on every transfer's critical path; otherwise
 * it backs off from 20 us to 1 ms sleeps, so thousands of idle clients cost no core.
 *
 * <p>Threads: every method may be called from any thread; each runs on the farm's thread (the
 * endpoints' only user) and waits for it, at most {@link #CALL_TIMEOUT_SECONDS} seconds. Ownership:
 * {@link #close()} closes every endpoint and the buffer.
 */
final class EndpointFarm implements AutoCloseable {
  /** The longest any call waits for the farm's thread. */
  static final long CALL_TIMEOUT_SECONDS = 60;

  private static final long MIN_PARK_NANOS = TimeUnit.MICROSECONDS.toNanos(20);
  private static final long MAX_PARK_NANOS = TimeUnit.MILLISECONDS.toNanos(1);

  /** At most this many per-endpoint progress calls per pass on the fake. */
  private static final int SPI_PROGRESS_PER_PASS = 256;

  private final ConcurrentLinkedQueue<FutureTask<?>> calls = new ConcurrentLinkedQueue<>();
  private final Thread thread;
  private final long slotBytes;
  private final int slots;
  private volatile boolean closing;
  private volatile boolean loaded;

  // Only the farm's thread touches these.
  private Backend backend;
  private Arena arena;
  private MemorySegment memory;

  private EndpointFarm(long slotBytes, int slots) {
    this.slotBytes = slotBytes;
    this.slots = slots;
    this.thread = new Thread(this::run, "dma-bench-farm");
    thread.setDaemon(true);
  }

  /**
   * Starts a farm.
   *
   * @param provider the dma provider the server uses: {@code tcp}, {@code libfabric:<prov>} or
   *     {@code fake}
   * @param bind the source address (ignored by the fake and shm)
   * @param slotBytes bytes per client window
   * @param slots client windows; client {@code slot} gets window {@code slot % slots}
   * @return the running farm
   * @throws DmaException when the provider cannot open
   */
  static EndpointFarm start(String provider, String bind, long slotBytes, int slots) {
    EndpointFarm farm = new EndpointFarm(slotBytes, slots);
    farm.thread.start();
    farm.call(
        () -> {
          farm.arena = Arena.ofShared();
          farm.memory = farm.arena.allocate(slotBytes * slots, 4096);
          farm.memory.fill((byte) 0x5a);
          farm.backend = Backend.open(provider, bind, farm.memory);
          return null;
        });
    return farm;
  }

  /**
   * The libfabric provider the clients run on ({@code net}, {@code tcp;ofi_rxm}, {@code shm}), or
   * the fake's.
   *
   * @return its name
   */
  String fabric() {
    return call(() -> backend.fabric());
  }

  /**
   * Opens an endpoint for client window {@code slot} (a client joining).
   *
   * @param slot the client's number
   * @return the client's advertisement: its own address, the window
   * @throws DmaException when the endpoint cannot open (for example at the file limit)
   */
  Advertisement add(int slot) {
    // Clients beyond the windows share them: slot % slots (one window for all when the server
    // writes the same bytes everywhere, as rma-bench-c's target exposes one buffer).
    return call(() -> backend.add(slot, (slot % slots) * slotBytes, slotBytes));
  }

  /**
   * Closes the endpoint of window {@code slot} (a client leaving); harmless when none is open.
   *
   * @param slot the window
   */
  void remove(int slot) {
    call(
        () -> {
          backend.remove(slot);
          return null;
        });
  }

  /**
   * Endpoints open now.
   *
   * @return the count
   */
  int size() {
    return call(() -> backend.size());
  }

  /**
   * Says whether the server is sending: spin while it is, back off while it is not.
   *
   * @param on whether transfers are running
   */
  void load(boolean on) {
    loaded = on;
    LockSupport.unpark(thread);
  }

  private <V> V call(Callable<V> action) {
    if (closing) {
      throw DmaException.fabric(DmaException.Reason.CLOSED, "the endpoint farm is closed");
    }
    FutureTask<V> task = new FutureTask<>(action);
    calls.add(task);
    LockSupport.unpark(thread);
    return OwnerThreads.await(
        task, Duration.ofSeconds(CALL_TIMEOUT_SECONDS), "the endpoint farm's thread");
  }

  private void run() {
    long park = MIN_PARK_NANOS;
    int passes = 0;
    try {
      while (!closing) {
        FutureTask<?> task;
        while ((task = calls.poll()) != null) {
          task.run();
        }
        if (backend == null) {
          LockSupport.parkNanos(MAX_PARK_NANOS);
          continue;
        }
        backend.progress();
        if (loaded && backend.needsProgress()) {
          park = MIN_PARK_NANOS;
          if ((++passes & 63) == 0) {
            Thread.yield();
          } else {
            Thread.onSpinWait();
          }
        } else {
          LockSupport.parkNanos(park);
          park = Math.min(MAX_PARK_NANOS, park * 2);
        }
      }
    } finally {
      FutureTask<?> task;
      while ((task = calls.poll()) != null) {
        task.cancel(false);
      }
      if (backend != null) {
        backend.close();
      }
      if (arena != null) {
        arena.close();
      }
    }
  }

  /**
   * Closes every endpoint, the shared objects and the buffer, on the farm's thread; waits at most
   * {@link #CALL_TIMEOUT_SECONDS} seconds. Idempotent.
   */
  @Override
  public void close() {
    closing = true;
    LockSupport.unpark(thread);
    try {
      thread.join(TimeUnit.SECONDS.toMillis(CALL_TIMEOUT_SECONDS));
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  /** The endpoints behind the farm; used by the farm's thread only. */
  private interface Backend extends AutoCloseable {
    static Backend open(String provider, String bind, MemorySegment memory) {
      DmaConfiguration.Builder builder = DmaConfiguration.builder().providers(provider);
      if (bind != null && !provider.equals("fake")) {
        builder.bind(bind);
      }
      DmaConfiguration configuration = builder.build();
      if (provider.equals("tcp") || provider.startsWith(LibfabricProvider.PREFIX)) {
        EndpointPolicy policy =
            provider.equals("tcp") ? TcpProvider.policy() : LibfabricProvider.policyFor(provider);
        return new Shared(
            PassiveEndpoints.open(policy, configuration, memory, RemoteAccess.READ_WRITE));
      }
      FabricProvider chosen = FabricProviders.select(configuration);
      return new PerEndpoint(chosen, FabricProviders.resolve(configuration, chosen), memory);
    }

    String fabric();

    Advertisement add(int slot, long offset, long length);

    void remove(int slot);

    int size();

    void progress();

    /** Whether incoming transfers move only while this side progresses (not on the fake). */
    boolean needsProgress();

    @Override
    void close();
  }

  /** Every endpoint on one libfabric domain and completion queue. */
  private static final class Shared implements Backend {
    private final PassiveEndpoints endpoints;
    private final Map<Integer, Integer> bySlot = new HashMap<>();

    Shared(PassiveEndpoints endpoints) {
      this.endpoints = endpoints;
    }

    @Override
    public String fabric() {
      return endpoints.provider();
    }

    @Override
    public Advertisement add(int slot, long offset, long length) {
      remove(slot);
      int index = endpoints.add();
      bySlot.put(slot, index);
      return endpoints.advertisement(index, offset, length);
    }

    @Override
    public void remove(int slot) {
      Integer index = bySlot.remove(slot);
      if (index != null) {
        endpoints.remove(index);
      }
    }

    @Override
    public int size() {
      return endpoints.size();
    }

    @Override
    public void progress() {
      endpoints.progress();
    }

    @Override
    public boolean needsProgress() {
      return true;
    }

    @Override
    public void close() {
      endpoints.close();
    }
  }

  /** One provider endpoint per client (the fake, or any provider through the SPI). */
  private static final class PerEndpoint implements Backend {
    private final FabricProvider provider;
    private final DmaConfiguration configuration;
    private final MemorySegment memory;
    private final Map<Integer, FabricEndpoint> bySlot = new HashMap<>();
    private final Map<Integer, ExposedRegion> regions = new HashMap<>();
    private final List<FabricEndpoint> open = new ArrayList<>();
    private int next;

    PerEndpoint(FabricProvider provider, DmaConfiguration configuration, MemorySegment memory) {
      this.provider = provider;
      this.configuration = configuration;
      this.memory = memory;
    }

    @Override
    public String fabric() {
      return provider.name();
    }

    @Override
    public Advertisement add(int slot, long offset, long length) {
      remove(slot);
      FabricEndpoint endpoint = provider.open(configuration);
      try {
        // A provider that shares only memory it made (local) gives each client its own buffer.
        MemorySegment own = endpoint.allocateExposable(length);
        if (own != null) {
          own.fill((byte) 0x5a);
        }
        ExposedRegion region =
            endpoint.expose(
                own != null ? own : memory.asSlice(offset, length), RemoteAccess.READ_WRITE);
        bySlot.put(slot, endpoint);
        regions.put(slot, region);
        open.add(endpoint);
        Advertisement ad = region.advertisement();
        return ad.lengthKnown()
            ? ad
            : new Advertisement(ad.address(), ad.remoteKey(), ad.remoteAddress(), length);
      } catch (RuntimeException e) {
        endpoint.close();
        throw e;
      }
    }

    @Override
    public void remove(int slot) {
      FabricEndpoint endpoint = bySlot.remove(slot);
      ExposedRegion region = regions.remove(slot);
      if (region != null) {
        region.close();
      }
      if (endpoint != null) {
        open.remove(endpoint);
        endpoint.close();
      }
    }

    @Override
    public int size() {
      return open.size();
    }

    @Override
    public void progress() {
      int n = open.size();
      for (int i = 0; i < Math.min(n, SPI_PROGRESS_PER_PASS); i++) {
        next = next >= n - 1 ? 0 : next + 1;
        open.get(next).progress();
      }
    }

    @Override
    public boolean needsProgress() {
      return !provider.name().equals("fake");
    }

    @Override
    public void close() {
      for (ExposedRegion region : regions.values()) {
        region.close();
      }
      for (FabricEndpoint endpoint : open) {
        endpoint.close();
      }
      regions.clear();
      bySlot.clear();
      open.clear();
    }
  }
}
