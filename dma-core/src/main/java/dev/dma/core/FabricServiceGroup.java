package dev.dma.core;

import dev.dma.api.BatchCompleter;
import dev.dma.api.CacheableSpan;
import dev.dma.api.Checksum;
import dev.dma.api.Checksums;
import dev.dma.api.Completion;
import dev.dma.api.Direction;
import dev.dma.api.DmaConfiguration;
import dev.dma.api.DmaException;
import dev.dma.api.Operands;
import dev.dma.api.Outcome;
import dev.dma.api.Peer;
import dev.dma.api.TransferDone;
import dev.dma.api.TransferRequest;
import dev.dma.core.internal.FabricWorker;
import dev.dma.core.internal.Intake;
import dev.dma.core.internal.peers.BoundPeer;
import dev.dma.spi.FabricProvider;
import io.opentelemetry.api.OpenTelemetry;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Consumer;
import org.jspecify.annotations.Nullable;

/**
 * One {@link FabricService} per device, used as one: an EFA instance has 2 to 32 EFA devices (p4d
 * 4, p5 32), and one endpoint cannot drive more than its own. Works over any provider (the fake's
 * fabrics stand in for devices in tests).
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
public final class FabricServiceGroup<T extends Operands> implements AutoCloseable {
  private final List<FabricService<T>> services;
  private final FabricService<T>[] array;
  private final List<String> devices;
  private final ChecksumPool pool;
  private final boolean ownsPool;
  private final Router<T> router;
  private final long stripeThresholdBytes;
  private final int stripeChunks;

  // The array is read on every submit; generic arrays need the raw type once, here.
  @SuppressWarnings({"unchecked", "rawtypes"})
  private FabricServiceGroup(
      List<FabricService<T>> services,
      List<String> devices,
      ChecksumPool pool,
      boolean ownsPool,
      Router<T> router,
      long stripeThresholdBytes,
      int stripeChunks) {
    this.services = List.copyOf(services);
    this.array = services.toArray(new FabricService[0]);
    this.devices = List.copyOf(devices);
    this.pool = pool;
    this.ownsPool = ownsPool;
    this.router = router;
    this.stripeThresholdBytes = stripeThresholdBytes;
    this.stripeChunks = stripeChunks;
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
    FabricProvider provider =
        builder.provider != null ? builder.provider : FabricProviders.select(configuration);
    if (builder.completer == null) {
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
    int chunks = builder.stripeChunks > 0 ? builder.stripeChunks : devices.size();
    Router<T> router = new Router<>(builder.completer);
    boolean ownsPool = builder.pool == null;
    ChecksumPool pool =
        builder.pool != null ? builder.pool : new ChecksumPool(configuration.crcPoolThreads());
    List<FabricService<T>> started = new ArrayList<>(devices.size());
    try {
      for (String device : devices) {
        DmaConfiguration pinned = configuration.toBuilder().interfaces(List.of(device)).build();
        FabricService.Builder<T> service =
            FabricService.<T>builder(pinned)
                .provider(provider)
                .completer(router)
                .checksumPool(pool)
                .clock(builder.clock)
                .traceWorkerPasses(builder.traceWorkerPasses)
                .onLocalAddressChange(builder.addressListener);
        if (builder.openTelemetry != null) {
          service.openTelemetry(builder.openTelemetry);
        }
        started.add(service.start());
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
    return new FabricServiceGroup<>(
        started, devices, pool, ownsPool, router, builder.stripeThresholdBytes, chunks);
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
   * FabricService.Offer#FULL} or {@link FabricService.Offer#CLOSED} means nothing of it was asked
   * of its context (no {@link Operands#allocate}) nor posted. Once accepted, a request the worker
   * would refuse at intake (no operand, heap or short memory, outside the advertised region, a
   * checksum over a confined arena) is refused whole, before any chunk is posted, with the text
   * naming the request as submitted.
   *
   * @param request the transfer
   * @return {@link FabricService.Offer#ACCEPTED} (exactly one completion follows, never on this
   *     thread when striped); {@link FabricService.Offer#FULL} when no device had room (for a
   *     striped transfer: for all its chunks) and one at least is running; {@link
   *     FabricService.Offer#CLOSED} when every worker is gone. A refused request stays the
   *     caller's.
   */
  public FabricService.Offer offer(TransferRequest<T> request) {
    if (stripeThresholdBytes > 0 && stripeChunks > 1) {
      if (request.direction() instanceof Direction.FromPeer(long lengthBytes)) {
        if (lengthBytes >= stripeThresholdBytes) {
          return offerStriped(request, lengthBytes, null);
        }
      } else {
        MemorySegment source = sourceOrNull(request.context());
        if (source != null && source.byteSize() >= stripeThresholdBytes) {
          return offerStriped(request, source.byteSize(), source);
        }
      }
    }
    return offerWhole(request, choose());
  }

  /**
   * Submits a transfer, as {@link #offer} does.
   *
   * @param request the transfer
   * @return {@code true} when the group accepted it (exactly one completion follows); {@code false}
   *     when it was refused (every device full, or every worker gone), and the request stays the
   *     caller's
   */
  public boolean submit(TransferRequest<T> request) {
    return offer(request) == FabricService.Offer.ACCEPTED;
  }

  /**
   * A write's source, to size it; null when there is none or asking threw. Either way the transfer
   * is then not striped: the worker asks again and fails it with the usual text.
   */
  private static @Nullable MemorySegment sourceOrNull(Operands context) {
    try {
      return context.source();
    } catch (Throwable callerBug) {
      // An Error included: the worker asks again and fails only this transfer (Intake).
      return null;
    }
  }

  /**
   * Offers a striped transfer of {@code length} bytes; {@code source} is a write's source, asked
   * once already, and null for a read.
   *
   * <p>The order is what makes it one transfer. First room for every chunk, so that FULL leaves
   * nothing to undo: a read's {@code allocate} is asked only once the group will accept, so a
   * caller's retry after FULL asks it for the first time, and an accepted request was asked exactly
   * once. Then the whole-request checks the worker would make on an unstriped transfer, in the
   * worker's order and with its texts, so that no chunk is posted for a request that would be
   * refused. Then the chunks.
   */
  private FabricService.Offer offerStriped(
      TransferRequest<T> request, long length, @Nullable MemorySegment source) {
    long chunkBytes = ceilDiv(ceilDiv(length, stripeChunks), STRIPE_ALIGNMENT) * STRIPE_ALIGNMENT;
    int count = (int) ceilDiv(length, chunkBytes);
    if (count < 2) {
      return offerWhole(request, choose());
    }
    int[] placed = new int[count];
    FabricService.Offer room = reserve(placed);
    if (room != FabricService.Offer.ACCEPTED) {
      return room;
    }
    // Accepted from here on: every outcome is the request's one completion.
    MemorySegment operand;
    try {
      operand = Intake.checkedOperand(request, source, services.getFirst().peerText());
    } catch (DmaException refused) {
      for (int device : placed) {
        array[device].release();
      }
      deliverOffThread(new Completion<>(request.context(), Outcome.failed(refused), 0, count));
      return FabricService.Offer.ACCEPTED;
    }
    Stripe<T> stripe = new Stripe<>(request, count, length);
    for (int i = 0; i < count; i++) {
      long offset = i * chunkBytes;
      long size = Math.min(chunkBytes, length - offset);
      Chunk chunk = new Chunk(stripe, i, operand.asSlice(offset, size));
      Direction direction =
          request.direction() instanceof Direction.FromPeer
              ? Direction.fromPeer(size)
              : Direction.TO_PEER;
      TransferRequest<Chunk> part =
          new TransferRequest<>(
              request.clientId(),
              request.peerAddress(),
              request.remoteKey(),
              request.remoteAddress() + offset,
              direction,
              request.checksum(),
              chunk,
              request.remoteBase(),
              request.remoteLength(),
              request.retryWrite(),
              request.peer());
      if (offerChunk(part, placed[i]) != FabricService.Offer.ACCEPTED) {
        // Its room was held, so only a worker that went away since refuses it.
        stripe.chunkDone(
            i,
            Outcome.failed(
                DmaException.fabric(
                    DmaException.Reason.CLOSED,
                    FabricWorker.WORKER_GONE + ": device " + devices.get(placed[i]))),
            0);
      }
    }
    Completion<T> whole = stripe.submitted();
    if (whole != null) {
      // Every chunk finished (or was refused) before this thread let go of the stripe.
      deliverOffThread(whole);
    }
    return FabricService.Offer.ACCEPTED;
  }

  /**
   * Takes room for one chunk per slot of {@code placed}, each on device {@code start + i} or, when
   * that one is full or gone, the next with room; fills in the devices. FULL or CLOSED (as {@link
   * #offerWhole} answers them, for the first chunk that found no room) gives every room back.
   */
  private FabricService.Offer reserve(int[] placed) {
    int start = choose();
    for (int i = 0; i < placed.length; i++) {
      FabricService.Offer answer = FabricService.Offer.CLOSED;
      int device = -1;
      for (int j = 0; j < array.length && device < 0; j++) {
        int candidate = (start + i + j) % array.length;
        FabricService.Offer room = array[candidate].reserve();
        if (room == FabricService.Offer.ACCEPTED) {
          device = candidate;
        } else if (room == FabricService.Offer.FULL) {
          answer = room;
        }
      }
      if (device < 0) {
        for (int k = 0; k < i; k++) {
          array[placed[k]].release();
        }
        return answer;
      }
      placed[i] = device;
    }
    return FabricService.Offer.ACCEPTED;
  }

  /**
   * Delivers a striped transfer's completion that the submitting thread would otherwise deliver (a
   * refusal at intake, or the last chunk finished before the submitter let go): on a checksum pool
   * thread, where checksummed completions are delivered anyway, so the completer never runs inside
   * {@link #offer} (where it could re-enter the caller's locks or recurse into offer). A pool that
   * is closing runs a job on the submitting thread; that job starts a thread of its own.
   */
  void deliverOffThread(Completion<T> completion) {
    Thread submitter = Thread.currentThread();
    pool.submit(
        () -> {
          if (Thread.currentThread() == submitter) {
            Thread.ofPlatform()
                .name("dma-stripe-completion")
                .daemon(true)
                .start(() -> router.deliver(completion));
          } else {
            router.deliver(completion);
          }
        });
  }

  /**
   * Offers to device {@code first}, then to each other in turn until one accepts: FULL when none
   * did and one at least was only full, CLOSED when every one is gone.
   */
  private FabricService.Offer offerWhole(TransferRequest<T> request, int first) {
    FabricService.Offer answer = FabricService.Offer.CLOSED;
    for (int i = 0; i < array.length; i++) {
      FabricService.Offer offered = array[(first + i) % array.length].offer(request);
      if (offered == FabricService.Offer.ACCEPTED) {
        return offered;
      }
      if (offered == FabricService.Offer.FULL) {
        answer = offered;
      }
    }
    return answer;
  }

  // A chunk rides a service typed for T: contexts are only ever used as Operands there, and the
  // router takes every Chunk out of the batches before the caller's completer sees them.
  @SuppressWarnings("unchecked")
  private FabricService.Offer offerChunk(TransferRequest<Chunk> part, int device) {
    return array[device].offerReserved((TransferRequest<T>) (TransferRequest<?>) part);
  }

  private static long ceilDiv(long value, long divisor) {
    return (value + divisor - 1) / divisor;
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
   * carry its transfers, and returns the client's {@link Peer}, which every device posts without a
   * lookup (see {@link FabricService#addPeer(long, byte[])}). Blocks until every worker answered.
   *
   * @param clientId the client
   * @param address its fabric address
   * @return the client's peer, for its requests
   * @throws DmaException the first device's refusal (the others are still asked)
   */
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
    if (ownsPool) {
      pool.close();
    }
  }

  @Override
  public String toString() {
    return "FabricServiceGroup" + devices;
  }

  /**
   * Builds a {@link FabricServiceGroup}. Not thread-safe; one builder per group.
   *
   * @param <T> the caller context type
   */
  public static final class Builder<T extends Operands> {
    private final DmaConfiguration configuration;
    private @Nullable FabricProvider provider;
    private @Nullable BatchCompleter<T> completer;
    private @Nullable OpenTelemetry openTelemetry;
    private @Nullable ChecksumPool pool;
    private NanoClock clock = NanoClock.system();
    private boolean traceWorkerPasses;
    private Consumer<byte[]> addressListener = address -> {};
    private long stripeThresholdBytes;
    private int stripeChunks;

    private Builder(DmaConfiguration configuration) {
      if (configuration == null) {
        throw new NullPointerException("configuration");
      }
      this.configuration = configuration;
    }

    /**
     * Sets the provider; by default the one the configuration selects.
     *
     * @param value the provider
     * @return this builder
     */
    public Builder<T> provider(FabricProvider value) {
      this.provider = value;
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

    /**
     * Sets where every device's spans and metrics go (each service's {@code dma.device} attribute
     * names its device); by default {@link io.opentelemetry.api.GlobalOpenTelemetry}, as for one
     * {@link FabricService}.
     *
     * @param value the application's OpenTelemetry
     * @return this builder
     */
    public Builder<T> openTelemetry(OpenTelemetry value) {
      this.openTelemetry = value;
      return this;
    }

    /**
     * Shares a checksum pool among the devices' services, which the caller keeps and closes after
     * the group; by default the group creates one of {@code crc_pool_threads} threads and closes
     * it.
     *
     * @param value the pool
     * @return this builder
     */
    public Builder<T> checksumPool(ChecksumPool value) {
      this.pool = Objects.requireNonNull(value, "checksumPool");
      return this;
    }

    /**
     * Sets every device's clock for the completion and progress deadlines, as {@link
     * FabricService.Builder#clock}; by default {@link NanoClock#system()}.
     *
     * @param value the clock
     * @return this builder
     */
    public Builder<T> clock(NanoClock value) {
      this.clock = Objects.requireNonNull(value, "clock");
      return this;
    }

    /**
     * Traces every device's worker passes, as {@link FabricService.Builder#traceWorkerPasses}; off
     * by default.
     *
     * @param value whether to trace worker passes
     * @return this builder
     */
    public Builder<T> traceWorkerPasses(boolean value) {
      this.traceWorkerPasses = value;
      return this;
    }

    /**
     * Tells {@code value} a device's new address whenever its worker reset the endpoint and the
     * address changed, as {@link FabricService.Builder#onLocalAddressChange} does for one service.
     * It runs on that device's worker thread (so on several threads over a group's life; must not
     * block or call back into the group), after the new address is in {@link
     * FabricServiceGroup#localAddresses()}: a server whose clients insert its addresses
     * (efa-direct) sends them the whole list again from there, or from a thread it hands the
     * address to.
     *
     * @param value the listener
     * @return this builder
     */
    public Builder<T> onLocalAddressChange(Consumer<byte[]> value) {
      this.addressListener = Objects.requireNonNull(value, "onLocalAddressChange");
      return this;
    }

    /**
     * Stripes transfers of at least this many bytes over several devices; 0 (the default) turns
     * striping off. Off by default because striping asks a write's {@code source()} on the
     * submitting thread and allocates per striped transfer, and because whether it pays depends on
     * the devices: measure (with {@code dma-bench run --devices N}) and then set it, e.g. 1 MiB on
     * EFA, where one device's bandwidth is the limit.
     *
     * @param value the threshold in bytes, at least 0
     * @return this builder
     * @throws IllegalArgumentException if negative
     */
    public Builder<T> stripeThresholdBytes(long value) {
      if (value < 0) {
        throw new IllegalArgumentException("stripeThresholdBytes is negative: " + value);
      }
      this.stripeThresholdBytes = value;
      return this;
    }

    /**
     * How many chunks a striped transfer is split into; 0 (the default) means one per device.
     *
     * @param value the chunk count, at least 0
     * @return this builder
     * @throws IllegalArgumentException if negative
     */
    public Builder<T> stripeChunks(int value) {
      if (value < 0) {
        throw new IllegalArgumentException("stripeChunks is negative: " + value);
      }
      this.stripeChunks = value;
      return this;
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

  /**
   * The local end of one chunk of a striped transfer: a slice of the whole operand. Its methods run
   * on the worker of the device that carries it.
   */
  static final class Chunk implements Operands {
    final Stripe<?> stripe;
    final int index;
    private final MemorySegment slice;

    Chunk(Stripe<?> stripe, int index, MemorySegment slice) {
      this.stripe = stripe;
      this.index = index;
      this.slice = slice;
    }

    @Override
    public MemorySegment source() {
      return slice;
    }

    @Override
    public MemorySegment allocate(long lengthBytes) {
      return slice;
    }

    @Override
    public @Nullable CacheableSpan cacheableSpan() {
      return stripe.context.cacheableSpan();
    }

    @Override
    public String toString() {
      return "chunk " + index + " of " + stripe.context;
    }
  }

  /**
   * One striped transfer in flight: counts its chunks down, keeps the first error and every chunk's
   * CRC-32C. Chunks finish on several threads at once; the one that counts to zero builds the
   * transfer's one completion. The count starts one above the chunks: the submitting thread holds
   * that share until it has offered every chunk, so no chunk finishing early can complete the
   * transfer while it is still being offered, and the submitter learns when it let go last. The
   * counter's decrements publish each chunk's CRC, and the submitter's tally, to whoever ends it.
   */
  static final class Stripe<T extends Operands> {
    final T context;
    private final TransferRequest<T> request;
    private final AtomicInteger remaining;
    private final AtomicReference<ChunkError> firstError = new AtomicReference<>();
    // The chunks' posts, summed: the transfer's Completion.posts, and whether a write may have
    // changed the target.
    private final AtomicInteger posts = new AtomicInteger();
    private final AtomicInteger chunksPosted = new AtomicInteger();
    private final int[] crcs;
    private final long[] lengths;
    private final long lengthBytes;
    private final boolean checksummed;

    Stripe(TransferRequest<T> request, int chunks, long lengthBytes) {
      this.request = request;
      this.context = request.context();
      this.remaining = new AtomicInteger(chunks + 1);
      this.crcs = new int[chunks];
      this.lengths = new long[chunks];
      this.lengthBytes = lengthBytes;
      this.checksummed = request.checksum() == Checksum.CRC32C;
    }

    /**
     * The submitting thread: every chunk was offered. Answers the transfer's completion when every
     * chunk had already finished, else null.
     */
    @Nullable Completion<T> submitted() {
      return countDown();
    }

    /**
     * Records one chunk's end; answers the transfer's completion when it was the last, else null.
     */
    @Nullable Completion<T> chunkDone(int index, Outcome outcome, int chunkPosts) {
      if (chunkPosts > 0) {
        posts.addAndGet(chunkPosts);
        chunksPosted.incrementAndGet();
      }
      if (outcome instanceof TransferDone done) {
        crcs[index] = done.checksum().orElse(0);
        lengths[index] = done.bytes();
      } else {
        firstError.compareAndSet(null, new ChunkError(index, outcome.error()));
      }
      return countDown();
    }

    private @Nullable Completion<T> countDown() {
      if (remaining.decrementAndGet() != 0) {
        return null;
      }
      return new Completion<>(context, aggregate(), posts.get(), crcs.length);
    }

    private Outcome aggregate() {
      ChunkError error = firstError.get();
      if (error != null) {
        return Outcome.failed(failure(error));
      }
      if (!checksummed) {
        return TransferDone.of(lengthBytes);
      }
      int crc = crcs[0];
      for (int i = 1; i < crcs.length; i++) {
        crc = Checksums.crc32cCombine(crc, crcs[i], lengths[i]);
      }
      return TransferDone.withChecksum(lengthBytes, crc);
    }

    /**
     * The request's failure, from its first chunk error: the chunk's kind, reason and error numbers
     * (so {@code retryable()} is the chunk's), the text naming the request as submitted and the
     * chunk, and what the target's memory may hold.
     *
     * <p>This is the one place that decides the last: a striped write any of whose chunks was
     * posted may have landed in part even though the request failed ({@link
     * DmaException.TargetMemory#MAY_HAVE_CHANGED}); one none of whose chunks was posted (refused
     * whole, or every chunk refused at its worker's intake) changed nothing.
     */
    private DmaException failure(ChunkError first) {
      boolean write = request.direction() instanceof Direction.ToPeer;
      int chunks = crcs.length;
      int posted = chunksPosted.get();
      boolean targetMayHaveChanged = write && posted > 0;
      String memory;
      if (!write) {
        memory = "";
      } else if (targetMayHaveChanged) {
        memory =
            "; "
                + posted
                + " of "
                + chunks
                + " chunks were posted, so the target's memory may have changed";
      } else {
        memory = "; no chunk was posted, so the target's memory is unchanged";
      }
      DmaException cause = first.error();
      return withTarget(
          targetMayHaveChanged,
          new DmaException(
              cause.kind(),
              cause.reason(),
              (write ? "striped write of " : "striped read of ")
                  + lengthBytes
                  + " bytes at remote address "
                  + Long.toUnsignedString(request.remoteAddress())
                  + ", chunk "
                  + first.index()
                  + " of "
                  + chunks
                  + ": "
                  + cause.getMessage()
                  + memory,
              cause.fabricErrno(),
              cause.providerErrno(),
              cause));
    }

    private static DmaException withTarget(boolean mayHaveChanged, DmaException error) {
      return error.withTargetMemory(
          mayHaveChanged
              ? DmaException.TargetMemory.MAY_HAVE_CHANGED
              : DmaException.TargetMemory.UNCHANGED);
    }
  }

  /** The first chunk of a striped transfer to fail, and why. */
  private record ChunkError(int index, DmaException error) {}

  /**
   * Every service's completer: passes batches without chunks straight to the caller's completer (no
   * allocation), and replaces chunks by their transfer's one completion once the last is in.
   */
  static final class Router<T extends Operands> implements BatchCompleter<T> {
    private static final System.Logger LOG = System.getLogger(FabricServiceGroup.class.getName());
    private final BatchCompleter<T> completer;

    Router(BatchCompleter<T> completer) {
      this.completer = completer;
    }

    @Override
    public void complete(List<Completion<T>> batch) {
      int size = batch.size();
      int i = 0;
      while (i < size && !((Object) batch.get(i).context() instanceof Chunk)) {
        i++;
      }
      if (i == size) {
        completer.complete(batch);
        return;
      }
      List<Completion<T>> out = new ArrayList<>(size);
      for (int j = 0; j < size; j++) {
        Completion<T> each = batch.get(j);
        if ((Object) each.context() instanceof Chunk chunk) {
          @SuppressWarnings("unchecked")
          Stripe<T> stripe = (Stripe<T>) chunk.stripe;
          Completion<T> whole = stripe.chunkDone(chunk.index, each.outcome(), each.posts());
          if (whole != null) {
            out.add(whole);
          }
        } else {
          out.add(each);
        }
      }
      if (!out.isEmpty()) {
        completer.complete(out);
      }
    }

    /** Delivers one completion outside a worker's batch (see {@link #deliverOffThread}). */
    void deliver(Completion<T> completion) {
      try {
        completer.complete(List.of(completion));
      } catch (RuntimeException thrown) {
        LOG.log(
            System.Logger.Level.WARNING,
            "the completer threw; the completion is delivered",
            thrown);
      }
    }
  }
}
