package dev.dma.core;

import dev.dma.api.BatchCompleter;
import dev.dma.api.Checksums;
import dev.dma.api.Completion;
import dev.dma.api.DmaConfiguration;
import dev.dma.api.DmaException;
import dev.dma.api.Operands;
import dev.dma.api.Peer;
import dev.dma.api.TransferRequest;
import dev.dma.core.internal.peers.BoundPeer;
import dev.dma.spi.EndpointInfo;
import dev.dma.spi.FabricProvider;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.ThreadLocalRandom;
import java.util.random.RandomGenerator;
import org.jspecify.annotations.Nullable;

/**
 * One {@link FabricService} per device, used as one: an EFA instance has 2 to 32 EFA devices (p4d
 * 4, p5 32), and one endpoint cannot drive more than its own. Works over any provider (the fake's
 * fabrics stand in for devices in tests). A {@link DmaService}, as one service is, so code written
 * against that interface runs on one device or many.
 *
 * <h2>Devices</h2>
 *
 * The configuration's {@code interfaces} when it names any, otherwise every domain the provider's
 * {@link FabricProvider#discoverDomains discoverDomains} lists; each service opens with {@code
 * interfaces} pinned to its one device. They share one {@link ChecksumPool}. With {@code bind} set,
 * the libfabric providers list only the domains that serve that address (on tcp, {@code
 * bind=127.0.0.1} gives {@code [lo]}, not every interface), so a default group never opens an
 * endpoint on a device that cannot reach it.
 *
 * <p>A name may repeat: {@code interfaces=lo,lo} opens two endpoints, each with its own worker, on
 * one device. That is how to stripe over one NIC, for example when one worker thread, not the
 * device, limits a large transfer (tcp over one interface); whether it pays is a measurement
 * ({@code dma-bench run --devices N}). {@link Completion#chunks()} tells a caller how many chunks a
 * transfer was split into.
 *
 * <h2>Spreading</h2>
 *
 * {@link #submit} picks two different devices at random and gives the transfer to the one with
 * fewer {@linkplain FabricService#outstanding() outstanding} transfers (power of two choices:
 * nearly the balance of asking every device, at the cost of two reads). With two devices that is
 * always the less loaded one. A device whose worker is gone is skipped.
 *
 * <h2>Health</h2>
 *
 * A device that is alive but failing (a NIC error, a link down, a rail that stalls) would otherwise
 * get its share and more: failing fast, it has fewer outstanding transfers. The group therefore
 * judges each device from the failures its worker already reports (nothing is added to a success):
 *
 * <ul>
 *   <li><b>What counts:</b> failures with reason {@code PROVIDER} (the NIC or provider reported an
 *       error), {@code DEADLINE} (posted and never completed: a stall), and {@code ENDPOINT_RESET}
 *       (a reset that did not heal keeps failing transfers). A device is paused after 4 of them in
 *       a row, with no success on that device in between, from <em>at least two different
 *       clients</em>.
 *   <li><b>What does not:</b> {@code ACCESS_DENIED}, {@code PEER_UNREACHABLE}, {@code BAD_REQUEST},
 *       {@code CLOSED}: they are about one client or the caller. And one client's failures never
 *       pause a device, whatever their reason: a dead or misbehaving client fails its own transfers
 *       on every device alike, and pausing a rail for it would move every other client's traffic
 *       for nothing. A success on the device between two faults also ends the run. (A group that
 *       only ever serves one client therefore never pauses a device.)
 *   <li><b>Paused:</b> the device gets no new transfers and no striped chunks while another device
 *       is healthy. After a cooldown (100 ms, doubling after each failed probe up to 5 s) the next
 *       whole read submitted is its probe; the device is healthy again when a probe succeeds. When
 *       every device is paused, the group sends as if none were: a pause never makes a degraded
 *       group a dead one. A change of state is logged once (WARNING when paused, INFO when back).
 *   <li><b>Failover:</b> a read that failed with {@code PROVIDER} or {@code ENDPOINT_RESET} (at
 *       once, before the device is judged, so a failing device's first faults cost nothing either),
 *       or with {@code DEADLINE} on a device judged at fault (paused, or in a run of faults from
 *       several clients), is posted again on a healthy device that has not carried it, with its
 *       operand as first resolved (the context is not asked again), under that device's own
 *       deadlines; a probe that fails is always moved. A deadline waits for the judgment: one
 *       silent client would otherwise wait out a deadline on every device in turn. A transfer that
 *       failed with {@code PEER_UNREACHABLE} (refused for the device's mark of its client, or
 *       failed by its connection: a rail cut, or a connection a cut left stuck or reset) moves as
 *       well, as another device may reach the client; a client that really is gone fails once on
 *       each device, at once or by its mark. A write is moved only when its request allows retries
 *       ({@link TransferRequest#retryWrite()}) and its failure says the target is {@code UNCHANGED}
 *       (it was never posted). A transfer is posted at most once per device and ends in exactly one
 *       completion: one that fails on every device completes failed with the last device's error.
 *       {@link Completion#posts()} then counts every device's posts and {@link
 *       Completion#devices()} how many devices carried it.
 *   <li><b>Seen from outside:</b> {@link #health()}, and per-device OpenTelemetry metrics ({@code
 *       dma.device.paused}, {@code dma.device.faults}, {@code .pauses}, {@code .probes}, {@code
 *       .failovers}).
 * </ul>
 *
 * <p>After a stall, the deadline also marks the clients' incarnations unreachable on that device,
 * as on one service, and transfers to them are refused there with {@code PEER_UNREACHABLE}. Those
 * marks say more about the device than about the clients, so a paused device drops its marks before
 * each probe and again when it comes back: each client is judged afresh there, and one that really
 * is gone is marked again by its next deadline. The application need not re-add clients for a
 * healed device. Health adds one volatile read to a submit while every device is healthy; the rest
 * runs on failures only.
 *
 * <h2>Peers</h2>
 *
 * Any device may carry any client's transfer, so {@link #addPeer} and {@link #removePeer} reach
 * every device, and on efa-direct a client's passive target must insert <em>every</em> address of
 * {@link #localAddresses()} before it advertises (initiator first). {@link #register} pins on every
 * device.
 *
 * <h2>Striping</h2>
 *
 * With {@link Builder#stripeThresholdBytes(long)} set, a transfer of at least that many bytes is
 * split into {@link Builder#stripeChunks(int)} chunks (by default one per device), each a
 * contiguous, page-aligned slice of the local operand (the source of a write, the one landing
 * buffer of a read) at the matching offset of the remote address, posted on consecutive devices at
 * once. The caller sees one transfer: exactly one {@link Completion} for its context, delivered
 * when <em>every</em> chunk has completed or failed (each bounded by its own device's progress
 * deadline), never earlier. It fails with the first chunk error to arrive; the others still run to
 * their end first, so no provider touches the operand once the completion is out. That failure
 * keeps the chunk's kind and reason, names the request (its length and remote address) and the
 * chunk, and for a write says whether any chunk was handed to a device: if one was, part of the
 * target may have been written although the transfer failed.
 *
 * <p>A striped transfer is admitted whole. {@link #offer} first takes room for every chunk (FULL
 * when some chunk finds none, with nothing asked of the context and nothing posted), then makes the
 * worker's intake checks once for the whole request: the operand resolves, the whole transfer lies
 * inside the advertised region ({@link TransferRequest#outOfBoundsReason}), and a checksummed
 * operand is not in a confined arena. A request that fails them completes failed with {@code
 * BAD_REQUEST} and the text an unstriped request would get, and no chunk is posted, so the target
 * is untouched. Only then are the chunks offered, into the room already held.
 *
 * <p>A checksum covers the whole operand: each chunk is hashed on the checksum pool as it
 * completes, and the last one combines the chunks' CRC-32Cs with {@link Checksums#crc32cCombine}
 * (about 40 ns a chunk). Hashing the whole operand once after the last chunk costs the same CPU but
 * adds all of it (258 us for 16 MiB here) to the transfer's latency on one thread; combining leaves
 * only the last chunk's own hash. A striped transfer allocates its chunk requests and one
 * aggregate; a transfer below the threshold takes the allocation-free path unchanged.
 *
 * <p>To size a striped write, the group asks the context's {@link Operands#source()} once, on the
 * submitting thread (the worker asks again when the write is not striped, so a source must answer
 * the same segment each time). A striped read asks {@link Operands#allocate(long)} exactly once per
 * accepted request, on the submitting thread, and only once room for it is held: a read refused
 * FULL was never asked, so its retry asks for the first time. {@link Operands#cacheableSpan()} may
 * be asked by several workers at once for one striped transfer.
 *
 * <p>Threads: every method is thread-safe; {@link #submit} of a transfer that is not striped
 * allocates nothing and takes no lock. The completer runs on every device's worker and checksum
 * threads, possibly at once. The completion of a striped transfer runs on the thread that finished
 * its last chunk, or, when that would be the submitting thread (a refusal at intake, or every chunk
 * done before {@link #offer} let go of the transfer), on a checksum-pool thread: never inside
 * {@link #offer}, so a completer that takes the caller's locks or submits again cannot deadlock or
 * recurse there. Ownership: the group owns its services and pool; {@link #close()} closes them all.
 *
 * @param <T> the caller context type
 */
public final class FabricServiceGroup<T extends Operands> implements DmaService<T> {
  private final List<FabricService<T>> services;
  private final FabricService<T>[] array;
  private final List<String> devices;
  private final ChecksumPool pool;
  private final boolean ownsPool;
  private final long stripeThresholdBytes;
  private final int stripeChunks;

  /**
   * How large transfers are cut into chunks and put back together ({@link Striping}, its own file);
   * null when striping is off: then no request is measured, and none is striped.
   */
  private final @Nullable Striping<T> striping;

  /** Each device's health, its pauses, probes and failover ({@link Rails}, its own file). */
  private final Rails<T> rails;

  /** A stepped group's device choice ({@link Stepping}, test-only); null in production. */
  private final @Nullable RandomGenerator steppedRandom;

  // The array is read on every submit; generic arrays need the raw type once, here.
  @SuppressWarnings({"unchecked", "rawtypes"})
  private FabricServiceGroup(
      List<FabricService<T>> services,
      List<String> devices,
      ChecksumPool pool,
      boolean ownsPool,
      Striping.Router<T> router,
      Rails<T> rails,
      long stripeThresholdBytes,
      int stripeChunks,
      @Nullable Stepping stepping) {
    this.services = List.copyOf(services);
    this.steppedRandom = stepping != null ? stepping.random() : null;
    this.array = services.toArray(new FabricService[0]);
    this.rails = rails;
    rails.services(array);
    this.devices = List.copyOf(devices);
    this.pool = pool;
    this.ownsPool = ownsPool;
    this.stripeThresholdBytes = stripeThresholdBytes;
    this.stripeChunks = stripeChunks;
    this.striping =
        stripeThresholdBytes > 0 && stripeChunks > 1
            ? new Striping<>(
                this,
                array,
                this.devices,
                pool,
                router,
                rails,
                stripeThresholdBytes,
                stripeChunks,
                stepping != null ? stepping.deliveries() : null)
            : null;
  }

  /**
   * A builder for a group on a configuration, with striping off.
   *
   * @param <T> the caller context type
   * @param configuration the configuration; {@code interfaces}, when set, lists the devices
   * @return the builder
   */
  public static <T extends Operands> Builder<T> builder(DmaConfiguration configuration) {
    return new Builder<>(configuration);
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
    return FabricServiceGroup.<T>builder(configuration)
        .provider(provider)
        .completer(completer)
        .start();
  }

  private static <T extends Operands> FabricServiceGroup<T> start(Builder<T> builder) {
    DmaConfiguration configuration = builder.configuration;
    FabricProvider provider = builder.providerOrSelected();
    BatchCompleter<T> completer = builder.completer;
    if (completer == null) {
      throw new NullPointerException("completer");
    }
    List<String> devices =
        configuration.interfaces().isEmpty()
            ? provider.discoverDomains(configuration)
            : configuration.interfaces();
    if (devices.isEmpty()) {
      throw DmaException.fabric(
          DmaException.Reason.PROVIDER_UNAVAILABLE,
          "provider \"" + provider.name() + "\" lists no devices to start a service on");
    }
    List<String> binds = builder.deviceBinds;
    if (!binds.isEmpty() && binds.size() != configuration.interfaces().size()) {
      throw new IllegalArgumentException(
          "deviceBinds names "
              + binds.size()
              + " addresses for "
              + configuration.interfaces().size()
              + " interfaces; give one per interface");
    }
    int chunks = builder.stripeChunks > 0 ? builder.stripeChunks : devices.size();
    Stepping stepping = builder.stepping;
    // A stepped group (Stepping, test-only) judges its rails on the caller's clock.
    NanoClock railClock = stepping != null ? builder.clock : NanoClock.system();
    Rails<T> rails =
        new Rails<>(devices, railClock, Rails.FIRST_COOLDOWN_NS, Rails.MAX_COOLDOWN_NS);
    Striping.Router<T> router = new Striping.Router<>(completer, rails);
    boolean ownsPool = builder.pool == null;
    ChecksumPool pool =
        builder.pool != null ? builder.pool : new ChecksumPool(configuration.crcPoolThreads());
    List<FabricService<T>> started = new ArrayList<>(devices.size());
    try {
      for (int i = 0; i < devices.size(); i++) {
        String device = devices.get(i);
        DmaConfiguration.Builder pinning = configuration.toBuilder().interfaces(List.of(device));
        if (!binds.isEmpty()) {
          pinning.bind(binds.get(i));
        }
        DmaConfiguration pinned = pinning.build();
        // Every option the group was given, then what the group decides for each device.
        started.add(
            builder
                .copyTo(FabricService.<T>builder(pinned))
                .provider(provider)
                .completer(router)
                .checksumPool(pool)
                .failureHook(rails.hook(i))
                .start());
      }
    } catch (RuntimeException | Error failed) {
      for (FabricService<T> service : started) {
        service.close();
      }
      if (ownsPool) {
        pool.close();
      }
      throw failed;
    }
    rails.registerMetrics(builder.openTelemetryOrGlobal(), provider.name());
    return new FabricServiceGroup<>(
        started,
        devices,
        pool,
        ownsPool,
        router,
        rails,
        builder.stripeThresholdBytes,
        chunks,
        stepping);
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
  @Override
  public List<String> devices() {
    return devices;
  }

  /**
   * Every device's address, in device order: a client's passive target inserts all of them
   * (efa-direct's initiator-first rule), because any device may carry its transfers.
   *
   * @return fresh copies
   */
  @Override
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
  @Override
  public long outstanding() {
    long total = 0;
    for (FabricService<T> service : array) {
      total += service.outstanding();
    }
    return total;
  }

  /**
   * The first device's endpoint description ({@link FabricService#endpointInfo()}).
   *
   * @return the description, captured at start
   */
  @Override
  public EndpointInfo endpointInfo() {
    return array[0].endpointInfo();
  }

  /**
   * The striping threshold: transfers of at least this many bytes are striped; 0 when off.
   *
   * @return the threshold in bytes, or 0
   */
  public long stripeThresholdBytes() {
    return stripeThresholdBytes;
  }

  /**
   * How many chunks a striped transfer is split into (fewer when it is too short for that many
   * {@value #STRIPE_ALIGNMENT}-byte aligned chunks).
   *
   * @return the chunk count
   */
  public int stripeChunks() {
    return stripeChunks;
  }

  /** Chunk boundaries fall on multiples of this many bytes (a page), except the operand's end. */
  public static final long STRIPE_ALIGNMENT = 4096;

  /**
   * Offers a transfer: striped over several devices when it reaches the striping threshold,
   * otherwise to the less loaded of two devices picked at random, and to any other device when that
   * one refuses. Never blocks for backpressure, as {@link FabricService#offer}.
   *
   * <p>A striped transfer is offered whole: room for every chunk is taken first, so {@link
   * Offer#FULL} or {@link Offer#CLOSED} means nothing of it was asked of its context (no {@link
   * Operands#allocate}) nor posted. Once accepted, a request the worker would refuse at intake (no
   * operand, heap or short memory, outside the advertised region, a checksum over a confined arena)
   * is refused whole, before any chunk is posted, with the text naming the request as submitted.
   *
   * @param request the transfer
   * @return {@link Offer#ACCEPTED} (exactly one completion follows, never on this thread when
   *     striped); {@link Offer#FULL} when no device had room (for a striped transfer: for all its
   *     chunks) and one at least is running; {@link Offer#CLOSED} when every worker is gone. A
   *     refused request stays the caller's.
   */
  @Override
  public Offer offer(TransferRequest<T> request) {
    Striping<T> stripes = striping;
    if (stripes != null) {
      Offer striped = stripes.offer(request);
      if (striped != null) {
        return striped;
      }
    }
    if (rails.anyPaused()) {
      return offerAroundPaused(request);
    }
    return offerWhole(request, choose());
  }

  /**
   * Offers a whole transfer while some device is paused: as a probe to a paused device whose
   * cooldown has passed (reads only), else to the healthy devices only, starting at the less loaded
   * of two; when every device is paused, as if none were.
   */
  private Offer offerAroundPaused(TransferRequest<T> request) {
    int probe = rails.claimProbe(request);
    if (probe >= 0) {
      Offer probed = rails.offerProbe(request, probe, array[probe]);
      if (probed == Offer.ACCEPTED) {
        return probed;
      }
    }
    int first = choose();
    Offer answer = Offer.CLOSED;
    boolean sent = false;
    for (int i = 0; i < array.length; i++) {
      int device = (first + i) % array.length;
      if (rails.avoid(device)) {
        continue;
      }
      sent = true;
      Offer offered = array[device].offer(request);
      if (offered == Offer.ACCEPTED) {
        return offered;
      }
      if (offered == Offer.FULL) {
        answer = offered;
      }
    }
    // No device was healthy by the time we looked (avoid reads each one afresh): send anyway.
    return sent ? answer : offerWhole(request, first);
  }

  /**
   * Each device's health, in device order: whether the group sends it new transfers, and its
   * faults, pauses, probes and failovers so far (see "Health" above). Thread-safe; a snapshot.
   *
   * @return one entry per device
   */
  public List<DeviceHealth> health() {
    return rails.health();
  }

  /**
   * Offers to device {@code first}, then to each other in turn until one accepts: FULL when none
   * did and one at least was only full, CLOSED when every one is gone.
   */
  private Offer offerWhole(TransferRequest<T> request, int first) {
    Offer answer = Offer.CLOSED;
    for (int i = 0; i < array.length; i++) {
      Offer offered = array[(first + i) % array.length].offer(request);
      if (offered == Offer.ACCEPTED) {
        return offered;
      }
      if (offered == Offer.FULL) {
        answer = offered;
      }
    }
    return answer;
  }

  /** Power of two choices among the running devices. */
  int choose() {
    int n = array.length;
    if (n == 1) {
      return 0;
    }
    RandomGenerator stepped = steppedRandom;
    RandomGenerator random = stepped != null ? stepped : ThreadLocalRandom.current();
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
   * carry its transfers, and returns the client's {@link Peer}, which every device posts without a
   * lookup (see {@link FabricService#addPeer(long, byte[])}). Blocks until every worker answered.
   *
   * @param clientId the client
   * @param address its fabric address
   * @return the client's peer, for its requests
   * @throws DmaException the first device's refusal (the others are still asked)
   */
  @Override
  public Peer addPeer(long clientId, byte[] address) {
    BoundPeer peer = new BoundPeer(clientId, address);
    DmaException first = null;
    for (FabricService<T> service : array) {
      try {
        service.addPeer(peer);
      } catch (DmaException refused) {
        if (first == null) {
          first = refused;
        }
      }
    }
    if (first != null) {
      throw first;
    }
    return peer;
  }

  /**
   * Releases a client's peer on every device, each once its transfers there complete.
   *
   * @param clientId the client
   */
  @Override
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
  @Override
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
    return Objects.requireNonNull(first, "a group has at least one service");
  }

  /**
   * Why an offer answered CLOSED: {@code the service is closed} once any device's service was
   * closed normally, otherwise the first device's text (its worker failed by itself).
   */
  String closedMessage() {
    for (FabricService<T> service : services) {
      if (service.closedMessage().equals(FabricService.SERVICE_CLOSED)) {
        return FabricService.SERVICE_CLOSED;
      }
    }
    return services.get(0).closedMessage();
  }

  /**
   * Closes every service (each drains its posted transfers), then the checksum pool unless the
   * caller shared its own ({@link Builder#checksumPool}). Idempotent.
   */
  @Override
  public void close() {
    for (FabricService<T> service : array) {
      service.close();
    }
    rails.close();
    if (ownsPool) {
      pool.close();
    }
  }

  @Override
  public String toString() {
    return "FabricServiceGroup" + devices;
  }

  /**
   * Builds a {@link FabricServiceGroup}: the options of every service ({@link ServiceOptions}),
   * which reach every device's service, the striping options ({@link GroupOptions}) and the
   * completer. Not thread-safe; one builder per group.
   *
   * @param <T> the caller context type
   */
  public static final class Builder<T extends Operands> extends GroupOptions<Builder<T>> {
    /** Required; the group wraps it in its router, the completer of every device's service. */
    private @Nullable BatchCompleter<T> completer;

    /** One source node per device, or empty: every device takes the configuration's bind. */
    private List<String> deviceBinds = List.of();

    /**
     * Gives each device its own source node ({@code bind}), in device order, in place of the
     * configuration's one: on tcp a device is an interface, and its endpoint listens on (and, for
     * the libfabric tcp provider, connects from) the address it is bound to, so two rails on two
     * interfaces need two addresses (the configuration's single {@code bind} would list only the
     * interface that serves it). Requires the configuration to name its {@code interfaces}, as many
     * as there are binds; empty (the default) leaves every device on the configuration's bind.
     *
     * @param value one host name or address per device, possibly empty
     * @return this builder
     */
    public Builder<T> deviceBinds(List<String> value) {
      this.deviceBinds = List.copyOf(value);
      return this;
    }

    /**
     * Sets the completer (required): it receives every completion, from every device.
     *
     * @param value the completer
     * @return this builder
     */
    public Builder<T> completer(BatchCompleter<T> value) {
      this.completer = value;
      return this;
    }

    private Builder(DmaConfiguration configuration) {
      super(configuration);
    }

    /**
     * Starts one service per device.
     *
     * @return the running group
     * @throws NullPointerException if no completer was set
     * @throws DmaException when the provider is unavailable, lists no device, or a service fails to
     *     start (those already started are closed)
     */
    public FabricServiceGroup<T> start() {
      return FabricServiceGroup.start(this);
    }
  }
}
