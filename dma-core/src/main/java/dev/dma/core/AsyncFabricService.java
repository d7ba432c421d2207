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
import java.util.Optional;
import java.util.concurrent.CompletableFuture;

/**
 * A {@link FabricService} with a {@link CompletableFuture} per transfer instead of a batch hook.
 *
 * <p>Submission happens inside {@link #transfer}: the returned future's transfer is already queued
 * and counted in {@link #outstanding()}. Futures complete on the fabric worker thread (plain
 * transfers) or a checksum-pool thread (checksummed ones), so dependent stages should be quick or
 * use an {@code *Async} variant with the caller's executor. Cancelling a future abandons it but never
 * cancels the RMA: the provider still owns the operand until the transfer completes, and the context
 * is released then. Thread-safe.
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
   * Starts a service on a chosen provider and, optionally, a shared checksum pool.
   *
   * @param <T> the caller context type
   * @param configuration the configuration
   * @param provider the provider, or {@code null} to select by the configuration's name
   * @param pool a shared checksum pool the caller closes, or {@code null} for the service's own
   * @return the running service
   * @throws DmaException as {@link FabricService#start}
   */
  public static <T extends Operands> AsyncFabricService<T> start(
      DmaConfiguration configuration, FabricProvider provider, ChecksumPool pool) {
    FabricService.Builder<Pending<T>> builder =
        FabricService.<Pending<T>>builder(configuration).completer(AsyncFabricService::deliver);
    if (provider != null) {
      builder.provider(provider);
    }
    if (pool != null) {
      builder.checksumPool(pool);
    }
    return new AsyncFabricService<>(builder.start());
  }

  private static <T extends Operands> void deliver(List<Completion<Pending<T>>> batch) {
    for (Completion<Pending<T>> completion : batch) {
      // Isolated per item: one failing dependent stage must not cost the rest of the batch.
      try {
        Pending<T> pending = completion.context();
        pending.future.complete(new Completion<>(pending.context, completion.outcome()));
      } catch (Throwable failure) {
        LOG.log(Level.ERROR, "completing a transfer's future failed", failure);
      }
    }
  }

  /**
   * Submits a transfer.
   *
   * @param request the transfer
   * @return a future of its completion; when the service refuses it, one already completed with
   *     the context and a failure of reason {@link DmaException.Reason#BACKPRESSURE} (the pending
   *     queue is full) or {@link DmaException.Reason#CLOSED} ({@code fabric worker is gone})
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
            request.wantChecksum(),
            pending,
            request.remoteBase(),
            request.remoteLength());
    switch (inner.offer(wrapped)) {
      case ACCEPTED -> {}
      case FULL ->
          pending.future.complete(
              new Completion<>(
                  request.context(),
                  Outcome.failed(
                      DmaException.fabric(
                          DmaException.Reason.BACKPRESSURE,
                          "the service's pending queue is full (max_pending); retry later"))));
      case CLOSED ->
          pending.future.complete(
              new Completion<>(
                  request.context(),
                  Outcome.failed(
                      DmaException.fabric(DmaException.Reason.CLOSED, "fabric worker is gone"))));
    }
    return pending.future;
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

  /** As {@link FabricService#close()}: every future still pending completes first. */
  @Override
  public void close() {
    inner.close();
  }

  /** The user's context wrapped with its future; operand calls pass straight through. */
  private static final class Pending<T extends Operands> implements Operands {
    final T context;
    final CompletableFuture<Completion<T>> future = new CompletableFuture<>();

    Pending(T context) {
      this.context = context;
    }

    @Override
    public MemorySegment source() {
      return context.source();
    }

    @Override
    public MemorySegment allocate(long lengthBytes) {
      return context.allocate(lengthBytes);
    }

    @Override
    public Optional<CacheableSpan> cacheableSpan() {
      return context.cacheableSpan();
    }
  }
}
