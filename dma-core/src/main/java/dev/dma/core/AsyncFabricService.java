package dev.dma.core;

import dev.dma.api.CacheableSpan;
import dev.dma.api.Completion;
import dev.dma.api.DmaConfiguration;
import dev.dma.api.DmaException;
import dev.dma.api.Operands;
import dev.dma.api.Outcome;
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
 * A {@link FabricService} with a {@link CompletableFuture} per transfer instead of a batch hook.
 *
 * <p>Submission happens inside {@link #transfer}: the returned future's transfer is already queued
 * and counted in {@link #outstanding()}. A transfer that completes completes its future normally,
 * with a {@link Completion} whose outcome is always a {@link dev.dma.api.TransferDone}; one that
 * fails, or that the service refuses, fails its future exceptionally with the {@link DmaException}
 * (its {@link DmaException#reason()} says why), as Netty and gRPC futures do. The {@link Outcome}
 * form, failures included, stays with {@link FabricService}'s batch hook. Once a future fails, the
 * request's context is the caller's again, as after a completion.
 *
 * <p>Threads: the worker (or, for checksummed transfers, a checksum-pool thread) hands each result
 * to the service's executor, which completes the future; so dependent stages run there, never on
 * the fabric worker, by default on {@link ForkJoinPool#commonPool()}. One hop per transfer buys
 * that; pass {@code Runnable::run} as the executor to complete on the worker or pool thread instead
 * (zero hops; then stages must be quick and must not block). As with every {@link
 * CompletableFuture}, a stage attached to a future that is already complete (a refusal, or a race
 * with the completion) runs on the thread attaching it. An executor that rejects the completion
 * makes it run inline. Cancelling a future abandons it but never cancels the RMA: the provider
 * still owns the operand until the transfer completes, and the context is released then.
 * Thread-safe.
 *
 * @param <T> the caller context type
 */
public final class AsyncFabricService<T extends Operands> implements AutoCloseable {
  private static final System.Logger LOG = System.getLogger(AsyncFabricService.class.getName());

  private final FabricService<Pending<T>> inner;

  private AsyncFabricService(FabricService<Pending<T>> inner) {
    this.inner = inner;
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
    return start(configuration, null, null);
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
    Objects.requireNonNull(executor, "executor");
    FabricService.Builder<Pending<T>> builder =
        FabricService.<Pending<T>>builder(configuration)
            .completer(batch -> deliver(batch, executor));
    if (provider != null) {
      builder.provider(provider);
    }
    if (pool != null) {
      builder.checksumPool(pool);
    }
    return new AsyncFabricService<>(builder.start());
  }

  private static <T extends Operands> void deliver(
      List<Completion<Pending<T>>> batch, Executor executor) {
    for (Completion<Pending<T>> completion : batch) {
      // Isolated per item: one failing hand-off must not cost the rest of the batch.
      Pending<T> pending = completion.context();
      try {
        pending.outcome = completion.outcome();
        pending.posts = completion.posts();
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
   *     (the pending queue is full; the request stays the caller's) or {@link
   *     DmaException.Reason#CLOSED} ({@code the service is closed} after close)
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
            request.retryWrite());
    return switch (inner.offer(wrapped)) {
      case ACCEPTED -> pending.future;
      case FULL ->
          CompletableFuture.failedFuture(
              DmaException.fabric(
                  DmaException.Reason.BACKPRESSURE,
                  "the service's pending queue is full (max_pending); retry later"));
      case CLOSED ->
          CompletableFuture.failedFuture(
              DmaException.fabric(DmaException.Reason.CLOSED, inner.closedMessage()));
    };
  }

  /**
   * As {@link FabricService#register(MemorySegment)}.
   *
   * @param segment native memory
   * @return the region
   */
  public MemoryRegion register(MemorySegment segment) {
    return inner.register(segment);
  }

  /**
   * As {@link FabricService#addPeer(long, byte[])}.
   *
   * @param clientId the client
   * @param address its fabric address
   */
  public void addPeer(long clientId, byte[] address) {
    inner.addPeer(clientId, address);
  }

  /**
   * As {@link FabricService#removePeer(long)}.
   *
   * @param clientId the client
   */
  public void removePeer(long clientId) {
    inner.removePeer(clientId);
  }

  /**
   * As {@link FabricService#localAddress()}.
   *
   * @return the endpoint's address
   */
  public byte[] localAddress() {
    return inner.localAddress();
  }

  /**
   * As {@link FabricService#outstanding()}.
   *
   * @return transfers submitted and not completed
   */
  public long outstanding() {
    return inner.outstanding();
  }

  /**
   * As {@link FabricService#endpointInfo()}.
   *
   * @return the endpoint's description
   */
  public EndpointInfo endpointInfo() {
    return inner.endpointInfo();
  }

  /**
   * As {@link FabricService#close()}: every future still pending is handed to the executor first
   * (completed or failed), though the executor may complete it after this returns.
   */
  @Override
  public void close() {
    inner.close();
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

    Pending(T context) {
      this.context = context;
    }

    @Override
    public void run() {
      Outcome ended = Objects.requireNonNull(outcome, "run before the outcome was set");
      if (ended instanceof Outcome.Failed(DmaException error)) {
        future.completeExceptionally(error);
      } else {
        future.complete(new Completion<>(context, ended, posts));
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
  }
}
