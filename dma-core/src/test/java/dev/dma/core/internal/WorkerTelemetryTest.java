package dev.dma.core.internal;

import static dev.dma.core.internal.RecordingOpenTelemetry.DEVICE_ATTRIBUTES;
import static dev.dma.core.internal.RecordingOpenTelemetry.histogramPoints;
import static dev.dma.core.internal.RecordingOpenTelemetry.longPoints;
import static dev.dma.core.internal.RecordingOpenTelemetry.value;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dma.api.Advertisement;
import dev.dma.api.CacheableSpan;
import dev.dma.api.DmaException;
import dev.dma.api.Operands;
import dev.dma.api.TransferRequest;
import dev.dma.core.internal.peers.PeerTable;
import dev.dma.core.internal.regions.LocalRegions;
import dev.dma.core.internal.regions.RecordingEndpoint;
import dev.dma.core.internal.regions.RegionRegistry;
import dev.dma.core.internal.regions.Registration;
import io.opentelemetry.api.common.AttributeKey;
import io.opentelemetry.api.common.Attributes;
import io.opentelemetry.api.trace.Span;
import io.opentelemetry.api.trace.StatusCode;
import io.opentelemetry.context.Context;
import io.opentelemetry.sdk.metrics.data.HistogramPointData;
import io.opentelemetry.sdk.metrics.data.MetricData;
import io.opentelemetry.sdk.trace.data.SpanData;
import java.util.Collection;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * What the worker's telemetry hooks record, read back from the OpenTelemetry SDK: each span's name,
 * parent, attributes and status, each counter's value under its exact attribute set, the latency
 * histogram, the gauges read at collection, and that a half which is off records nothing. Narrow
 * unit tests of {@link WorkerTelemetry} on its own, with no worker; dma-it's {@code TelemetryTest}
 * checks the same names end to end through a service.
 */
@Timeout(value = 10, unit = TimeUnit.SECONDS)
class WorkerTelemetryTest {
  private static final Advertisement AD = new Advertisement(new byte[] {1, 2, 3}, 9, 4096, 1 << 16);
  private static final AttributeKey<String> DIRECTION = AttributeKey.stringKey("dma.direction");
  private static final AttributeKey<String> OUTCOME = AttributeKey.stringKey("dma.outcome");
  private static final AttributeKey<String> KIND = AttributeKey.stringKey("dma.error.kind");
  private static final AttributeKey<Long> LENGTH = AttributeKey.longKey("dma.length");
  private static final AttributeKey<Long> CLIENT = AttributeKey.longKey("dma.client_id");
  private static final AttributeKey<Long> FABRIC_ERRNO = AttributeKey.longKey("dma.fabric_errno");
  private static final AttributeKey<Long> PROVIDER_ERRNO =
      AttributeKey.longKey("dma.provider_errno");

  private static final Attributes WRITE = direction("write");
  private static final Attributes READ = direction("read");
  private static final Attributes WRITE_DONE = outcome("write", "done");
  private static final Attributes WRITE_FAILED = outcome("write", "failed");
  private static final Attributes READ_DONE = outcome("read", "done");
  private static final Attributes READ_FAILED = outcome("read", "failed");
  private static final Attributes FABRIC = kind("fabric");
  private static final Attributes TRANSFER = kind("transfer");

  /** A 64 KiB-aligned fake address: the recording endpoint never touches the memory. */
  private static final long BASE = 0x7f00_0001_0000L;

  private RecordingOpenTelemetry sdk;

  @AfterEach
  void closeSdk() {
    if (sdk != null) {
      sdk.close();
    }
  }

  private WorkerTelemetry telemetry(boolean tracing, boolean metrics) {
    sdk = new RecordingOpenTelemetry(tracing, metrics);
    return new WorkerTelemetry(sdk.telemetry(false));
  }

  private static Attributes direction(String direction) {
    return DEVICE_ATTRIBUTES.toBuilder().put(DIRECTION, direction).build();
  }

  private static Attributes outcome(String direction, String outcome) {
    return direction(direction).toBuilder().put(OUTCOME, outcome).build();
  }

  private static Attributes kind(String kind) {
    return DEVICE_ATTRIBUTES.toBuilder().put(KIND, kind).build();
  }

  /** Span attributes are a map of their own: compare the entries. */
  private static void assertAttributes(Attributes expected, SpanData span) {
    assertEquals(expected.asMap(), span.getAttributes().asMap(), span.getName());
  }

  private static TransferRequest<Operands> write(long clientId) {
    return TransferRequest.write(clientId, AD, new Operands() {});
  }

  private static TransferRequest<Operands> read(long clientId, long lengthBytes) {
    return TransferRequest.read(clientId, AD, lengthBytes, new Operands() {});
  }

  @Test
  void eachHalfIsOnOnlyWhenItsProviderIsInstalled() {
    WorkerTelemetry off = new WorkerTelemetry(Telemetry.OFF);
    assertFalse(off.tracing);
    assertFalse(off.metrics);
    assertFalse(off.on, "nothing to record when neither half is installed");
    assertFalse(off.tracePasses);

    WorkerTelemetry tracingOnly = telemetry(true, false);
    assertTrue(tracingOnly.tracing);
    assertFalse(tracingOnly.metrics);
    assertTrue(tracingOnly.on, "spans alone are something to record");
    sdk.close();

    WorkerTelemetry metricsOnly = telemetry(false, true);
    assertFalse(metricsOnly.tracing);
    assertTrue(metricsOnly.metrics);
    assertTrue(metricsOnly.on, "metrics alone are something to record");
    sdk.close();

    sdk = new RecordingOpenTelemetry(true, true);
    assertTrue(new WorkerTelemetry(sdk.telemetry(true)).tracePasses);
    assertFalse(new WorkerTelemetry(sdk.telemetry(false)).tracePasses);
  }

  /**
   * A write posted under the submitter's context: dma.wire is that context's child with the
   * transfer's attributes, dma.await_completion the wire's child; both end at the reap, with no
   * error, and the write counts once as done with its bytes.
   */
  @Test
  void aReapedWriteEndsItsWireAndAwaitSpansUnderTheSubmittersContext() {
    WorkerTelemetry telemetry = telemetry(true, true);
    Span request = sdk.getTracer("test").spanBuilder("dma.get").startSpan();
    WorkerTelemetry.OpTrace trace = new WorkerTelemetry.OpTrace();
    trace.parent = Context.root().with(request);

    long before = System.nanoTime();
    telemetry.posted(trace, write(42), 1000);
    long after = System.nanoTime();

    assertTrue(
        trace.postedNs >= before && trace.postedNs <= after,
        "stamped at the post for the latency: " + trace.postedNs);
    assertNotNull(trace.wire);
    assertNotNull(trace.await);
    assertEquals(List.of(), sdk.spans(), "nothing ends before the reap");

    telemetry.reaped(trace, false, 1000, null);
    request.end();

    SpanData wire = sdk.span("dma.wire");
    SpanData await = sdk.span("dma.await_completion");
    SpanData get = sdk.span("dma.get");
    assertEquals(get.getSpanId(), wire.getParentSpanId());
    assertEquals(get.getTraceId(), wire.getTraceId());
    assertEquals(wire.getSpanId(), await.getParentSpanId());
    assertAttributes(WRITE.toBuilder().put(LENGTH, 1000L).put(CLIENT, 42L).build(), wire);
    assertEquals(StatusCode.UNSET, wire.getStatus().getStatusCode());
    assertAttributes(Attributes.empty(), await);

    Collection<MetricData> all = sdk.metrics();
    assertEquals(1, value(all, "dma.transfers", WRITE_DONE));
    assertEquals(0, value(all, "dma.transfers", WRITE_FAILED));
    assertEquals(1000, value(all, "dma.bytes", WRITE_DONE));
    assertEquals(List.of(), longPoints(all, "dma.errors"), "a success is no error");
    List<HistogramPointData> latency = histogramPoints(all, "dma.transfer.duration");
    assertEquals(1, latency.size());
    assertEquals(WRITE, latency.getFirst().getAttributes());
    assertEquals(1, latency.getFirst().getCount());
  }

  /** With no submitter context the wire is a root span, and a read says so in its direction. */
  @Test
  void aReadWithNoSubmitterContextIsARootWireMarkedRead() {
    WorkerTelemetry telemetry = telemetry(true, true);
    WorkerTelemetry.OpTrace trace = new WorkerTelemetry.OpTrace();
    telemetry.posted(trace, read(7, 50), 50);
    telemetry.reaped(trace, true, 50, null);

    SpanData wire = sdk.span("dma.wire");
    assertFalse(wire.getParentSpanContext().isValid(), "dma.wire is a root span");
    assertAttributes(READ.toBuilder().put(LENGTH, 50L).put(CLIENT, 7L).build(), wire);
    assertEquals(wire.getSpanId(), sdk.span("dma.await_completion").getParentSpanId());

    Collection<MetricData> all = sdk.metrics();
    assertEquals(1, value(all, "dma.transfers", READ_DONE));
    assertEquals(0, value(all, "dma.transfers", WRITE_DONE));
    assertEquals(50, value(all, "dma.bytes", READ_DONE));
  }

  /**
   * A failed transfer ends its wire with the error's message and both error numbers, counts as a
   * failed transfer of its direction with no bytes, and as an error of its kind.
   */
  @Test
  void aFailedTransferEndsItsWireWithTheErrorAndCountsItsKind() {
    WorkerTelemetry telemetry = telemetry(true, true);
    WorkerTelemetry.OpTrace write = new WorkerTelemetry.OpTrace();
    telemetry.posted(write, write(1), 100);
    telemetry.reaped(
        write,
        false,
        100,
        new DmaException(DmaException.Kind.TRANSFER, "canceled", 125, 107, null));
    WorkerTelemetry.OpTrace another = new WorkerTelemetry.OpTrace();
    telemetry.posted(another, write(2), 100);
    telemetry.reaped(another, false, 100, DmaException.transfer("truncated"));
    WorkerTelemetry.OpTrace read = new WorkerTelemetry.OpTrace();
    telemetry.posted(read, read(1, 200), 200);
    telemetry.reaped(
        read, true, 200, new DmaException(DmaException.Kind.FABRIC, "I/O error", 5, -5, null));

    List<SpanData> wires = sdk.spans("dma.wire");
    assertEquals(3, wires.size());
    SpanData failedWrite = wires.get(0);
    assertEquals(StatusCode.ERROR, failedWrite.getStatus().getStatusCode());
    assertEquals("canceled", failedWrite.getStatus().getDescription());
    assertEquals(125L, failedWrite.getAttributes().get(FABRIC_ERRNO));
    assertEquals(107L, failedWrite.getAttributes().get(PROVIDER_ERRNO));
    assertEquals("write", failedWrite.getAttributes().get(DIRECTION));
    SpanData failedRead = wires.get(2);
    assertEquals("I/O error", failedRead.getStatus().getDescription());
    assertEquals(5L, failedRead.getAttributes().get(FABRIC_ERRNO));
    assertEquals(-5L, failedRead.getAttributes().get(PROVIDER_ERRNO));
    assertEquals(3, sdk.spans("dma.await_completion").size(), "each await ended too");

    Collection<MetricData> all = sdk.metrics();
    assertEquals(2, value(all, "dma.transfers", WRITE_FAILED));
    assertEquals(1, value(all, "dma.transfers", READ_FAILED));
    assertEquals(0, value(all, "dma.transfers", WRITE_DONE));
    assertEquals(0, value(all, "dma.transfers", READ_DONE));
    assertEquals(List.of(), longPoints(all, "dma.bytes"), "a failure moved no bytes");
    assertEquals(2, value(all, "dma.errors", TRANSFER));
    assertEquals(1, value(all, "dma.errors", FABRIC));
    long latencies =
        histogramPoints(all, "dma.transfer.duration").stream()
            .mapToLong(HistogramPointData::getCount)
            .sum();
    assertEquals(3, latencies, "a failure's latency is recorded too");
  }

  /**
   * With metrics alone: the post stamps the op and opens no span, and the reap records the time
   * since that stamp in seconds, under the op's direction (and throws nothing for the spans it
   * never had).
   */
  @Test
  void theLatencyIsTheTimeSinceThePostInSecondsUnderItsDirection() {
    WorkerTelemetry telemetry = telemetry(false, true);
    WorkerTelemetry.OpTrace trace = new WorkerTelemetry.OpTrace();
    telemetry.posted(trace, read(1, 64), 64);
    assertNull(trace.wire, "no span without a tracer");
    assertNull(trace.await);
    // As if posted two seconds ago, so the recorded value is known to within the test's run time.
    trace.postedNs = System.nanoTime() - 2_000_000_000L;
    telemetry.reaped(trace, true, 64, null);

    Collection<MetricData> all = sdk.metrics();
    List<HistogramPointData> latency = histogramPoints(all, "dma.transfer.duration");
    assertEquals(1, latency.size());
    HistogramPointData point = latency.getFirst();
    assertEquals(READ, point.getAttributes());
    assertEquals(1, point.getCount());
    assertTrue(point.getSum() >= 2.0 && point.getSum() < 9.0, point.getSum() + " s");
    assertEquals(1, value(all, "dma.transfers", READ_DONE));
    assertEquals(64, value(all, "dma.bytes", READ_DONE));
  }

  /** With spans alone a reap ends them and records no metric. */
  @Test
  void withSpansAloneTheReapEndsThemAndRecordsNoMetric() {
    WorkerTelemetry telemetry = telemetry(true, false);
    WorkerTelemetry.OpTrace trace = new WorkerTelemetry.OpTrace();
    telemetry.posted(trace, write(3), 8);
    assertEquals(0, trace.postedNs, "no stamp without metrics");
    telemetry.reaped(trace, false, 8, DmaException.transfer("refused"));
    assertEquals(StatusCode.ERROR, sdk.span("dma.wire").getStatus().getStatusCode());
    assertEquals(1, sdk.spans("dma.await_completion").size());
  }

  /**
   * An abandoned post ends both spans, the wire as an error saying it is posted again, and leaves
   * the trace empty, so the next post opens new spans and a second abandon has nothing to end.
   */
  @Test
  void aRetriedPostEndsBothSpansAndTheNextPostOpensNewOnes() {
    WorkerTelemetry telemetry = telemetry(true, false);
    WorkerTelemetry.OpTrace trace = new WorkerTelemetry.OpTrace();
    telemetry.posted(trace, write(1), 16);
    Span firstWire = trace.wire;
    telemetry.retried(trace, "endpoint reset");
    assertNull(trace.wire);
    assertNull(trace.await);
    SpanData abandoned = sdk.span("dma.wire");
    assertEquals(firstWire.getSpanContext().getSpanId(), abandoned.getSpanId());
    assertEquals(StatusCode.ERROR, abandoned.getStatus().getStatusCode());
    assertEquals("endpoint reset; posted again", abandoned.getStatus().getDescription());
    assertEquals(1, sdk.spans("dma.await_completion").size());

    telemetry.retried(trace, "again");
    assertEquals(2, sdk.spans().size(), "nothing more to end");

    telemetry.posted(trace, write(1), 16);
    telemetry.reaped(trace, false, 16, null);
    List<SpanData> wires = sdk.spans("dma.wire");
    assertEquals(2, wires.size());
    assertEquals(StatusCode.UNSET, wires.get(1).getStatus().getStatusCode());
    assertEquals(2, sdk.spans("dma.await_completion").size());
  }

  /** Each cold-path counter counts its own events under the device's attributes. */
  @Test
  void theColdPathCountersCountEachEventUnderTheDevice() {
    WorkerTelemetry telemetry = telemetry(false, true);
    for (int i = 0; i < 3; i++) {
      telemetry.stalled();
    }
    for (int i = 0; i < 2; i++) {
      telemetry.progressDeadlinePassed();
    }
    telemetry.completionDeadlinePassed();
    for (int i = 0; i < 4; i++) {
      telemetry.endpointReset();
    }

    Collection<MetricData> all = sdk.metrics();
    assertEquals(3, value(all, "dma.eagain_stalls", DEVICE_ATTRIBUTES));
    assertEquals(2, value(all, "dma.progress_deadline_failures", DEVICE_ATTRIBUTES));
    assertEquals(1, value(all, "dma.completion_deadline_failures", DEVICE_ATTRIBUTES));
    assertEquals(4, value(all, "dma.endpoint_resets", DEVICE_ATTRIBUTES));
    assertEquals(List.of(), longPoints(all, "dma.transfers"));
    assertEquals(List.of(), longPoints(all, "dma.errors"));
  }

  /**
   * An op that failed before the wire counts as a failed transfer of its direction and an error of
   * its kind; a request refused at intake only as an error.
   */
  @Test
  void failuresOffTheWireCountByDirectionAndKind() {
    WorkerTelemetry telemetry = telemetry(false, true);
    telemetry.failedUnposted(true, DmaException.transfer("bad request"));
    telemetry.failedUnposted(false, DmaException.fabric("no route"));
    telemetry.failedUnposted(false, DmaException.fabric("no route"));
    telemetry.refused(DmaException.transfer("closed"));
    telemetry.refused(DmaException.fabric("no device"));

    Collection<MetricData> all = sdk.metrics();
    assertEquals(1, value(all, "dma.transfers", READ_FAILED));
    assertEquals(2, value(all, "dma.transfers", WRITE_FAILED));
    assertEquals(2, value(all, "dma.errors", TRANSFER));
    assertEquals(3, value(all, "dma.errors", FABRIC));
    assertEquals(List.of(), longPoints(all, "dma.bytes"));
    assertEquals(List.of(), histogramPoints(all, "dma.transfer.duration"), "never posted");
  }

  @Test
  void aWorkerPassIsARootSpanWithItsCounts() {
    WorkerTelemetry telemetry = telemetry(true, false);
    telemetry.pass(5, 2, 3, 1);
    SpanData pass = sdk.span("dma.worker_pass");
    assertFalse(pass.getParentSpanContext().isValid());
    assertAttributes(
        Attributes.builder()
            .put("dma.in_flight", 5L)
            .put("dma.posted", 2L)
            .put("dma.reaped", 3L)
            .put("dma.pending", 1L)
            .build(),
        pass);
  }

  /**
   * A lease that registers records a root dma.region_register span timed around the registration,
   * in wall-clock time; a lease that hits the cache records none. Both return the lease.
   */
  @Test
  void aRegistrationMissIsARootSpanAndAHitIsNone() {
    WorkerTelemetry telemetry = telemetry(true, false);
    RecordingEndpoint endpoint = new RecordingEndpoint();
    LocalRegions regions =
        LocalRegions.withExactBound(endpoint, new RegionRegistry(), Long.MAX_VALUE);
    Operands spanned =
        new Operands() {
          @Override
          public CacheableSpan cacheableSpan() {
            return new CacheableSpan(BASE, BASE + 65536);
          }
        };
    try {
      long beforeMs = System.currentTimeMillis();
      long beforeNs = System.nanoTime();
      Registration miss = telemetry.leaseTraced(regions, BASE, 4096, spanned);
      long elapsedNs = System.nanoTime() - beforeNs;
      long afterMs = System.currentTimeMillis();
      assertNotNull(miss);
      assertEquals(1, endpoint.registerCalls());

      SpanData register = sdk.span("dma.region_register");
      assertFalse(register.getParentSpanContext().isValid(), "a root span");
      assertAttributes(Attributes.of(LENGTH, 4096L), register);
      long start = register.getStartEpochNanos();
      assertTrue(
          start >= beforeMs * 1_000_000L && start <= afterMs * 1_000_000L,
          "starts at the wall-clock time of the lease: " + start);
      long took = register.getEndEpochNanos() - start;
      assertTrue(took >= 0 && took <= elapsedNs, took + " ns of " + elapsedNs);

      Registration hit = telemetry.leaseTraced(regions, BASE + 8192, 4096, spanned);
      assertSame(miss, hit, "the span's registration serves the next operand inside it");
      assertEquals(1, sdk.spans().size(), "a hit records no span");
      hit.release();
      miss.release();
    } finally {
      regions.close();
    }
  }

  /** The checksum span is a child of the op's wire with the checksummed length; untraced, none. */
  @Test
  void theChecksumSpanIsAChildOfTheWireAndNoneWithoutOne() {
    WorkerTelemetry telemetry = telemetry(true, false);
    Span wire = sdk.getTracer("test").spanBuilder("dma.wire").startSpan();
    Span checksum = telemetry.checksumSpan(wire, 512);
    assertNotNull(checksum);
    checksum.end();
    wire.end();
    SpanData ended = sdk.span("dma.checksum");
    assertEquals(wire.getSpanContext().getSpanId(), ended.getParentSpanId());
    assertAttributes(Attributes.of(LENGTH, 512L), ended);
    assertNull(telemetry.checksumSpan(null, 512));
  }

  /**
   * The gauges and the cache's counters report what their sources say at each collection, under the
   * device's attributes, until the telemetry closes.
   */
  @Test
  void theGaugesReadTheirSourcesAtEachCollectionUntilClosed() {
    WorkerTelemetry telemetry = telemetry(false, true);
    RecordingEndpoint endpoint = new RecordingEndpoint();
    PeerTable peers = new PeerTable(endpoint);
    LocalRegions regions =
        LocalRegions.withExactBound(endpoint, new RegionRegistry(), Long.MAX_VALUE);
    Operands spanned =
        new Operands() {
          @Override
          public CacheableSpan cacheableSpan() {
            return new CacheableSpan(BASE, BASE + 65536);
          }
        };
    try {
      peers.handle(1, new byte[] {10, 0, 0, 1}, null);
      peers.handle(2, new byte[] {10, 0, 0, 2}, null);
      peers.handle(3, new byte[] {10, 0, 0, 3}, null);
      regions.lease(BASE, 4096, spanned).release();
      regions.lease(BASE + 4096, 4096, spanned).release();
      regions.lease(BASE + 65536, 4096, new Operands() {}).release();
      assertEquals(1, regions.hits());
      assertEquals(2, regions.misses());
      AtomicLong inFlight = new AtomicLong(7);
      AtomicLong pending = new AtomicLong(11);
      telemetry.registerGauges(inFlight::get, pending::get, peers, regions);

      Collection<MetricData> all = sdk.metrics();
      assertEquals(7, value(all, "dma.in_flight", DEVICE_ATTRIBUTES));
      assertEquals(11, value(all, "dma.pending", DEVICE_ATTRIBUTES));
      assertEquals(3, value(all, "dma.peers", DEVICE_ATTRIBUTES));
      assertEquals(1, value(all, "dma.region_cache.hits", DEVICE_ATTRIBUTES));
      assertEquals(2, value(all, "dma.region_cache.misses", DEVICE_ATTRIBUTES));
      assertEquals(
          regions.pinnedBytes(), value(all, "dma.region_cache.pinned_bytes", DEVICE_ATTRIBUTES));
      assertEquals(65536, regions.pinnedBytes(), "the cached span stays registered");
      List<String> reported =
          List.of(
              "dma.in_flight",
              "dma.pending",
              "dma.peers",
              "dma.region_cache.hits",
              "dma.region_cache.misses",
              "dma.region_cache.evictions",
              "dma.region_cache.pinned_bytes");
      for (String name : reported) {
        assertEquals(1, longPoints(all, name).size(), name + " reported once");
      }
      assertEquals(0, value(all, "dma.region_cache.evictions", DEVICE_ATTRIBUTES));

      inFlight.set(2);
      pending.set(0);
      Collection<MetricData> later = sdk.metrics();
      assertEquals(2, value(later, "dma.in_flight", DEVICE_ATTRIBUTES), "read at collection");
      assertEquals(0, value(later, "dma.pending", DEVICE_ATTRIBUTES));

      telemetry.close();
      Collection<MetricData> closed = sdk.metrics();
      for (String name : reported) {
        assertEquals(List.of(), longPoints(closed, name), name + " after close");
      }
    } finally {
      regions.close();
      peers.clear();
    }
  }
}
