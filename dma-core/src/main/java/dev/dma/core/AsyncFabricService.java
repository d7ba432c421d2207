package dev.dma.core;

import dev.dma.api.BatchCompleter;
import dev.dma.api.CacheableSpan;
import dev.dma.api.Completion;
import dev.dma.api.DmaConfiguration;
import dev.dma.api.DmaException;
import dev.dma.api.MemoryKind;
import dev.dma.api.Operands;
import dev.dma.api.Outcome;
import dev.dma.api.Peer;
import dev.dma.api.TransferRequest;
import dev.dma.spi.EndpointInfo;
import dev.dma.spi.FabricProvider;
import java.lang.System.Logger.Level;
import java.lang.foreign.MemorySegment;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executor;
import java.util.concurrent.ForkJoinPool;
import java.util.concurrent.RejectedExecutionException;
import org.jspecify.annotations.Nullable;

/**
 * Futures over a {@link FabricService} or a {@link FabricServiceGroup}: a {@link CompletableFuture}
 * per transfer instead of a batch hook, with every option of the batch form.
 *
 * <h2>Starting one</h2>
 *
 * {@link #builder(DmaConfiguration)} takes the options every service takes ({@link ServiceOptions}:
 * provider, checksum pool, clock, OpenTelemetry, worker-pass tracing, {@link
 * Builder#onLocalAddressChange}), held in one place and handed whole to every service it starts,
 * and the executor futures complete on; {@link Builder#group()} (or a striping threshold) makes it
 * run over a {@link FabricServiceGroup}, one service per device, with the group's spreading and
 * striping. A striped transfer is one future, completed once every chunk has ended; its {@link
 * Completion#chunks()} says how many there were. The static {@code start} methods are shorthands
 * for one service.
 *
 * <pre>{@code
 * AsyncFabricService<Buffer> server =
 *     AsyncFabricService.<Buffer>builder(configuration)   // interfaces=lo,lo: two devices
 *         .stripeThresholdBytes(1 << 20)                   // a group, striping 1 MiB and up
 *         .onLocalAddressChange(address -> readvertise())
 *         .start();
 * server.transfer(TransferRequest.write(7, ad, buffer)).thenAccept(done -> ...);
 * }</pre>
 *
 * <h2>Futures</h2>
 *
 * Submission happens inside {@link #transfer}: the returned future's transfer is already queued and
 * counted in {@link #outstanding()}. A transfer that completes completes its future normally, with
 * a {@link Completion} whose outcome is always a {@link dev.dma.api.TransferDone}; one that fails,
 * or that the service refuses, fails its future exceptionally with the {@link DmaException} (its
 * {@link DmaException#reason()} says why), as Netty and gRPC futures do. The {@link Outcome} form,
 * failures included, stays with the batch hook. Once a future fails, the request's context is the
 * caller's again, as after a completion.
 *
 * <p>Threads: the worker (or, for checksummed transfers, a checksum-pool thread; for a striped
 * transfer, the thread that ended its last chunk) hands each result to the executor, which
 * completes the future; so dependent stages run there, never on a fabric worker, by default on
 * {@link ForkJoinPool#commonPool()}. One hop per transfer buys that; pass {@code Runnable::run} as
 * the executor to complete on the worker or pool thread instead (zero hops; then stages must be
 * quick and must not block). As with every {@link CompletableFuture}, a stage attached to a future
 * that is already complete (a refusal, or a race with the completion) runs on the thread attaching
 * it. An executor that rejects the completion makes it run inline. Cancelling a future abandons it
 * but never cancels the RMA: the provider still owns the operand until the transfer completes, and
 * the context is released then. Thread-safe.
 *
 * <p>Ownership: it owns the service or group it started and closes it in {@link #close()}; a
 * checksum pool passed to the builder stays the caller's.
 *
 * @param <T> the caller context type
 */
public final class AsyncFabricService<T extends Operands> implements AutoCloseable {
  private static final System.Logger LOG = System.getLogger(AsyncFabricService.class.getName());

  /**
   * The service or group the futures run over. One interface, two implementations: the call per
   * transfer stays bimorphic.
   */
  private final DmaService<Pending<T>> inner;

  private AsyncFabricService(DmaService<Pending<T>> inner) {
    this.inner = inner;
  }

  /**
   * Futures over any {@link DmaService}, for a test that records what reaches the service: the
   * requests it is offered carry the futures' own contexts, which only this class reads.
   */
  @SuppressWarnings("unchecked")
  static <T extends Operands> AsyncFabricService<T> over(DmaService<? extends Operands> service) {
    return new AsyncFabricService<>((DmaService<Pending<T>>) service);
  }

  /**
   * A builder for futures over one service or, with {@link Builder#group()}, a group.
   *
   * @param <T> the caller context type
   * @param configuration the configuration
   * @return the builder
   */
  public static <T extends Operands> Builder<T> builder(DmaConfiguration configuration) {
    return new Builder<>(configuration);
  }

  /**
   * Starts a service on the provider the configuration names.
   *
   * @param <T> the caller context type
   * @param configuration the configuration
   * @return the running service
   * @throws DmaException as {@link FabricService#start}
   */
  public static <T extends Operands> AsyncFabricService<T> start(DmaConfiguration configuration) {
    return AsyncFabricService.<T>builder(configuration).start();
  }

  /**
   * Starts a service on a chosen provider and, optionally, a shared checksum pool, completing
   * futures on {@link ForkJoinPool#commonPool()}.
   *
   * @param <T> the caller context type
   * @param configuration the configuration
   * @param provider the provider, or {@code null} to select by the configuration's name
   * @param pool a shared checksum pool the caller closes, or {@code null} for the service's own
   * @return the running service
   * @throws DmaException as {@link FabricService#start}
   */
  public static <T extends Operands> AsyncFabricService<T> start(
      DmaConfiguration configuration,
      @Nullable FabricProvider provider,
      @Nullable ChecksumPool pool) {
    return start(configuration, provider, pool, ForkJoinPool.commonPool());
  }

  /**
   * Starts a service whose futures complete on {@code executor}, so their dependent stages run
   * there.
   *
   * @param <T> the caller context type
   * @param configuration the configuration
   * @param provider the provider, or {@code null} to select by the configuration's name
   * @param pool a shared checksum pool the caller closes, or {@code null} for the service's own
   * @param executor where futures complete; {@code Runnable::run} completes them inline on the
   *     fabric worker or checksum-pool thread (no hop; stages must then be quick and not block)
   * @return the running service
   * @throws DmaException as {@link FabricService#start}
   */
  public static <T extends Operands> AsyncFabricService<T> start(
      DmaConfiguration configuration,
      @Nullable FabricProvider provider,
      @Nullable ChecksumPool pool,
      Executor executor) {
    Builder<T> builder = AsyncFabricService.<T>builder(configuration).executor(executor);
    if (provider != null) {
      builder.provider(provider);
    }
    if (pool != null) {
      builder.checksumPool(pool);
    }
    return builder.start();
  }

  private static <T extends Operands> void deliver(
      List<Completion<Pending<T>>> batch, Executor executor) {
    for (Completion<Pending<T>> completion : batch) {
      // Isolated per item: one failing hand-off must not cost the rest of the batch.
      Pending<T> pending = completion.context();
      try {
        pending.outcome = completion.outcome();
        pending.posts = completion.posts();
        pending.chunks = completion.chunks();
        pending.devices = completion.devices();
        try {
          executor.execute(pending);
        } catch (RejectedExecutionException rejected) {
          pending.run();
        }
      } catch (Throwable failure) {
        LOG.log(Level.ERROR, "completing a transfer's future failed", failure);
      }
    }
  }

  /**
   * Submits a transfer.
   *
   * @param request the transfer
   * @return a future of its completion, failing with the transfer's {@link DmaException}; when the
   *     service refuses it, one already failed with reason {@link DmaException.Reason#BACKPRESSURE}
   *     (the pending queue is full, on every device of a group; the request stays the caller's) or
   *     {@link DmaException.Reason#CLOSED} ({@code the service is closed} after close)
   */
  public CompletableFuture<Completion<T>> transfer(TransferRequest<T> request) {
    Pending<T> pending = new Pending<>(request.context());
    TransferRequest<Pending<T>> wrapped =
        new TransferRequest<>(
            request.clientId(),
            request.peerAddress(),
            request.remoteKey(),
            request.remoteAddress(),
            request.direction(),
            request.checksum(),
            pending,
            request.remoteBase(),
            request.remoteLength(),
            request.retryWrite(),
            request.peer());
    return switch (inner.offer(wrapped)) {
      case ACCEPTED -> pending.future;
      case FULL ->
          CompletableFuture.failedFuture(
              DmaException.fabric(
                  DmaException.Reason.BACKPRESSURE,
                  "the service's pending queue is full (max_pending); retry later"));
      case CLOSED ->
          CompletableFuture.failedFuture(
              DmaException.fabric(DmaException.Reason.CLOSED, closedMessage(inner)));
    };
  }

  /**
   * As {@link FabricService#register(MemorySegment)}; over a group, on every device.
   *
   * @param segment native memory
   * @return the region
   */
  public MemoryRegion register(MemorySegment segment) {
    return inner.register(segment);
  }

  /**
   * As {@link FabricService#addPeer(long, byte[])}; over a group, on every device.
   *
   * @param clientId the client
   * @param address its fabric address
   * @return the client's peer, for its requests
   */
  public Peer addPeer(long clientId, byte[] address) {
    return inner.addPeer(clientId, address);
  }

  /**
   * As {@link FabricService#removePeer(long)}; over a group, on every device.
   *
   * @param clientId the client
   */
  public void removePeer(long clientId) {
    inner.removePeer(clientId);
  }

  /**
   * The first device's address ({@link FabricService#localAddress()}); the only one over a single
   * service. Over a group, clients that insert the server's address (efa-direct) need {@link
   * #localAddresses()}.
   *
   * @return the endpoint's address
   */
  public byte[] localAddress() {
    return inner.localAddresses().getFirst();
  }

  /**
   * Every device's address, in device order: one over a single service; over a group, as {@link
   * FabricServiceGroup#localAddresses()}.
   *
   * @return fresh copies
   */
  public List<byte[]> localAddresses() {
    return inner.localAddresses();
  }

  /**
   * The devices transfers run on, in the order of {@link #localAddresses()}: over a group, as
   * {@link FabricServiceGroup#devices()} (a name may repeat); over a single service, the one it
   * pinned ({@code interfaces[0]}), or its provider's name when none was configured.
   *
   * @return the names
   */
  public List<String> devices() {
    return inner.devices();
  }

  /**
   * Transfers submitted and not completed (over a group, summed over the devices).
   *
   * @return the count
   */
  public long outstanding() {
    return inner.outstanding();
  }

  /**
   * As {@link FabricService#endpointInfo()}; over a group, the first device's.
   *
   * @return the endpoint's description
   */
  public EndpointInfo endpointInfo() {
    return inner.endpointInfo();
  }

  /**
   * As {@link FabricService#close()} (over a group, for every device): every future still pending
   * is handed to the executor first (completed or failed), though the executor may complete it
   * after this returns.
   */
  @Override
  public void close() {
    inner.close();
  }

  @Override
  public String toString() {
    return "AsyncFabricService" + inner.devices();
  }

  /**
   * Why an offer answered CLOSED: the service (or a device's) was closed, or its worker failed by
   * itself. Cold: asked only for a refusal.
   */
  private static String closedMessage(DmaService<?> service) {
    return switch (service) {
      case FabricService<?> one -> one.closedMessage();
      case FabricServiceGroup<?> group -> group.closedMessage();
      default -> FabricService.SERVICE_CLOSED;
    };
  }

  /**
   * Builds and starts an {@link AsyncFabricService}: over one {@link FabricService} by default,
   * over a {@link FabricServiceGroup} after {@link #group()}. Every option reaches every service
   * started. Not thread-safe.
   *
   * @param <T> the caller context type
   */
  public static final class Builder<T extends Operands> extends GroupOptions<Builder<T>> {
    private Executor executor = ForkJoinPool.commonPool();
    private boolean group;

    private Builder(DmaConfiguration configuration) {
      super(configuration);
    }

    /**
     * Sets where futures complete, so where their dependent stages run; by default {@link
     * ForkJoinPool#commonPool()}. {@code Runnable::run} completes them inline on the fabric worker
     * or checksum-pool thread (no hop; stages must then be quick and not block).
     *
     * @param value the executor
     * @return this builder
     */
    public Builder<T> executor(Executor value) {
      this.executor = Objects.requireNonNull(value, "executor");
      return this;
    }

    /**
     * Runs over a {@link FabricServiceGroup}: one service per device of {@code interfaces} (a name
     * may repeat), or of every domain the provider lists, with transfers spread over them.
     *
     * @return this builder
     */
    public Builder<T> group() {
      this.group = true;
      return this;
    }

    /**
     * Starts the service, or every service of the group, and blocks until their endpoints are open.
     *
     * @return the running service
     * @throws DmaException as {@link FabricService.Builder#start()} or {@link
     *     FabricServiceGroup.Builder#start()}
     */
    public AsyncFabricService<T> start() {
      Executor completing = executor;
      BatchCompleter<Pending<T>> completer = batch -> deliver(batch, completing);
      // Every option set here reaches every service started, through the one options holder.
      DmaService<Pending<T>> inner =
          group || stripingSet
              ? copyGroupTo(FabricServiceGroup.<Pending<T>>builder(configuration))
                  .completer(completer)
                  .start()
              : copyTo(FabricService.<Pending<T>>builder(configuration))
                  .completer(completer)
                  .start();
      return new AsyncFabricService<>(inner);
    }
  }

  /**
   * The user's context wrapped with its future; operand calls pass straight through. Run by the
   * executor once {@link #outcome} is set, it completes the future.
   */
  private static final class Pending<T extends Operands> implements Operands, Runnable {
    final T context;
    final CompletableFuture<Completion<T>> future = new CompletableFuture<>();

    /** Set by the fabric worker or checksum pool before {@link #run} is handed to the executor. */
    @Nullable Outcome outcome;

    /** The completion's post count, set with {@link #outcome}. */
    int posts;

    /** The completion's chunk count, set with {@link #outcome}. */
    int chunks = 1;

    /** The completion's device count, set with {@link #outcome}. */
    int devices = 1;

    Pending(T context) {
      this.context = context;
    }

    @Override
    public void run() {
      Outcome ended = Objects.requireNonNull(outcome, "run before the outcome was set");
      if (ended instanceof Outcome.Failed(DmaException error)) {
        future.completeExceptionally(error);
      } else {
        future.complete(new Completion<>(context, ended, posts, chunks, devices));
      }
    }

    @Override
    public @Nullable MemorySegment source() {
      return context.source();
    }

    @Override
    public @Nullable MemorySegment allocate(long lengthBytes) {
      return context.allocate(lengthBytes);
    }

    @Override
    public @Nullable CacheableSpan cacheableSpan() {
      return context.cacheableSpan();
    }

    @Override
    public MemoryKind memoryKind() {
      return context.memoryKind();
    }
  }
}
