package dev.dma.core;

import dev.dma.api.Advertisement;
import dev.dma.api.BatchCompleter;
import dev.dma.api.DmaConfiguration;
import dev.dma.api.DmaException;
import dev.dma.api.MemoryKind;
import dev.dma.api.Operands;
import dev.dma.api.Peer;
import dev.dma.api.TransferRequest;
import dev.dma.core.internal.Commands;
import dev.dma.core.internal.FabricWorker;
import dev.dma.core.internal.Reply;
import dev.dma.core.internal.Telemetry;
import dev.dma.core.internal.Threads;
import dev.dma.core.internal.Traced;
import dev.dma.core.internal.WorkerChannel;
import dev.dma.core.internal.peers.BoundPeer;
import dev.dma.core.internal.peers.PeerTable;
import dev.dma.core.internal.regions.LocalRegions;
import dev.dma.core.internal.regions.RegionRegistry;
import dev.dma.spi.EndpointInfo;
import dev.dma.spi.FabricEndpoint;
import dev.dma.spi.FabricProvider;
import io.opentelemetry.api.OpenTelemetry;
import io.opentelemetry.context.Context;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Consumer;
import java.util.function.Function;
import org.jspecify.annotations.Nullable;

/**
 * The entry point: one fabric worker thread ({@code fabric-NN}) driving one endpoint (one device),
 * to which any number of threads submit RMA transfers. A {@link DmaService}, as a {@link
 * FabricServiceGroup} of several devices is.
 *
 * <p>Every accepted transfer produces exactly one {@link dev.dma.api.Completion}, delivered to the
 * {@link BatchCompleter}: on the worker thread for plain transfers, on a {@link ChecksumPool}
 * thread for checksummed ones. Completions are unordered relative to submission. Messages from one
 * thread are handled in order, so {@link #removePeer(long)} comes after that thread's earlier
 * submits.
 *
 * <p>Threads: every method is thread-safe. {@link #start}, {@link #register}, {@link #addPeer} and
 * {@link #close} block until the worker answers; none of them hangs if the worker dies, and each
 * refuses with an {@link IllegalStateException} to run on the worker thread itself (from a {@link
 * BatchCompleter}), where it would wait for its own thread.
 *
 * <p>Lifetimes are bounded: a posted transfer fails after {@code completion_deadline} without a
 * completion, and is delivered only once the endpoint was reset (or its flush came), so the
 * provider can no longer touch its operand; its client's later transfers then fail at once until
 * {@link #addPeer} (see {@link DmaException.Reason}). Admission is bounded by {@code max_pending}
 * ({@link #offer}).
 *
 * <p>Ownership: the service owns its endpoint and, when it created it, its checksum pool; {@link
 * #close()} waits for in-flight transfers at most {@code close_timeout}, then closes the endpoint
 * and fails what is left; never-posted ones fail with "fabric worker is gone"; no thread is left
 * running.
 *
 * @param <T> the caller context type
 */
public final class FabricService<T extends Operands> implements DmaService<T> {
  private static final System.Logger LOG = System.getLogger(FabricService.class.getName());

  /** Process-wide worker numbering: fabric-00, fabric-01, ... */
  private static final AtomicInteger WORKER_NUMBERS = new AtomicInteger();

  /**
   * Room in the channel for commands beyond the transfers that {@code max_pending} admits, so
   * offers practically never wait for room.
   */
  private static final int COMMAND_ROOM = 1 << 12;

  /**
   * The largest channel. The worker drains the channel into its pending queue every pass, so it
   * rarely holds much; but its ring is walked slot by slot, and one of 131,072 slots (1.5 MiB with
   * its sequence numbers) no longer stayed in cache: +20 % per window-1 transfer on the fake (JMH).
   * Beyond this a submitter waits for room, which only a worker that stopped draining makes it do.
   */
  private static final int MAX_CHANNEL_CAPACITY = 1 << 16;

  /** How long close waits for the worker beyond its close timeout before it gives up on it. */
  private static final Duration JOIN_GRACE = Duration.ofSeconds(5);

  /** The least close() waits for its own checksum pool's threads, however late the worker ended. */
  private static final Duration POOL_GRACE = Duration.ofMillis(500);

  /**
   * The text of a call refused because {@link #close()} was called: a normal close, unlike {@link
   * FabricWorker#WORKER_GONE} (a worker that failed by itself).
   */
  static final String SERVICE_CLOSED = "the service is closed";

  private final WorkerChannel channel;
  private final AtomicLong outstanding;
  // Null for a stepped service (Stepping, test-only): its caller drives the worker.
  private final @Nullable Thread worker;
  private final @Nullable ChecksumPool ownedPool;
  private final AtomicReference<byte[]> localAddress;
  private final long maxOutstanding;
  private final EndpointInfo endpointInfo;
  private final int inFlightCap;
  private final String providerName;
  private final String device;
  private final Function<byte[], String> peerText;
  private final boolean tracing;
  private final Duration closeTimeout;

  /** Set by {@link #close(Duration)}, so a refused call says "closed" rather than "gone". */
  private volatile boolean closeCalled;

  private FabricService(
      WorkerChannel channel,
      AtomicLong outstanding,
      @Nullable Thread worker,
      @Nullable ChecksumPool ownedPool,
      Ready ready,
      String providerName,
      String device,
      boolean tracing,
      Duration closeTimeout,
      AtomicReference<byte[]> localAddress,
      long maxOutstanding) {
    this.tracing = tracing;
    this.closeTimeout = closeTimeout;
    this.localAddress = localAddress;
    this.maxOutstanding = maxOutstanding;
    this.channel = channel;
    this.outstanding = outstanding;
    this.worker = worker;
    this.ownedPool = ownedPool;
    this.endpointInfo = ready.info();
    this.inFlightCap = ready.cap();
    this.providerName = providerName;
    this.device = device;
    this.peerText = ready.peerText();
  }

  /**
   * The endpoint's rendering of a peer address for failure texts ({@link
   * dev.dma.spi.FabricEndpoint#peerText}, a pure function of the bytes, safe on any thread): a
   * group names a client in the refusal of a striped request as the worker does.
   */
  Function<byte[], String> peerText() {
    return peerText;
  }

  /**
   * Starts a service on the provider the configuration names, with its own checksum pool of {@link
   * DmaConfiguration#crcPoolThreads()} threads. Blocks until the worker has opened its endpoint.
   *
   * @param <T> the caller context type
   * @param configuration the configuration
   * @param completer receives every completion
   * @return the running service
   * @throws DmaException when no provider serves the configuration or the endpoint fails to open
   */
  public static <T extends Operands> FabricService<T> start(
      DmaConfiguration configuration, BatchCompleter<T> completer) {
    return FabricService.<T>builder(configuration).completer(completer).start();
  }

  /**
   * A builder for a service with a chosen provider, shared checksum pool or test clock.
   *
   * @param <T> the caller context type
   * @param configuration the configuration
   * @return the builder
   */
  public static <T extends Operands> Builder<T> builder(DmaConfiguration configuration) {
    return new Builder<>(configuration);
  }

  /**
   * Retires every cached registration, on every service's domain, that overlaps {@code [start,
   * end)}: no new transfer binds to it, and it is deregistered once the transfers leasing it
   * complete. Call it before unmapping or freeing memory any {@link
   * dev.dma.api.Operands#cacheableSpan()} answered. Thread-safe; may block briefly.
   *
   * @param start the first address
   * @param end one past the last address
   */
  public static void invalidate(long start, long end) {
    RegionRegistry.global().invalidate(start, end);
  }

  /**
   * The endpoint's current fabric address; send it to clients (on efa-direct a target must insert
   * it into its own address vector before the server can reach it). It changes only when the worker
   * resets the endpoint to recover from a lost completion; {@link Builder#onLocalAddressChange}
   * tells when.
   *
   * @return a copy of the address bytes
   */
  public byte[] localAddress() {
    return Objects.requireNonNull(localAddress.get()).clone();
  }

  /**
   * The endpoint's current address, as the one element of a list ({@link #localAddress()}).
   *
   * @return a fresh copy
   */
  @Override
  public List<byte[]> localAddresses() {
    return List.of(localAddress());
  }

  /**
   * The one device this service runs on: the one it pinned ({@code interfaces[0]}), or its
   * provider's name when none was configured.
   *
   * @return the name, as a one-element list
   */
  @Override
  public List<String> devices() {
    return List.of(device);
  }

  /**
   * What the endpoint turned out to be.
   *
   * @return the endpoint's description, captured at start
   */
  @Override
  public EndpointInfo endpointInfo() {
    return endpointInfo;
  }

  /**
   * The provider name this service runs on.
   *
   * @return the provider's name
   */
  public String providerName() {
    return providerName;
  }

  /**
   * The effective in-flight cap: the configured value clamped to the provider's transmit depth.
   *
   * @return the cap
   */
  public int inFlightCap() {
    return inFlightCap;
  }

  /**
   * Transfers submitted and not yet completed, queued and posted alike. A relaxed reading, for load
   * balancing across devices.
   *
   * @return the count
   */
  @Override
  public long outstanding() {
    return outstanding.get();
  }

  /**
   * Whether the worker is running and accepting transfers.
   *
   * @return whether submits can succeed
   */
  public boolean isRunning() {
    return !channel.isClosed() && (worker == null || worker.isAlive());
  }

  /**
   * Submits a transfer without waiting for backpressure, or says why not. On {@link Offer#ACCEPTED}
   * the request's context belongs to the service until its completion; otherwise it stays the
   * caller's. The one wait left is for room in the worker's channel (at most 65,536 messages),
   * which only a worker that stopped draining it causes, for example a {@link BatchCompleter}
   * blocking on the worker thread.
   *
   * <p>Backpressure: at most {@code max_pending} transfers beyond the in-flight cap may be
   * outstanding; past that the offer is {@link Offer#FULL} instead of growing a queue without
   * limit.
   *
   * @param request the transfer
   * @return whether it was accepted, and if not, why
   */
  @Override
  public Offer offer(TransferRequest<T> request) {
    Offer room = takeRoom();
    return room == Offer.ACCEPTED ? offerReserved(request) : room;
  }

  private Offer takeRoom() {
    if (outstanding.incrementAndGet() > maxOutstanding) {
      outstanding.decrementAndGet();
      return channel.isClosed() ? Offer.CLOSED : Offer.FULL;
    }
    return Offer.ACCEPTED;
  }

  /**
   * Takes room for one transfer without sending one: {@link Offer#ACCEPTED} when this service
   * counts one more outstanding transfer, which the caller must then pass to {@link #offerReserved}
   * or give back with {@link #release}; otherwise why not, and nothing is held. Lets {@link
   * FabricServiceGroup} hold room for every chunk of a striped transfer before it asks the caller
   * for an operand or posts any chunk, so a striped transfer is refused whole or not at all.
   */
  Offer reserve() {
    // A closed service would take the room and refuse the chunk only once the operand is resolved;
    // asking first lets the group place that chunk on another device.
    return channel.isClosed() ? Offer.CLOSED : takeRoom();
  }

  /** Gives back room {@link #reserve} took and no transfer used. */
  void release() {
    outstanding.decrementAndGet();
  }

  /**
   * Sends a transfer into room {@link #reserve} took: {@link Offer#ACCEPTED}, or {@link
   * Offer#CLOSED} (the room given back) when the worker went away since.
   */
  Offer offerReserved(TransferRequest<T> request) {
    // With tracing installed the submitter's context rides along to parent the dma.wire span;
    // without it nothing extra is allocated.
    Object message = tracing ? new Traced(request, Context.current()) : request;
    if (channel.offer(message)) {
      return Offer.ACCEPTED;
    }
    outstanding.decrementAndGet();
    return Offer.CLOSED;
  }

  /**
   * Pins native memory in this service's registration cache, so operands inside it are cache hits.
   * A no-op pin (still returning a region) on providers that need no local registration. Blocks
   * until the worker registered it.
   *
   * @param segment native memory, which must stay alive until the region is closed and every
   *     transfer inside it completed
   * @return the region; close it before freeing the memory
   * @throws DmaException {@link DmaException.Reason#BAD_REQUEST} for an empty or non-native segment
   *     or an overflowing range; {@link DmaException.Reason#CLOSED} once the service is closed or
   *     its worker is gone; the provider's reason for a failed registration
   */
  @Override
  public MemoryRegion register(MemorySegment segment) {
    return register(segment, MemoryKind.HOST);
  }

  /**
   * {@link #register(MemorySegment)} for memory of the given kind: the kind reaches the provider's
   * {@code register}, which refuses a kind it cannot register (the shipped libfabric providers
   * register {@link MemoryKind#HOST} only). Memory other than system memory is registered even on
   * providers that need no local registration.
   *
   * @param segment native memory (a segment over the memory's address), alive until the region is
   *     closed and every transfer inside it completed
   * @param kind the memory's kind, as the contexts of transfers inside it report it
   * @return the region; close it before freeing the memory
   * @throws DmaException as {@link #register(MemorySegment)}; the provider's refusal of the kind
   */
  public MemoryRegion register(MemorySegment segment, MemoryKind kind) {
    Objects.requireNonNull(kind, "kind");
    refuseOnWorker("register");
    if (!segment.isNative()) {
      throw DmaException.fabric(
          DmaException.Reason.BAD_REQUEST,
          "cannot register a heap segment; register native memory");
    }
    long base = segment.address();
    long length = segment.byteSize();
    if (length == 0) {
      throw DmaException.fabric(DmaException.Reason.BAD_REQUEST, "cannot register 0 bytes");
    }
    if (base < 0 || base + length < base) {
      throw DmaException.fabric(
          DmaException.Reason.BAD_REQUEST, "registered region range overflows");
    }
    Reply<Void> reply = new Reply<>();
    if (!channel.offer(new Commands.Pin(base, length, kind, reply))) {
      throw closedError();
    }
    reply.await("fabric worker exited before registering");
    return new MemoryRegion(segment, RegionRegistry.global());
  }

  /**
   * Inserts a client's address ahead of any transfer, so a bad address fails here (the client's
   * hello) rather than on its first transfer, and returns the client's {@link Peer}: requests that
   * carry it ({@link TransferRequest#write(Peer, Advertisement, Operands)}) are posted without
   * looking the client up, which keeps the cost of a transfer flat with many thousands of clients.
   * Asking again with the same address is harmless; the newest peer is the fast one, and an older
   * one still works, through the lookup. Blocks until the worker answers.
   *
   * @param clientId the client
   * @param address its fabric address
   * @return the client's peer, for its requests; keep it beside the client's advertisement
   * @throws DmaException {@link DmaException.Reason#BAD_REQUEST} for an address that is not one of
   *     this provider's (wrong length or form); {@link DmaException.Reason#CLOSED} once the service
   *     is closed or its worker is gone; the provider's reason for an address it refuses
   */
  @Override
  public Peer addPeer(long clientId, byte[] address) {
    BoundPeer peer = new BoundPeer(clientId, address);
    addPeer(peer);
    return peer;
  }

  /** Adds a client's peer, issued by this service or by its group. */
  void addPeer(BoundPeer peer) {
    refuseOnWorker("addPeer");
    Reply<Void> reply = new Reply<>();
    if (!channel.offer(new Commands.AddPeer(peer, reply))) {
      throw closedError();
    }
    reply.await("fabric worker exited before adding the peer");
  }

  /**
   * The refusal of a call the worker can no longer take: {@link #SERVICE_CLOSED} after {@link
   * #close()}, {@link FabricWorker#WORKER_GONE} when the worker ended by itself.
   */
  DmaException closedError() {
    return DmaException.fabric(DmaException.Reason.CLOSED, closedMessage());
  }

  /** The text of {@link #closedError()}. */
  String closedMessage() {
    return closeCalled ? SERVICE_CLOSED : FabricWorker.WORKER_GONE;
  }

  /**
   * Releases a client's peer entry once every transfer it already submitted here completes; best
   * effort and fire-and-forget. Tell every service that may have served the client.
   *
   * @param clientId the client
   */
  @Override
  public void removePeer(long clientId) {
    channel.offer(new Commands.RemovePeer(clientId));
  }

  /**
   * Drops every client incarnation this service's worker marked dead (a group's paused device: see
   * {@link Commands.ForgetDeadPeers}), in its place among the transfers submitted after it.
   * Fire-and-forget; does nothing once the service closed.
   */
  void forgetDeadPeers() {
    channel.offer(Commands.ForgetDeadPeers.INSTANCE);
  }

  /**
   * Stops accepting transfers, lets posted transfers complete for at most {@code close_timeout}
   * (then fails the rest with {@link DmaException.Reason#CLOSED} once the endpoint is closed),
   * fails the never-posted ones with "fabric worker is gone", closes the endpoint and joins the
   * worker (and the checksum pool the service created, for what is left of the timeout: a pool
   * thread stuck in the {@link BatchCompleter} is left behind, see {@link ChecksumPool}). Always
   * returns. Idempotent.
   *
   * @throws IllegalStateException when called on the worker thread or on a thread of the service's
   *     own checksum pool (from the {@link BatchCompleter})
   */
  @Override
  public void close() {
    close(closeTimeout);
  }

  /**
   * Closes like {@link #close()}, waiting at most {@code timeout} for posted transfers before the
   * endpoint is recovered and what remains fails.
   *
   * @param timeout the longest wait for posted transfers
   */
  public void close(Duration timeout) {
    refuseOnWorker("close");
    if (ownedPool != null && ownedPool.isPoolThread(Thread.currentThread())) {
      throw new IllegalStateException(
          "close() was called on a checksum-pool thread of this service, from a BatchCompleter:"
              + " it would wait for that thread to finish; close from another thread");
    }
    closeCalled = true;
    long closeDeadline = System.nanoTime() + timeout.toNanos();
    channel.close(closeDeadline);
    // Bounded too: the worker returns at the close deadline, and only a provider blocking inside
    // fi_close could hold it past the grace; then the service gives up on it (a daemon thread)
    // rather than hang its caller.
    if (worker != null && !Threads.joinUninterruptibly(worker, timeout.plus(JOIN_GRACE))) {
      LOG.log(
          System.Logger.Level.ERROR,
          worker.getName()
              + " did not stop within "
              + timeout.plus(JOIN_GRACE)
              + " of close(); it is left behind, blocked in its provider");
    }
    if (ownedPool != null) {
      // Bounded by what is left of the timeout (at least POOL_GRACE, for the batch the worker's
      // last pass flushed): a completer blocking a pool thread must not hold close() either; the
      // pool leaves such a thread behind with an ERROR, and it keeps the jobs it was given.
      ownedPool.close(
          Duration.ofNanos(Math.max(POOL_GRACE.toNanos(), closeDeadline - System.nanoTime())));
    }
  }

  /**
   * Blocking calls from the completer's own worker thread would wait for the thread that is running
   * them: refuse them with the rule instead of hanging.
   */
  private void refuseOnWorker(String call) {
    if (Thread.currentThread() == worker) {
      throw new IllegalStateException(
          call
              + "() was called on the fabric worker thread, from a BatchCompleter: it waits for"
              + " the worker, which is busy running the completer; call it from another thread");
    }
  }

  @Override
  public String toString() {
    return "FabricService[provider=" + providerName + ", running=" + isRunning() + "]";
  }

  /** What the worker reports once its endpoint is open. */
  private record Ready(
      EndpointInfo info, int cap, boolean tracing, Function<byte[], String> peerText) {}

  /**
   * Builds and starts a {@link FabricService}: the options every service takes ({@link
   * ServiceOptions}) and the completer. Not thread-safe.
   *
   * @param <T> the caller context type
   */
  public static final class Builder<T extends Operands> extends ServiceOptions<Builder<T>> {
    private @Nullable BatchCompleter<T> completer;
    // A group's rail health (FabricServiceGroup), told of every failure on the worker; none for a
    // service on its own.
    private dev.dma.core.internal.@Nullable FailureHook<T> failureHook;

    private Builder(DmaConfiguration configuration) {
      super(configuration);
    }

    /**
     * Sets the completion hook (required).
     *
     * @param value the hook
     * @return this builder
     */
    public Builder<T> completer(BatchCompleter<T> value) {
      this.completer = value;
      return this;
    }

    /** The group's failure hook for this device's worker (package-private: groups only). */
    Builder<T> failureHook(dev.dma.core.internal.FailureHook<T> hook) {
      this.failureHook = hook;
      return this;
    }

    /**
     * Starts the worker and blocks until its endpoint is open.
     *
     * @return the running service
     * @throws DmaException naming what failed: provider selection, spawning the worker ({@code
     *     failed to spawn fabric worker: ...}), opening the endpoint, or a worker that died first
     *     ({@code fabric worker exited before signalling readiness})
     */
    public FabricService<T> start() {
      if (completer == null) {
        throw new NullPointerException("completer");
      }
      FabricProvider chosen = providerOrSelected();
      DmaConfiguration resolved = FabricProviders.resolve(configuration, chosen);
      ChecksumPool ownedPool =
          pool == null
              ? new ChecksumPool(configuration.crcPoolThreads(), resolved.closeTimeout())
              : null;
      ChecksumPool checksumPool = pool != null ? pool : Objects.requireNonNull(ownedPool);
      // The worker's cap is known only once the endpoint is open; its configured value bounds it.
      long maxOutstanding = (long) resolved.maxPending() + resolved.maxInFlight();
      WorkerChannel channel =
          new WorkerChannel((int) Math.min(MAX_CHANNEL_CAPACITY, maxOutstanding + COMMAND_ROOM));
      AtomicLong outstanding = new AtomicLong();
      AtomicReference<byte[]> address = new AtomicReference<>(new byte[0]);
      Reply<Ready> ready = new Reply<>();
      Stepping stepped = stepping;
      Thread thread = null;
      Ready answer;
      if (stepped != null) {
        // Test-only (Stepping): the worker is built here and handed to the caller, never run.
        FabricWorker<T> opened =
            openWorker(chosen, resolved, channel, outstanding, checksumPool, address, ready);
        answer = ready.await("fabric worker exited before signalling readiness");
        stepped.workers().accept(Objects.requireNonNull(opened));
      } else {
        thread =
            new Thread(
                () ->
                    runWorker(chosen, resolved, channel, outstanding, checksumPool, address, ready),
                String.format("fabric-%02d", WORKER_NUMBERS.getAndIncrement()));
        thread.setDaemon(true);
        try {
          thread.start();
        } catch (Throwable spawnFailure) {
          closeQuietly(ownedPool);
          throw new DmaException(
              DmaException.Kind.FABRIC,
              DmaException.Reason.PROVIDER,
              "failed to spawn fabric worker: " + spawnFailure,
              0,
              0,
              spawnFailure);
        }
        try {
          answer = ready.await("fabric worker exited before signalling readiness");
        } catch (DmaException openFailure) {
          Threads.joinUninterruptibly(thread);
          closeQuietly(ownedPool);
          throw openFailure;
        }
      }
      return new FabricService<>(
          channel,
          outstanding,
          thread,
          ownedPool,
          answer,
          chosen.name(),
          configuration.interfaces().isEmpty()
              ? chosen.name()
              : configuration.interfaces().getFirst(),
          answer.tracing(),
          resolved.closeTimeout(),
          address,
          (long) resolved.maxPending() + answer.cap());
    }

    private void runWorker(
        FabricProvider chosen,
        DmaConfiguration configuration,
        WorkerChannel channel,
        AtomicLong outstanding,
        ChecksumPool checksumPool,
        AtomicReference<byte[]> currentAddress,
        Reply<Ready> ready) {
      FabricWorker<T> fabricWorker =
          openWorker(
              chosen, configuration, channel, outstanding, checksumPool, currentAddress, ready);
      if (fabricWorker != null) {
        fabricWorker.run();
      }
    }

    /**
     * Opens the endpoint and builds the worker on the calling thread, answering {@code ready}; null
     * when that failed (then {@code ready} carries the failure).
     */
    private @Nullable FabricWorker<T> openWorker(
        FabricProvider chosen,
        DmaConfiguration configuration,
        WorkerChannel channel,
        AtomicLong outstanding,
        ChecksumPool checksumPool,
        AtomicReference<byte[]> currentAddress,
        Reply<Ready> ready) {
      FabricWorker<T> fabricWorker;
      try {
        channel.bind(Thread.currentThread());
        FabricEndpoint endpoint = chosen.open(configuration);
        try {
          byte[] address = endpoint.localAddress();
          currentAddress.set(address);
          Consumer<byte[]> listener = addressListener;
          EndpointInfo info = endpoint.describe();
          LocalRegions regions =
              new LocalRegions(endpoint, RegionRegistry.global(), configuration.maxPinnedBytes());
          PeerTable peers = new PeerTable(endpoint);
          OpenTelemetry otel = openTelemetryOrGlobal();
          String device =
              configuration.interfaces().isEmpty()
                  ? info.provider()
                  : configuration.interfaces().getFirst();
          Telemetry telemetry = new Telemetry(otel, chosen.name(), device, traceWorkerPasses);
          fabricWorker =
              new FabricWorker<>(
                  endpoint,
                  regions,
                  peers,
                  channel,
                  completer,
                  checksumPool,
                  outstanding,
                  clock,
                  configuration.maxInFlight(),
                  configuration.progressDeadline(),
                  configuration.completionDeadline(),
                  changed -> {
                    currentAddress.set(changed);
                    listener.accept(changed.clone());
                  },
                  telemetry);
          dev.dma.core.internal.FailureHook<T> hook = failureHook;
          if (hook != null) {
            fabricWorker.failureHook(hook);
          }
          ready.send(new Ready(info, fabricWorker.cap(), telemetry.tracing(), endpoint::peerText));
        } catch (Throwable setupFailure) {
          endpoint.close();
          throw setupFailure;
        }
      } catch (DmaException openFailure) {
        channel.close();
        ready.fail(openFailure);
        return null;
      } catch (RuntimeException unexpected) {
        channel.close();
        ready.fail(
            new DmaException(
                DmaException.Kind.FABRIC,
                DmaException.Reason.PROVIDER,
                "opening the endpoint failed: " + unexpected,
                0,
                0,
                unexpected));
        return null;
      } finally {
        // An Error escaping above leaves the reply unanswered: wake start() all the same.
        ready.abandon();
      }
      return fabricWorker;
    }

    private static void closeQuietly(@Nullable ChecksumPool pool) {
      if (pool != null) {
        pool.close();
      }
    }
  }
}
