package dev.dma.fake.core;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dma.api.Advertisement;
import dev.dma.api.Checksum;
import dev.dma.api.Completion;
import dev.dma.api.DmaConfiguration;
import dev.dma.api.DmaException;
import dev.dma.api.RemoteAccess;
import dev.dma.api.TransferRequest;
import dev.dma.core.internal.Telemetry;
import dev.dma.fake.FakeEndpoint;
import dev.dma.fake.FakeFabric;
import dev.dma.fake.FiErrno;
import dev.dma.fake.OpMatcher;
import io.opentelemetry.api.common.AttributeKey;
import io.opentelemetry.api.common.Attributes;
import io.opentelemetry.api.trace.StatusCode;
import io.opentelemetry.sdk.OpenTelemetrySdk;
import io.opentelemetry.sdk.metrics.SdkMeterProvider;
import io.opentelemetry.sdk.metrics.data.LongPointData;
import io.opentelemetry.sdk.metrics.data.MetricData;
import io.opentelemetry.sdk.metrics.data.MetricDataType;
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
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.UnaryOperator;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The worker calls its telemetry hooks where transfers happen, seen pass by pass on the stepped
 * harness with the OpenTelemetry SDK installed: a posted and reaped transfer has its spans and
 * counts, an intake refusal and a refused post count as failures, a lost completion as a
 * completion-deadline failure, the gauges read the worker's in-flight and pending counts, and a
 * worker-pass span is recorded for a pass that moved something and for no other. The hooks' own
 * output is pinned in dma-core's {@code WorkerTelemetryTest}; this is the worker's side.
 */
@Timeout(60)
class WorkerTelemetryStepsTest {
  private static final AtomicInteger FABRICS = new AtomicInteger();
  private static final Duration DEADLINE = Duration.ofSeconds(2);
  private static final AttributeKey<String> DIRECTION = AttributeKey.stringKey("dma.direction");
  private static final AttributeKey<String> OUTCOME = AttributeKey.stringKey("dma.outcome");

  private final InMemorySpanExporter spans = InMemorySpanExporter.create();
  private final InMemoryMetricReader metrics = InMemoryMetricReader.create();
  private final OpenTelemetrySdk sdk =
      OpenTelemetrySdk.builder()
          .setTracerProvider(
              SdkTracerProvider.builder()
                  .addSpanProcessor(SimpleSpanProcessor.create(spans))
                  .build())
          .setMeterProvider(SdkMeterProvider.builder().registerMetricReader(metrics).build())
          .build();
  private final Recorder<Buffer> recorder = new Recorder<>();
  private final ManualTicker ticker = new ManualTicker();
  private FakeFabric fabric;
  private Arena arena;
  private FakeEndpoint target;
  private Advertisement ad;
  private SteppedWorker<Buffer> worker;

  @BeforeEach
  void open() {
    fabric = FakeFabric.create("worker-telemetry-" + FABRICS.incrementAndGet());
    arena = Arena.ofShared();
    target = fabric.openEndpoint();
    ad = target.expose(arena.allocate(4096), RemoteAccess.READ_WRITE).advertisement();
  }

  @AfterEach
  void close() {
    fabric.script().reset();
    fabric.script().stopHolding();
    fabric.script().releaseCompletions();
    if (worker != null) {
      worker.close();
    }
    target.close();
    fabric.close();
    arena.close();
    sdk.close();
  }

  private void start(boolean tracePasses, UnaryOperator<DmaConfiguration.Builder> tweak) {
    DmaConfiguration configuration =
        tweak
            .apply(
                DmaConfiguration.builder()
                    .providers("fake")
                    .interfaces(List.of(fabric.name()))
                    .completionDeadline(DEADLINE))
            .build();
    worker =
        SteppedWorker.start(
            configuration,
            recorder,
            ticker,
            new Telemetry(sdk, "fake", fabric.name(), tracePasses));
    recorder.steppedBy(worker);
  }

  private TransferRequest<Buffer> write(int id, int length) {
    return TransferRequest.write(1, ad, new Buffer(id, arena.allocate(length)));
  }

  private List<SpanData> spans(String name) {
    return spans.getFinishedSpanItems().stream()
        .filter(span -> span.getName().equals(name))
        .toList();
  }

  /** The sum of {@code name}'s points whose attributes include every one of {@code match}. */
  private static long sum(Collection<MetricData> all, String name, Attributes match) {
    return all.stream()
        .filter(metric -> metric.getName().equals(name))
        .flatMap(
            metric ->
                (metric.getType() == MetricDataType.LONG_GAUGE
                        ? metric.getLongGaugeData().getPoints()
                        : metric.getLongSumData().getPoints())
                    .stream())
        .filter(
            point ->
                match.asMap().entrySet().stream()
                    .allMatch(
                        entry ->
                            entry.getValue().equals(point.getAttributes().get(entry.getKey()))))
        .mapToLong(LongPointData::getValue)
        .sum();
  }

  private static Attributes outcome(String direction, String outcome) {
    return Attributes.of(DIRECTION, direction, OUTCOME, outcome);
  }

  /**
   * A write refused twice with -FI_EAGAIN and then posted, and a read, each end their wire and
   * await spans at the reap and count as done with their bytes; the first lease registers, which
   * the registration span records.
   */
  @Test
  void postedAndReapedTransfersHaveTheirSpansAndCounts() throws Exception {
    fabric.script().requireLocalRegistration(true);
    start(false, builder -> builder);
    fabric.script().againTimes(2);
    assertTrue(worker.submit(write(1, 100)));
    assertTrue(recorder.take().outcome().isDone());
    MemorySegment landing = arena.allocate(50);
    assertTrue(worker.submit(TransferRequest.read(1, ad, 50, new Buffer(2, landing))));
    assertTrue(recorder.take().outcome().isDone());

    List<SpanData> wires = spans("dma.wire");
    assertEquals(2, wires.size());
    assertEquals("write", wires.get(0).getAttributes().get(DIRECTION));
    assertEquals("read", wires.get(1).getAttributes().get(DIRECTION));
    assertEquals(2, spans("dma.await_completion").size());
    assertFalse(spans("dma.region_register").isEmpty(), "a lease that registered");
    assertEquals(List.of(), spans("dma.worker_pass"), "not asked for");

    Collection<MetricData> all = metrics.collectAllMetrics();
    assertEquals(1, sum(all, "dma.transfers", outcome("write", "done")));
    assertEquals(1, sum(all, "dma.transfers", outcome("read", "done")));
    assertEquals(100, sum(all, "dma.bytes", outcome("write", "done")));
    assertEquals(50, sum(all, "dma.bytes", outcome("read", "done")));
    assertEquals(2, sum(all, "dma.eagain_stalls", Attributes.empty()));
    assertEquals(0, sum(all, "dma.errors", Attributes.empty()));
  }

  /** A checksummed write's dma.checksum span, taken on a pool thread, is a child of its wire. */
  @Test
  void aChecksummedWritesChecksumSpanIsAChildOfItsWire() throws Exception {
    start(false, builder -> builder);
    assertTrue(worker.submit(write(1, 256).withChecksum(Checksum.CRC32C)));
    Completion<Buffer> done = recorder.take();
    assertTrue(done.outcome().isDone());

    SpanData wire = spans("dma.wire").getFirst();
    List<SpanData> checksums = spans("dma.checksum");
    assertEquals(1, checksums.size());
    assertEquals(wire.getSpanId(), checksums.getFirst().getParentSpanId());
    assertEquals(
        256L, checksums.getFirst().getAttributes().get(AttributeKey.longKey("dma.length")));
  }

  /**
   * A write longer than its advertisement is refused at intake and a post the provider fails
   * outright never reaches the wire: both count as errors, the refused post as a failed write too,
   * and neither opens a wire span.
   */
  @Test
  void anIntakeRefusalAndARefusedPostCountAsFailures() throws Exception {
    start(false, builder -> builder);
    assertTrue(worker.submit(write(1, 8192)));
    DmaException refused = recorder.take().outcome().error();
    assertEquals(DmaException.Reason.BAD_REQUEST, refused.reason());
    Collection<MetricData> afterRefusal = metrics.collectAllMetrics();
    assertEquals(1, sum(afterRefusal, "dma.errors", Attributes.empty()));
    assertEquals(0, sum(afterRefusal, "dma.transfers", Attributes.empty()), "never an op");

    fabric.script().failNextPosts(1, FiErrno.EIO);
    assertTrue(worker.submit(write(2, 64)));
    assertFalse(recorder.take().outcome().isDone());

    Collection<MetricData> all = metrics.collectAllMetrics();
    assertEquals(2, sum(all, "dma.errors", Attributes.empty()));
    assertEquals(1, sum(all, "dma.transfers", outcome("write", "failed")));
    assertEquals(0, sum(all, "dma.transfers", outcome("write", "done")));
    assertEquals(List.of(), spans("dma.wire"), "nothing reached the wire");
  }

  /** A completion that never comes counts one completion-deadline failure and one reset. */
  @Test
  void aLostCompletionCountsACompletionDeadlineFailure() throws Exception {
    start(false, builder -> builder);
    assertALostCompletionCountsOnce();
  }

  /** The same where completions come in post order (the scan judges the oldest op there). */
  @Test
  void aLostCompletionCountsOnceWhereCompletionsComeInPostOrder() throws Exception {
    fabric.script().completesInPostOrder(true);
    start(false, builder -> builder);
    assertALostCompletionCountsOnce();
  }

  private void assertALostCompletionCountsOnce() throws Exception {
    fabric.script().loseCompletions(OpMatcher.nth(1));
    assertTrue(worker.submit(write(1, 64)));
    worker.stepQuietly();
    assertEquals(List.of(), spans("dma.wire"), "posted, its wire still open");
    worker.advanceAndRead(ticker, DEADLINE.plusMillis(1));
    Completion<Buffer> lost = recorder.take();
    assertEquals(DmaException.Reason.DEADLINE, lost.outcome().error().reason());

    Collection<MetricData> all = metrics.collectAllMetrics();
    assertEquals(1, sum(all, "dma.completion_deadline_failures", Attributes.empty()));
    assertEquals(1, sum(all, "dma.endpoint_resets", Attributes.empty()));
    assertEquals(1, sum(all, "dma.transfers", outcome("write", "failed")));
    assertEquals(1, spans("dma.wire").size(), "the lost transfer's wire ended with its failure");
  }

  /**
   * A write whose client left (removePeer) and whose completion never comes is judged a second
   * later, long before the completion deadline: that counts as a completion-deadline failure too.
   */
  @Test
  void aWriteLeftBehindByItsClientCountsACompletionDeadlineFailure() throws Exception {
    start(false, builder -> builder.completionDeadline(Duration.ofSeconds(30)));
    fabric.script().loseCompletions(OpMatcher.nth(1));
    assertTrue(worker.submit(write(1, 64)));
    worker.stepQuietly();
    worker.removePeer(1);
    worker.advanceAndRead(ticker, Duration.ofMillis(1_100));
    DmaException error = recorder.take().outcome().error();
    assertEquals(DmaException.Reason.DEADLINE, error.reason());
    assertTrue(error.getMessage().contains("after the client left"), error.getMessage());

    Collection<MetricData> all = metrics.collectAllMetrics();
    assertEquals(1, sum(all, "dma.completion_deadline_failures", Attributes.empty()));
    assertEquals(1, sum(all, "dma.transfers", outcome("write", "failed")));
  }

  /**
   * A read whose completion reports a lost connection is posted again: its first wire span ends as
   * an error that says so, the second as a success, and it counts once, as done.
   */
  @Test
  void aReadPostedAgainEndsItsFirstWireAndCountsOnce() throws Exception {
    start(false, builder -> builder);
    fabric.script().failNextOps(1, FiErrno.ECONNRESET, -104, "connection reset");
    MemorySegment landing = arena.allocate(64);
    assertTrue(worker.submit(TransferRequest.read(1, ad, 64, new Buffer(1, landing))));
    Completion<Buffer> done = recorder.take();
    assertTrue(done.outcome().isDone(), () -> done.outcome().error().toString());
    assertEquals(2, done.posts());

    List<SpanData> wires = spans("dma.wire");
    assertEquals(2, wires.size());
    assertEquals(StatusCode.ERROR, wires.get(0).getStatus().getStatusCode());
    assertEquals("connection reset; posted again", wires.get(0).getStatus().getDescription());
    assertEquals(StatusCode.UNSET, wires.get(1).getStatus().getStatusCode());
    assertEquals(2, spans("dma.await_completion").size());
    Collection<MetricData> all = metrics.collectAllMetrics();
    assertEquals(1, sum(all, "dma.transfers", outcome("read", "done")));
    assertEquals(0, sum(all, "dma.transfers", outcome("read", "failed")));
  }

  /** A post refused with -FI_EAGAIN until the progress deadline counts a stall and its failure. */
  @Test
  void aPostRefusedPastTheProgressDeadlineCountsItsFailure() throws Exception {
    start(false, builder -> builder.progressDeadline(Duration.ofSeconds(1)));
    fabric.script().againWhile(() -> true);
    assertTrue(worker.submit(write(1, 64)));
    worker.stepQuietly();
    worker.advanceAndRead(ticker, Duration.ofMillis(1_001));
    DmaException error = recorder.take().outcome().error();
    assertEquals(DmaException.Reason.DEADLINE, error.reason(), error.getMessage());

    Collection<MetricData> all = metrics.collectAllMetrics();
    assertEquals(1, sum(all, "dma.progress_deadline_failures", Attributes.empty()));
    assertTrue(sum(all, "dma.eagain_stalls", Attributes.empty()) >= 1);
    assertEquals(1, sum(all, "dma.transfers", outcome("write", "failed")));
    assertEquals(List.of(), spans("dma.wire"));
  }

  /**
   * A close that times out fails the transfer still posted (its wire ends as an error) and the one
   * still queued, counting both as failed writes, and unregisters the gauges.
   */
  @Test
  void aCloseThatTimesOutCountsWhatItFailsAndUnregistersTheGauges() throws Exception {
    start(false, builder -> builder.maxInFlight(1));
    fabric.script().holdCompletions();
    assertTrue(worker.submit(write(1, 64)));
    assertTrue(worker.submit(write(2, 64)));
    worker.stepUntil(() -> fabric.script().heldCompletions() == 1, "one posted");
    worker.step();
    assertEquals(1, sum(metrics.collectAllMetrics(), "dma.pending", Attributes.empty()));

    worker.close(Duration.ofMillis(50));
    assertEquals(2, recorder.queue.size());
    for (Completion<Buffer> completion : recorder.queue) {
      assertFalse(completion.outcome().isDone());
    }
    Collection<MetricData> all = metrics.collectAllMetrics();
    assertEquals(2, sum(all, "dma.transfers", outcome("write", "failed")));
    assertEquals(2, sum(all, "dma.errors", Attributes.empty()));
    assertTrue(
        all.stream().noneMatch(metric -> metric.getName().equals("dma.in_flight")),
        "gauges after close");
    List<SpanData> wires = spans("dma.wire");
    assertEquals(1, wires.size(), "the posted one's wire ended");
    assertEquals(StatusCode.ERROR, wires.getFirst().getStatus().getStatusCode());
  }

  /** The gauges read the worker's own counts at each collection. */
  @Test
  void theGaugesReadTheWorkersInFlightAndPendingCounts() throws Exception {
    start(false, builder -> builder.maxInFlight(2));
    fabric.script().holdCompletions();
    for (int i = 0; i < 5; i++) {
      assertTrue(worker.submit(write(i, 64)));
    }
    worker.stepUntil(() -> fabric.script().heldCompletions() == 2, "two posted");
    worker.step();
    Collection<MetricData> busy = metrics.collectAllMetrics();
    assertEquals(2, sum(busy, "dma.in_flight", Attributes.empty()));
    assertEquals(3, sum(busy, "dma.pending", Attributes.empty()));

    fabric.script().stopHolding();
    fabric.script().releaseCompletions();
    assertEquals(5, recorder.take(5).size());
    worker.step();
    Collection<MetricData> idle = metrics.collectAllMetrics();
    assertEquals(0, sum(idle, "dma.in_flight", Attributes.empty()));
    assertEquals(0, sum(idle, "dma.pending", Attributes.empty()));
    assertEquals(5, sum(idle, "dma.transfers", outcome("write", "done")));
  }

  /**
   * Asked for, a worker-pass span is recorded for each pass that posted or reaped, and for no idle
   * pass: one transfer's passes account for exactly one post and one reap.
   */
  @Test
  void aPassIsTracedOnlyWhenItMovedSomething() throws Exception {
    start(true, builder -> builder);
    worker.stepQuietly();
    assertEquals(List.of(), spans("dma.worker_pass"), "idle passes");

    fabric.script().holdCompletions();
    assertTrue(worker.submit(write(1, 64)));
    worker.stepUntil(() -> fabric.script().heldCompletions() == 1, "posted");
    worker.stepQuietly();
    List<SpanData> posting = spans("dma.worker_pass");
    assertEquals(1, posting.size(), "only the pass that posted");
    assertEquals(1L, posting.getFirst().getAttributes().get(AttributeKey.longKey("dma.posted")));
    assertEquals(0L, posting.getFirst().getAttributes().get(AttributeKey.longKey("dma.reaped")));
    assertEquals(1L, posting.getFirst().getAttributes().get(AttributeKey.longKey("dma.in_flight")));

    fabric.script().releaseCompletions();
    assertTrue(recorder.take().outcome().isDone());
    worker.stepQuietly();
    List<SpanData> passes = spans("dma.worker_pass");
    assertEquals(2, passes.size(), "and the pass that reaped");
    assertEquals(0L, passes.get(1).getAttributes().get(AttributeKey.longKey("dma.posted")));
    assertEquals(1L, passes.get(1).getAttributes().get(AttributeKey.longKey("dma.reaped")));
  }
}
