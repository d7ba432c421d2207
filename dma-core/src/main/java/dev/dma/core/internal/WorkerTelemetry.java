package dev.dma.core.internal;

import dev.dma.api.Direction;
import dev.dma.api.DmaException;
import dev.dma.api.Operands;
import dev.dma.api.TransferRequest;
import dev.dma.core.internal.peers.PeerTable;
import dev.dma.core.internal.regions.LocalRegions;
import dev.dma.core.internal.regions.Registration;
import io.opentelemetry.api.trace.Span;
import io.opentelemetry.api.trace.StatusCode;
import io.opentelemetry.context.Context;
import java.util.concurrent.TimeUnit;
import java.util.function.LongSupplier;

/**
 * What the fabric worker records about its transfers: the spans of one transfer ({@code
 * dma.region_register}, {@code dma.wire}, {@code dma.await_completion}, {@code dma.checksum}), the
 * per-transfer metrics, the counters of its cold paths (stalls, deadlines, resets), its gauges, and
 * the {@code dma.worker_pass} debug span. The instruments themselves are the service's {@link
 * Telemetry}; this class owns how the worker uses them, so {@link FabricWorker} only calls hooks.
 *
 * <p>Cost when off: the per-transfer hooks ({@link #leaseTraced}, {@link #posted}, {@link #reaped})
 * are called only behind a check of {@link #tracing}, {@link #metrics} or {@link #on}, plain final
 * booleans, so with no SDK installed a transfer pays those branches and nothing else. The cold-path
 * counters check {@link #metrics} themselves.
 *
 * <p>Threads: built with the worker; every method runs on the worker thread except {@link
 * #checksumSpan}, which runs on checksum-pool threads (the instruments are thread-safe, and an op's
 * {@link OpTrace} is only touched by the worker).
 */
final class WorkerTelemetry {
  /** Whether spans are recorded. */
  final boolean tracing;

  /** Whether metrics are recorded. */
  final boolean metrics;

  /** Whether either is, so a reaped op has something to record. */
  final boolean on;

  /** Whether a {@code dma.worker_pass} span is recorded for each pass that moved something. */
  final boolean tracePasses;

  private final Telemetry telemetry;

  /**
   * The telemetry of one op, recycled with it: the submitter's context, the op's open spans and
   * when it was posted. The worker's op extends this (not final for that reason), so the fields
   * cost no object or load of their own. Set and read on the worker thread only, and only while
   * telemetry is on (otherwise every field stays null or 0).
   */
  static class OpTrace {
    // The submitter's context, the parent of dma.wire (null unless tracing delivered one).
    Context parent;
    Span wire;
    Span await;
    // System.nanoTime() at the post, for the latency histogram (metrics only).
    long postedNs;

    /** Drops the references of a finished op, so a recycled op holds no span or context. */
    final void clearTrace() {
      parent = null;
      wire = null;
      await = null;
    }
  }

  WorkerTelemetry(Telemetry telemetry) {
    this.telemetry = telemetry;
    this.tracing = telemetry.tracing;
    this.metrics = telemetry.metrics;
    this.on = tracing || metrics;
    this.tracePasses = telemetry.tracePasses;
  }

  /**
   * Registers the worker's gauges and the registration cache's counters.
   *
   * @param inFlight reads the worker's in-flight count
   * @param pending reads the worker's pending count as of its last pass
   * @param peers the endpoint's peer table
   * @param regions the endpoint's registration cache
   */
  void registerGauges(
      LongSupplier inFlight, LongSupplier pending, PeerTable peers, LocalRegions regions) {
    // Gauges read the worker's plain fields from the collection thread: a stale value is
    // acceptable for a gauge, and int reads never tear.
    telemetry.gauge("dma.in_flight", "Operations posted and not yet reaped", "", inFlight);
    telemetry.gauge("dma.pending", "Operations queued and not yet posted", "", pending);
    telemetry.gauge("dma.peers", "Entries in the address vector", "", peers::entries);
    telemetry.observedCounter("dma.region_cache.hits", "Registration-cache hits", regions::hits);
    telemetry.observedCounter(
        "dma.region_cache.misses", "Registration-cache misses", regions::misses);
    telemetry.observedCounter(
        "dma.region_cache.evictions",
        "Registrations evicted for the pinned-bytes bound",
        regions::evictions);
    telemetry.gauge(
        "dma.region_cache.pinned_bytes",
        "Bytes pinned by local registrations",
        "By",
        regions::pinnedBytes);
  }

  /** A {@code dma.worker_pass} span; the worker emits one only when something moved. */
  void pass(int inFlight, int posted, int reaped, int pending) {
    telemetry
        .tracer
        .spanBuilder("dma.worker_pass")
        .setNoParent()
        .setAttribute("dma.in_flight", inFlight)
        .setAttribute("dma.posted", posted)
        .setAttribute("dma.reaped", reaped)
        .setAttribute("dma.pending", pending)
        .startSpan()
        .end();
  }

  /**
   * Leases with a {@code dma.region_register} span when the lease had to register (a miss). Only
   * while {@link #tracing}.
   */
  Registration leaseTraced(LocalRegions regions, long address, long lengthBytes, Operands context) {
    long missesBefore = regions.misses();
    long startNs = System.nanoTime();
    long startEpochNs = System.currentTimeMillis() * 1_000_000L;
    Registration lease = regions.lease(address, lengthBytes, context);
    if (regions.misses() != missesBefore) {
      // First-touch cost shows as a root span: registration serves every later operand inside it.
      telemetry
          .tracer
          .spanBuilder("dma.region_register")
          .setNoParent()
          .setStartTimestamp(startEpochNs, TimeUnit.NANOSECONDS)
          .setAttribute(Telemetry.LENGTH, lengthBytes)
          .startSpan()
          .end(startEpochNs + (System.nanoTime() - startNs), TimeUnit.NANOSECONDS);
    }
    return lease;
  }

  /**
   * An op was posted: stamps it for the latency histogram, and starts {@code dma.wire} (post to
   * reap) under the submitter's context with its child {@code dma.await_completion}. Only while
   * {@link #on}.
   */
  void posted(OpTrace trace, TransferRequest<?> request, long lengthBytes) {
    if (metrics) {
      trace.postedNs = System.nanoTime();
    }
    if (tracing) {
      boolean read = request.direction() instanceof Direction.FromPeer;
      Context parent = trace.parent != null ? trace.parent : Context.root();
      Span wire =
          telemetry
              .tracer
              .spanBuilder("dma.wire")
              .setParent(parent)
              .setAllAttributes(read ? telemetry.read : telemetry.write)
              .setAttribute(Telemetry.LENGTH, lengthBytes)
              .setAttribute(Telemetry.CLIENT, request.clientId())
              .startSpan();
      trace.wire = wire;
      trace.await =
          telemetry
              .tracer
              .spanBuilder("dma.await_completion")
              .setParent(parent.with(wire))
              .startSpan();
    }
  }

  /**
   * A posted op finished, reaped or failed by a reset: metrics and span ends. Only while {@link
   * #on}. The spans stay referenced by the trace (a checksummed op's {@code dma.checksum} span is
   * parented by its ended {@code dma.wire}).
   *
   * @param error its failure, or null for a success
   */
  void reaped(OpTrace trace, boolean read, long lengthBytes, DmaException error) {
    if (metrics) {
      var attributes =
          error == null
              ? (read ? telemetry.readDone : telemetry.writeDone)
              : (read ? telemetry.readFailed : telemetry.writeFailed);
      telemetry.transfers.add(1, attributes);
      if (error == null) {
        telemetry.bytes.add(lengthBytes, attributes);
      } else {
        countFailure(error);
      }
      telemetry.latency.record(
          (System.nanoTime() - trace.postedNs) * 1e-9, read ? telemetry.read : telemetry.write);
    }
    if (trace.await != null) {
      trace.await.end();
    }
    if (trace.wire != null) {
      if (error != null) {
        trace.wire.setStatus(StatusCode.ERROR, error.getMessage());
        trace.wire.setAttribute(Telemetry.FABRIC_ERRNO, error.fabricErrno());
        trace.wire.setAttribute(Telemetry.PROVIDER_ERRNO, error.providerErrno());
      }
      trace.wire.end();
    }
  }

  /** Ends the spans of an op whose post is being abandoned and retried. */
  void retried(OpTrace trace, String why) {
    if (trace.await != null) {
      trace.await.end();
      trace.await = null;
    }
    if (trace.wire != null) {
      trace.wire.setStatus(StatusCode.ERROR, why + "; posted again");
      trace.wire.end();
      trace.wire = null;
    }
  }

  /** An op failed without reaching the wire (post refused, deadline, set-up step). */
  void failedUnposted(boolean read, DmaException error) {
    if (metrics) {
      countFailure(error);
      telemetry.transfers.add(1, read ? telemetry.readFailed : telemetry.writeFailed);
    }
  }

  /** A transfer was refused at intake, before it became an op. */
  void refused(DmaException error) {
    if (metrics) {
      countFailure(error);
    }
  }

  /** The provider refused a post with {@code -FI_EAGAIN}. */
  void stalled() {
    if (metrics) {
      telemetry.stalls.add(1, telemetry.device);
    }
  }

  /** An op failed at the progress deadline. */
  void progressDeadlinePassed() {
    if (metrics) {
      telemetry.deadlineFailures.add(1, telemetry.device);
    }
  }

  /** A posted op passed the completion deadline. */
  void completionDeadlinePassed() {
    if (metrics) {
      telemetry.completionDeadlineFailures.add(1, telemetry.device);
    }
  }

  /** The worker reset its endpoint. */
  void endpointReset() {
    if (metrics) {
      telemetry.endpointResets.add(1, telemetry.device);
    }
  }

  /**
   * Starts the {@code dma.checksum} span of a checksummed op under its {@code dma.wire}, on a pool
   * thread.
   *
   * @param wire the op's wire span, or null when it was not traced
   * @return the span, or null when {@code wire} is null
   */
  Span checksumSpan(Span wire, long lengthBytes) {
    return wire == null
        ? null
        : telemetry
            .tracer
            .spanBuilder("dma.checksum")
            .setParent(Context.root().with(wire))
            .setAttribute(Telemetry.LENGTH, lengthBytes)
            .startSpan();
  }

  /** Unregisters the gauges, so a closed service stops reporting. */
  void close() {
    telemetry.close();
  }

  private void countFailure(DmaException error) {
    telemetry.errors.add(
        1,
        error.kind() == DmaException.Kind.FABRIC ? telemetry.fabricError : telemetry.transferError);
  }
}
