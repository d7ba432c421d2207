package dev.dma.core;

import dev.dma.api.BatchCompleter;
import dev.dma.api.DmaConfiguration;
import dev.dma.api.DmaException;
import dev.dma.api.Operands;
import dev.dma.api.TransferRequest;
import dev.dma.spi.FabricProvider;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ThreadLocalRandom;

/**
 * One {@link FabricService} per device, used as one: an EFA instance has 2 to 32 EFA devices (p4d
 * 4, p5 32), and one endpoint cannot drive more than its own. Works over any provider (the fake's
 * fabrics stand in for devices in tests).
 *
 * <h2>Devices</h2>
 *
 * The configuration's {@code interfaces} when it names any, otherwise every domain the provider's
 * {@link FabricProvider#discoverDomains discoverDomains} lists; each service opens with {@code
 * interfaces} pinned to its one device. They share one {@link ChecksumPool}.
 *
 * <h2>Spreading</h2>
 *
 * {@link #submit} picks two different devices at random and gives the transfer to the one with
 * fewer {@linkplain FabricService#outstanding() outstanding} transfers (power of two choices:
 * nearly the balance of asking every device, at the cost of two reads). With two devices that is
 * always the less loaded one. A device whose worker is gone is skipped.
 *
 * <h2>Peers</h2>
 *
 * Any device may carry any client's transfer, so {@link #addPeer} and {@link #removePeer} reach
 * every device, and on efa-direct a client's passive target must insert <em>every</em> address of
 * {@link #localAddresses()} before it advertises (initiator first).
 *
 * <p>Threads: every method is thread-safe; {@link #submit} allocates nothing. Ownership: the group
 * owns its services and pool; {@link #close()} closes them all.
 *
 * @param <T> the caller context type
 */
public final class FabricServiceGroup<T extends Operands> implements AutoCloseable {
  private final List<FabricService<T>> services;
  private final FabricService<T>[] array;
  private final List<String> devices;
  private final ChecksumPool pool;

  // The array is read on every submit; generic arrays need the raw type once, here.
  @SuppressWarnings({"unchecked", "rawtypes"})
  private FabricServiceGroup(
      List<FabricService<T>> services, List<String> devices, ChecksumPool pool) {
    this.services = List.copyOf(services);
    this.array = services.toArray(new FabricService[0]);
    this.devices = List.copyOf(devices);
    this.pool = pool;
  }

  /**
   * Starts one service per device of the provider the configuration names.
   *
   * @param <T> the caller context type
   * @param configuration the configuration
   * @param completer receives every completion, from every device's worker
   * @return the running group
   * @throws DmaException when the provider is unavailable, lists no device, or a service fails to
   *     start (those already started are closed)
   */
  public static <T extends Operands> FabricServiceGroup<T> start(
      DmaConfiguration configuration, BatchCompleter<T> completer) {
    return start(configuration, FabricProviders.select(configuration), completer);
  }

  /**
   * Starts one service per device of a chosen provider.
   *
   * @param <T> the caller context type
   * @param configuration the configuration; {@code interfaces}, when set, lists the devices
   * @param provider the provider
   * @param completer receives every completion, from every device's worker
   * @return the running group
   * @throws DmaException when the provider lists no device or a service fails to start (those
   *     already started are closed)
   */
  public static <T extends Operands> FabricServiceGroup<T> start(
      DmaConfiguration configuration, FabricProvider provider, BatchCompleter<T> completer) {
    if (completer == null) {
      throw new NullPointerException("completer");
    }
    List<String> devices =
        configuration.interfaces().isEmpty()
            ? provider.discoverDomains(configuration)
            : configuration.interfaces();
    if (devices.isEmpty()) {
      throw DmaException.fabric(
          "provider \"" + provider.name() + "\" lists no devices to start a service on");
    }
    ChecksumPool pool = new ChecksumPool(configuration.crcPoolThreads());
    List<FabricService<T>> started = new ArrayList<>(devices.size());
    try {
      for (String device : devices) {
        DmaConfiguration pinned = configuration.toBuilder().interfaces(List.of(device)).build();
        started.add(
            FabricService.<T>builder(pinned)
                .provider(provider)
                .completer(completer)
                .checksumPool(pool)
                .start());
      }
    } catch (RuntimeException | Error failed) {
      for (FabricService<T> service : started) {
        service.close();
      }
      pool.close();
      throw failed;
    }
    return new FabricServiceGroup<>(started, devices, pool);
  }

  /**
   * The services, one per device, in device order.
   *
   * @return the services
   */
  public List<FabricService<T>> services() {
    return services;
  }

  /**
   * The device (domain) names, in the order of {@link #services()}.
   *
   * @return the names
   */
  public List<String> devices() {
    return devices;
  }

  /**
   * Every device's address, in device order: a client's passive target inserts all of them
   * (efa-direct's initiator-first rule), because any device may carry its transfers.
   *
   * @return fresh copies
   */
  public List<byte[]> localAddresses() {
    List<byte[]> addresses = new ArrayList<>(array.length);
    for (FabricService<T> service : array) {
      addresses.add(service.localAddress());
    }
    return addresses;
  }

  /**
   * Transfers submitted and not completed, summed over the devices (a relaxed reading).
   *
   * @return the count
   */
  public long outstanding() {
    long total = 0;
    for (FabricService<T> service : array) {
      total += service.outstanding();
    }
    return total;
  }

  /**
   * Submits a transfer to the less loaded of two devices picked at random. Never blocks unless the
   * chosen worker's queue is full.
   *
   * @param request the transfer
   * @return {@code true} when a device accepted it; {@code false} when every worker is gone, in
   *     which case the request stays the caller's
   */
  public boolean submit(TransferRequest<T> request) {
    int chosen = choose();
    if (array[chosen].submit(request)) {
      return true;
    }
    // That worker is gone: any other running one will do.
    for (int i = 0; i < array.length; i++) {
      if (i != chosen && array[i].submit(request)) {
        return true;
      }
    }
    return false;
  }

  /** Power of two choices among the running devices. */
  int choose() {
    int n = array.length;
    if (n == 1) {
      return 0;
    }
    ThreadLocalRandom random = ThreadLocalRandom.current();
    int first = random.nextInt(n);
    int second = random.nextInt(n - 1);
    if (second >= first) {
      second++;
    }
    return pick(
        first,
        array[first].isRunning(),
        array[first].outstanding(),
        second,
        array[second].isRunning(),
        array[second].outstanding());
  }

  /** The better of two candidates: a running one over a stopped one, then the less loaded. */
  static int pick(
      int first,
      boolean firstRunning,
      long firstLoad,
      int second,
      boolean secondRunning,
      long secondLoad) {
    if (firstRunning != secondRunning) {
      return firstRunning ? first : second;
    }
    return secondLoad < firstLoad ? second : first;
  }

  /**
   * Inserts a client's address on every device, so a bad address fails here and any device can
   * carry its transfers. Blocks until every worker answered.
   *
   * @param clientId the client
   * @param address its fabric address
   * @throws DmaException the first device's refusal (the others are still asked)
   */
  public void addPeer(long clientId, byte[] address) {
    DmaException first = null;
    for (FabricService<T> service : array) {
      try {
        service.addPeer(clientId, address);
      } catch (DmaException refused) {
        if (first == null) {
          first = refused;
        }
      }
    }
    if (first != null) {
      throw first;
    }
  }

  /**
   * Releases a client's peer on every device, each once its transfers there complete.
   *
   * @param clientId the client
   */
  public void removePeer(long clientId) {
    for (FabricService<T> service : array) {
      service.removePeer(clientId);
    }
  }

  /**
   * Pins native memory on every device, so operands inside it are cache hits wherever they go. The
   * returned handle invalidates the registration on every device when closed (the registration
   * registry is process-wide).
   *
   * @param segment native memory that outlives the region and its transfers
   * @return the region
   * @throws DmaException as {@link FabricService#register}
   */
  public MemoryRegion register(MemorySegment segment) {
    MemoryRegion first = null;
    for (FabricService<T> service : array) {
      MemoryRegion region = service.register(segment);
      // One handle is enough: closing it invalidates the range on every service's domain, and
      // closing the others later could retire a newer registration of reused memory.
      if (first == null) {
        first = region;
      }
    }
    return first;
  }

  /** Closes every service (each drains its posted transfers), then the shared pool. Idempotent. */
  @Override
  public void close() {
    for (FabricService<T> service : array) {
      service.close();
    }
    pool.close();
  }

  @Override
  public String toString() {
    return "FabricServiceGroup" + devices;
  }
}
