package dev.dma.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dma.api.Advertisement;
import dev.dma.api.CacheableSpan;
import dev.dma.api.Checksum;
import dev.dma.api.Completion;
import dev.dma.api.DmaConfiguration;
import dev.dma.api.DmaException;
import dev.dma.api.Operands;
import dev.dma.api.RemoteAccess;
import dev.dma.api.TransferRequest;
import dev.dma.core.FabricService;
import dev.dma.core.FabricServiceGroup;
import dev.dma.core.PassiveTarget;
import dev.dma.fake.FakeEndpoint;
import dev.dma.fake.FakeFabric;
import dev.dma.fake.OpMatcher;
import io.opentelemetry.api.common.AttributeKey;
import io.opentelemetry.api.common.Attributes;
import io.opentelemetry.api.trace.Span;
import io.opentelemetry.api.trace.StatusCode;
import io.opentelemetry.context.Scope;
import io.opentelemetry.sdk.OpenTelemetrySdk;
import io.opentelemetry.sdk.metrics.SdkMeterProvider;
import io.opentelemetry.sdk.metrics.data.LongPointData;
import io.opentelemetry.sdk.metrics.data.MetricData;
import io.opentelemetry.sdk.testing.exporter.InMemoryMetricReader;
import io.opentelemetry.sdk.testing.exporter.InMemorySpanExporter;
import io.opentelemetry.sdk.trace.SdkTracerProvider;
import io.opentelemetry.sdk.trace.data.SpanData;
import io.opentelemetry.sdk.trace.export.SimpleSpanProcessor;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.Collection;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * Spans and metrics as an operator sees them, asserted with the SDK's in-memory exporter and
 * reader: the span tree of one transfer, and metric values after a scripted run with known counts.
 */
class TelemetryTest {
  private static final Attributes WRITE_DONE = outcome("write", "done");
  private static final Attributes WRITE_FAILED = outcome("write", "failed");
  private static final Attributes READ_DONE = outcome("read", "done");

  private final InMemorySpanExporter spans = InMemorySpanExporter.create();
  private final InMemoryMetricReader metrics = InMemoryMetricReader.create();
  private OpenTelemetrySdk sdk;
  private Arena arena;

  @BeforeEach
  void installSdk() {
    sdk =
        OpenTelemetrySdk.builder()
            .setTracerProvider(
                SdkTracerProvider.builder()
                    .addSpanProcessor(SimpleSpanProcessor.create(spans))
                    .build())
            .setMeterProvider(SdkMeterProvider.builder().registerMetricReader(metrics).build())
            .build();
    arena = Arena.ofShared();
  }

  @AfterEach
  void closeSdk() {
    sdk.close();
    arena.close();
  }

  /** A context whose operand asks for one cached registration around it. */
  private record Spanned(MemorySegment segment) implements Operands {
    @Override
    public MemorySegment source() {
      return segment;
    }

    @Override
    public CacheableSpan cacheableSpan() {
      return CacheableSpan.of(segment);
    }
  }

  private static SpanData named(List<SpanData> all, String name) {
    return all.stream()
        .filter(span -> span.getName().equals(name))
        .findFirst()
        .orElseThrow(() -> new AssertionError("no span " + name + " in " + all));
  }

  @Test
  void oneTransfersSpanTreeOnTheFake() throws Exception {
    try (FakeFabric fabric = FakeFabric.create("telemetry-spans")) {
      fabric.script().requireLocalRegistration(true);
      FakeEndpoint target = fabric.openEndpoint();
      Advertisement ad =
          target.expose(arena.allocate(4096), RemoteAccess.READ_WRITE).advertisement();
      Collector<Spanned> completions = new Collector<>();
      DmaConfiguration configuration =
          DmaConfiguration.builder().providers("fake").interfaces(List.of(fabric.name())).build();
      try (FabricService<Spanned> service =
          FabricService.<Spanned>builder(configuration)
              .completer(completions)
              .openTelemetry(sdk)
              .start()) {
        Span request = sdk.getTracer("test").spanBuilder("dma.get").startSpan();
        Scope scope = request.makeCurrent();
        try {
          MemorySegment local = arena.allocate(1000);
          assertTrue(
              service.submit(
                  TransferRequest.write(77, ad, new Spanned(local)).withChecksum(Checksum.CRC32C)));
        } finally {
          scope.close();
        }
        assertTrue(completions.take().outcome().isDone());
        request.end();
      }
      target.close();
    }
    List<SpanData> all = spans.getFinishedSpanItems();
    SpanData get = named(all, "dma.get");
    SpanData wire = named(all, "dma.wire");
    SpanData await = named(all, "dma.await_completion");
    SpanData checksum = named(all, "dma.checksum");
    SpanData register = named(all, "dma.region_register");
    assertEquals(get.getSpanId(), wire.getParentSpanId());
    assertEquals(get.getTraceId(), wire.getTraceId());
    assertEquals(wire.getSpanId(), await.getParentSpanId());
    assertEquals(wire.getSpanId(), checksum.getParentSpanId());
    assertFalse(register.getParentSpanContext().isValid(), "region_register is a root span");
    assertEquals("write", wire.getAttributes().get(AttributeKey.stringKey("dma.direction")));
    assertEquals(1000L, wire.getAttributes().get(AttributeKey.longKey("dma.length")));
    assertEquals(77L, wire.getAttributes().get(AttributeKey.longKey("dma.client_id")));
    assertEquals("fake", wire.getAttributes().get(AttributeKey.stringKey("dma.provider")));
    assertEquals(1000L, checksum.getAttributes().get(AttributeKey.longKey("dma.length")));
    assertEquals(StatusCode.UNSET, wire.getStatus().getStatusCode());
    assertTrue(all.stream().noneMatch(span -> span.getName().equals("dma.worker_pass")));
  }

  @Test
  void oneTransfersSpanTreeOnTcp() throws Exception {
    DmaConfiguration configuration =
        DmaConfiguration.builder().providers("tcp").bind("127.0.0.1").build();
    Collector<Buffer> completions = new Collector<>();
    try (PassiveTarget client = PassiveTarget.start(configuration);
        FabricService<Buffer> service =
            FabricService.<Buffer>builder(configuration)
                .completer(completions)
                .openTelemetry(sdk)
                .start()) {
      Advertisement ad =
          client.expose(arena.allocate(65536), RemoteAccess.READ_WRITE).advertisement();
      Span request = sdk.getTracer("test").spanBuilder("dma.set").startSpan();
      Scope scope = request.makeCurrent();
      try {
        assertTrue(
            service.submit(
                TransferRequest.read(5, ad, 65536, new Buffer(1, arena.allocate(65536)))
                    .withChecksum(Checksum.CRC32C)));
      } finally {
        scope.close();
      }
      assertTrue(completions.take().outcome().isDone());
      request.end();
    }
    List<SpanData> all = spans.getFinishedSpanItems();
    SpanData set = named(all, "dma.set");
    SpanData wire = named(all, "dma.wire");
    assertEquals(set.getSpanId(), wire.getParentSpanId());
    assertEquals(wire.getSpanId(), named(all, "dma.await_completion").getParentSpanId());
    assertEquals(wire.getSpanId(), named(all, "dma.checksum").getParentSpanId());
    assertEquals("read", wire.getAttributes().get(AttributeKey.stringKey("dma.direction")));
    assertEquals("tcp", wire.getAttributes().get(AttributeKey.stringKey("dma.provider")));
    assertEquals(65536L, wire.getAttributes().get(AttributeKey.longKey("dma.length")));
    // tcp registers nothing locally, so there is no registration span.
    assertTrue(all.stream().noneMatch(span -> span.getName().equals("dma.region_register")));
  }

  @Test
  void workerPassesAreTracedOnlyWhenAskedAndOnlyWhenSomethingMoved() throws Exception {
    try (FakeFabric fabric = FakeFabric.create("telemetry-passes")) {
      FakeEndpoint target = fabric.openEndpoint();
      Advertisement ad =
          target.expose(arena.allocate(4096), RemoteAccess.READ_WRITE).advertisement();
      Collector<Buffer> completions = new Collector<>();
      DmaConfiguration configuration =
          DmaConfiguration.builder().providers("fake").interfaces(List.of(fabric.name())).build();
      try (FabricService<Buffer> service =
          FabricService.<Buffer>builder(configuration)
              .completer(completions)
              .openTelemetry(sdk)
              .traceWorkerPasses(true)
              .start()) {
        for (int i = 0; i < 3; i++) {
          assertTrue(
              service.submit(TransferRequest.write(1, ad, new Buffer(i, arena.allocate(64)))));
          assertTrue(completions.take().outcome().isDone());
        }
        // Idle now. Rather than sleep and hope the worker spins, make it run passes that move
        // nothing: each addPeer is answered during a pass's intake, so by the second answer the
        // first one's pass has ended, having posted and reaped nothing. None may be recorded.
        long moved = workerPasses().size();
        for (int i = 0; i < 4; i++) {
          service.addPeer(1, ad.address());
        }
        assertEquals(moved, workerPasses().size(), "a pass that moved nothing was recorded");
      }
      target.close();
    }
    List<SpanData> passes = workerPasses();
    assertTrue(passes.size() >= 3 && passes.size() <= 12, passes.size() + " passes");
    for (SpanData pass : passes) {
      long posted = pass.getAttributes().get(AttributeKey.longKey("dma.posted"));
      long reaped = pass.getAttributes().get(AttributeKey.longKey("dma.reaped"));
      assertTrue(posted + reaped > 0, "a pass that moved nothing was recorded");
    }
  }

  private List<SpanData> workerPasses() {
    return spans.getFinishedSpanItems().stream()
        .filter(span -> span.getName().equals("dma.worker_pass"))
        .toList();
  }

  private static Attributes outcome(String direction, String outcome) {
    return Attributes.of(
        AttributeKey.stringKey("dma.direction"),
        direction,
        AttributeKey.stringKey("dma.outcome"),
        outcome);
  }

  private static long sum(Collection<MetricData> all, String name, Attributes match) {
    return all.stream()
        .filter(metric -> metric.getName().equals(name))
        .flatMap(metric -> metric.getLongSumData().getPoints().stream())
        .filter(point -> matches(point, match))
        .mapToLong(LongPointData::getValue)
        .sum();
  }

  private static boolean matches(LongPointData point, Attributes match) {
    return match.asMap().entrySet().stream()
        .allMatch(entry -> entry.getValue().equals(point.getAttributes().get(entry.getKey())));
  }

  @Test
  void metricsCountAScriptedRunExactly() throws Exception {
    try (FakeFabric fabric = FakeFabric.create("telemetry-metrics")) {
      FakeEndpoint target = fabric.openEndpoint();
      Advertisement ad =
          target.expose(arena.allocate(4096), RemoteAccess.READ_WRITE).advertisement();
      Collector<Buffer> completions = new Collector<>();
      DmaConfiguration configuration =
          DmaConfiguration.builder()
              .providers("fake")
              .interfaces(List.of(fabric.name()))
              .progressDeadline(Duration.ofSeconds(30))
              .build();
      fabric
          .script()
          .againTimes(3)
          .failOp(OpMatcher.nth(2).or(OpMatcher.nth(4)), 125, 107, "canceled");
      try (FabricService<Buffer> service =
          FabricService.<Buffer>builder(configuration)
              .completer(completions)
              .openTelemetry(sdk)
              .start()) {
        for (int i = 0; i < 7; i++) {
          MemorySegment local = arena.allocate(100);
          assertTrue(service.submit(TransferRequest.write(1, ad, new Buffer(i, local))));
          Completion<Buffer> completion = completions.take();
          assertNotNull(completion);
        }
        MemorySegment landing = arena.allocate(50);
        assertTrue(service.submit(TransferRequest.read(1, ad, 50, new Buffer(9, landing))));
        assertTrue(completions.take().outcome().isDone());
        Collection<MetricData> all = metrics.collectAllMetrics();
        assertEquals(5, sum(all, "dma.transfers", WRITE_DONE));
        assertEquals(2, sum(all, "dma.transfers", WRITE_FAILED));
        assertEquals(1, sum(all, "dma.transfers", READ_DONE));
        assertEquals(500, sum(all, "dma.bytes", WRITE_DONE));
        assertEquals(50, sum(all, "dma.bytes", READ_DONE));
        assertEquals(
            2,
            sum(
                all,
                "dma.errors",
                Attributes.of(AttributeKey.stringKey("dma.error.kind"), "transfer")));
        assertEquals(3, sum(all, "dma.eagain_stalls", Attributes.empty()));
        assertEquals(0, sum(all, "dma.progress_deadline_failures", Attributes.empty()));
        long latencyCount =
            all.stream()
                .filter(metric -> metric.getName().equals("dma.transfer.duration"))
                .flatMap(metric -> metric.getHistogramData().getPoints().stream())
                .mapToLong(point -> point.getCount())
                .sum();
        assertEquals(8, latencyCount);
        assertTrue(all.stream().anyMatch(metric -> metric.getName().equals("dma.in_flight")));
        assertTrue(all.stream().anyMatch(metric -> metric.getName().equals("dma.peers")));
      }
      target.close();
    }
    SpanData failed =
        spans.getFinishedSpanItems().stream()
            .filter(
                span ->
                    span.getName().equals("dma.wire")
                        && span.getStatus().getStatusCode() == StatusCode.ERROR)
            .findFirst()
            .orElseThrow();
    assertEquals(125L, failed.getAttributes().get(AttributeKey.longKey("dma.fabric_errno")));
    assertEquals(107L, failed.getAttributes().get(AttributeKey.longKey("dma.provider_errno")));
  }

  /**
   * A group's devices report to the group's OpenTelemetry: one striped write of three chunks is
   * three transfers and all its bytes in the metrics, and each device's wire spans are there.
   */
  @Test
  void aStripingGroupReportsEveryDevicesTransfers() throws Exception {
    long length = 3 * 64 * 1024;
    try (FakeFabric fabric = FakeFabric.create("telemetry-group")) {
      FakeEndpoint target = fabric.openEndpoint();
      Advertisement ad =
          target.expose(arena.allocate(length), RemoteAccess.READ_WRITE).advertisement();
      Collector<Buffer> completions = new Collector<>();
      String name = fabric.name();
      DmaConfiguration configuration =
          DmaConfiguration.builder()
              .providers("fake")
              .interfaces(List.of(name, name, name))
              .build();
      try (FabricServiceGroup<Buffer> group =
          FabricServiceGroup.<Buffer>builder(configuration)
              .completer(completions)
              .openTelemetry(sdk)
              .stripeThresholdBytes(64 * 1024)
              .start()) {
        MemorySegment local = arena.allocate(length);
        assertTrue(group.submit(TransferRequest.write(1, ad, new Buffer(1, local))));
        assertTrue(completions.take().outcome().isDone());
        Collection<MetricData> all = metrics.collectAllMetrics();
        assertEquals(3, sum(all, "dma.transfers", WRITE_DONE), "one transfer per chunk");
        assertEquals(length, sum(all, "dma.bytes", WRITE_DONE));
      }
      target.close();
    }
    long wires =
        spans.getFinishedSpanItems().stream()
            .filter(span -> span.getName().equals("dma.wire"))
            .count();
    assertEquals(3, wires, "a wire span per chunk");
  }

  private static long device(Collection<MetricData> all, String name, long index, boolean gauge) {
    Attributes match = Attributes.of(AttributeKey.longKey("dma.device.index"), index);
    return all.stream()
        .filter(metric -> metric.getName().equals(name))
        .flatMap(
            metric ->
                (gauge
                        ? metric.getLongGaugeData().getPoints()
                        : metric.getLongSumData().getPoints())
                    .stream())
        .filter(point -> matches(point, match))
        .mapToLong(LongPointData::getValue)
        .sum();
  }

  /**
   * Rail health is seen in the metrics: the device failing every op for two clients is reported
   * paused with its faults, pause and failovers, the healthy ones not.
   */
  @Test
  void aGroupReportsEachDevicesHealth() throws Exception {
    try (FakeFabric fabric = FakeFabric.create("telemetry-health")) {
      FakeEndpoint first = fabric.openEndpoint();
      FakeEndpoint second = fabric.openEndpoint();
      List<Advertisement> ads =
          List.of(
              first.expose(arena.allocate(4096), RemoteAccess.READ_WRITE).advertisement(),
              second.expose(arena.allocate(4096), RemoteAccess.READ_WRITE).advertisement());
      Collector<Buffer> completions = new Collector<>();
      String name = fabric.name();
      DmaConfiguration configuration =
          DmaConfiguration.builder()
              .providers("fake")
              .interfaces(List.of(name, name, name))
              .build();
      try (FabricServiceGroup<Buffer> group =
          FabricServiceGroup.<Buffer>builder(configuration)
              .completer(completions)
              .openTelemetry(sdk)
              .start()) {
        byte[] failing = group.services().get(1).localAddress();
        fabric.script().failOp(OpMatcher.fromInitiator(failing), 5, -5, "Input/output error");
        int reads = 400;
        MemorySegment landing = arena.allocate(4096);
        for (int i = 0; i < reads; i++) {
          assertTrue(
              group.submit(
                  TransferRequest.read(i % 2 + 1, ads.get(i % 2), 4096, new Buffer(i, landing))));
          if (i % 32 == 31) {
            completions.take(32);
          }
        }
        completions.take(reads % 32);
        Collection<MetricData> all = metrics.collectAllMetrics();
        assertEquals(1, device(all, "dma.device.paused", 1, true), "device 1 reported paused");
        assertEquals(0, device(all, "dma.device.paused", 0, true));
        assertEquals(0, device(all, "dma.device.paused", 2, true));
        assertEquals(1, device(all, "dma.device.pauses", 1, false));
        assertEquals(group.health().get(1).faults(), device(all, "dma.device.faults", 1, false));
        assertTrue(device(all, "dma.device.faults", 1, false) >= 4);
        assertEquals(
            group.health().get(1).failedOver(), device(all, "dma.device.failovers", 1, false));
        assertEquals(0, device(all, "dma.device.faults", 0, false));
      }
      first.close();
      second.close();
    }
  }

  /**
   * A transfer still posted when the close timeout passes fails with CLOSED, and its telemetry says
   * so too: its {@code dma.wire} span ends with an error status and it counts as a failed write,
   * rather than leaving the span open for good.
   */
  @Test
  void aTransferCutOffByCloseEndsItsSpanAndCountsAsFailed() throws Exception {
    try (FakeFabric fabric = FakeFabric.create("telemetry-close")) {
      FakeEndpoint target = fabric.openEndpoint();
      Advertisement ad =
          target.expose(arena.allocate(4096), RemoteAccess.READ_WRITE).advertisement();
      Collector<Buffer> completions = new Collector<>();
      DmaConfiguration configuration =
          DmaConfiguration.builder()
              .providers("fake")
              .interfaces(List.of(fabric.name()))
              .closeTimeout(Duration.ofMillis(200))
              .build();
      fabric.script().holdCompletions();
      FabricService<Buffer> service =
          FabricService.<Buffer>builder(configuration)
              .completer(completions)
              .openTelemetry(sdk)
              .start();
      assertTrue(service.submit(TransferRequest.write(1, ad, new Buffer(1, arena.allocate(64)))));
      while (fabric.script().heldCompletions() < 1) {
        Thread.onSpinWait();
      }
      service.close();
      Completion<Buffer> cut = completions.take();
      assertEquals(DmaException.Reason.CLOSED, cut.outcome().error().reason());
      assertEquals(1, sum(metrics.collectAllMetrics(), "dma.transfers", WRITE_FAILED));
      target.close();
    }
    SpanData wire =
        spans.getFinishedSpanItems().stream()
            .filter(span -> span.getName().equals("dma.wire"))
            .findFirst()
            .orElseThrow(() -> new AssertionError("the cut-off transfer's dma.wire never ended"));
    assertEquals(StatusCode.ERROR, wire.getStatus().getStatusCode());
    assertTrue(
        spans.getFinishedSpanItems().stream()
            .anyMatch(span -> span.getName().equals("dma.await_completion")),
        "dma.await_completion never ended");
  }

  @Test
  void aLostCompletionCountsOneCompletionDeadlineFailureAndOneReset() throws Exception {
    try (FakeFabric fabric = FakeFabric.create("telemetry-deadline")) {
      FakeEndpoint target = fabric.openEndpoint();
      Advertisement ad =
          target.expose(arena.allocate(4096), RemoteAccess.READ_WRITE).advertisement();
      Collector<Buffer> completions = new Collector<>();
      DmaConfiguration configuration =
          DmaConfiguration.builder()
              .providers("fake")
              .interfaces(List.of(fabric.name()))
              .completionDeadline(Duration.ofMillis(100))
              .build();
      fabric.script().loseCompletions(OpMatcher.nth(1));
      try (FabricService<Buffer> service =
          FabricService.<Buffer>builder(configuration)
              .completer(completions)
              .openTelemetry(sdk)
              .start()) {
        assertTrue(service.submit(TransferRequest.write(1, ad, new Buffer(1, arena.allocate(64)))));
        Completion<Buffer> lost = completions.take();
        assertEquals(dev.dma.api.DmaException.Reason.DEADLINE, lost.outcome().error().reason());
        Collection<MetricData> all = metrics.collectAllMetrics();
        assertEquals(1, sum(all, "dma.completion_deadline_failures", Attributes.empty()));
        assertEquals(1, sum(all, "dma.endpoint_resets", Attributes.empty()));
        assertEquals(0, sum(all, "dma.progress_deadline_failures", Attributes.empty()));
      }
      target.close();
    }
  }
}
