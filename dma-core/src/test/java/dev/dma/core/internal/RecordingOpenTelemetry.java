package dev.dma.core.internal;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.opentelemetry.api.OpenTelemetry;
import io.opentelemetry.api.common.AttributeKey;
import io.opentelemetry.api.common.Attributes;
import io.opentelemetry.api.metrics.MeterProvider;
import io.opentelemetry.api.trace.TracerProvider;
import io.opentelemetry.context.propagation.ContextPropagators;
import io.opentelemetry.sdk.metrics.SdkMeterProvider;
import io.opentelemetry.sdk.metrics.data.HistogramPointData;
import io.opentelemetry.sdk.metrics.data.LongPointData;
import io.opentelemetry.sdk.metrics.data.MetricData;
import io.opentelemetry.sdk.metrics.data.MetricDataType;
import io.opentelemetry.sdk.testing.exporter.InMemoryMetricReader;
import io.opentelemetry.sdk.testing.exporter.InMemorySpanExporter;
import io.opentelemetry.sdk.trace.SdkTracerProvider;
import io.opentelemetry.sdk.trace.data.SpanData;
import io.opentelemetry.sdk.trace.export.SimpleSpanProcessor;
import java.util.Collection;
import java.util.List;

/**
 * An OpenTelemetry whose halves are each the SDK, recording into memory, or off (the API's no-op
 * provider, which is how {@link Telemetry} tells that nothing is installed). For the telemetry unit
 * tests: spans are read back once ended, metrics at each {@link #metrics()} collection.
 */
final class RecordingOpenTelemetry implements OpenTelemetry, AutoCloseable {
  static final String PROVIDER = "fake";
  static final String DEVICE = "dev0";

  /** The attributes every metric of a device carries. */
  static final Attributes DEVICE_ATTRIBUTES =
      Attributes.of(
          AttributeKey.stringKey("dma.provider"),
          PROVIDER,
          AttributeKey.stringKey("dma.device"),
          DEVICE);

  private final InMemorySpanExporter exporter = InMemorySpanExporter.create();
  private final InMemoryMetricReader reader = InMemoryMetricReader.create();
  private final SdkTracerProvider tracers;
  private final SdkMeterProvider meters;

  RecordingOpenTelemetry(boolean tracing, boolean metrics) {
    this.tracers =
        tracing
            ? SdkTracerProvider.builder()
                .addSpanProcessor(SimpleSpanProcessor.create(exporter))
                .build()
            : null;
    this.meters = metrics ? SdkMeterProvider.builder().registerMetricReader(reader).build() : null;
  }

  @Override
  public TracerProvider getTracerProvider() {
    return tracers != null ? tracers : TracerProvider.noop();
  }

  @Override
  public MeterProvider getMeterProvider() {
    return meters != null ? meters : MeterProvider.noop();
  }

  @Override
  public ContextPropagators getPropagators() {
    return ContextPropagators.noop();
  }

  /** The service's instruments over this, for {@link #PROVIDER} and {@link #DEVICE}. */
  Telemetry telemetry(boolean tracePasses) {
    return new Telemetry(this, PROVIDER, DEVICE, tracePasses);
  }

  /** Every span ended so far. */
  List<SpanData> spans() {
    return exporter.getFinishedSpanItems();
  }

  /** The ended spans called {@code name}. */
  List<SpanData> spans(String name) {
    return spans().stream().filter(span -> span.getName().equals(name)).toList();
  }

  /** The one ended span called {@code name}. */
  SpanData span(String name) {
    List<SpanData> named = spans(name);
    assertEquals(1, named.size(), "spans called " + name + " in " + spans());
    return named.getFirst();
  }

  /** Collects every instrument now (gauges and observed counters call their readers here). */
  Collection<MetricData> metrics() {
    return reader.collectAllMetrics();
  }

  /** The metric called {@code name} in {@code all}, or null. */
  static MetricData metric(Collection<MetricData> all, String name) {
    return all.stream().filter(metric -> metric.getName().equals(name)).findFirst().orElse(null);
  }

  /** The long points (sum or gauge) of {@code name} in {@code all}; none when it is absent. */
  static List<LongPointData> longPoints(Collection<MetricData> all, String name) {
    MetricData metric = metric(all, name);
    if (metric == null) {
      return List.of();
    }
    return List.copyOf(
        metric.getType() == MetricDataType.LONG_GAUGE
            ? metric.getLongGaugeData().getPoints()
            : metric.getLongSumData().getPoints());
  }

  /**
   * The value of {@code name}'s point with exactly {@code attributes}, or 0 when there is none (a
   * counter never added to reports nothing).
   */
  static long value(Collection<MetricData> all, String name, Attributes attributes) {
    List<LongPointData> matching =
        longPoints(all, name).stream()
            .filter(point -> point.getAttributes().equals(attributes))
            .toList();
    assertTrue(matching.size() <= 1, "more than one point with " + attributes + ": " + matching);
    return matching.isEmpty() ? 0 : matching.getFirst().getValue();
  }

  /** The histogram points of {@code name} in {@code all}; none when it is absent. */
  static List<HistogramPointData> histogramPoints(Collection<MetricData> all, String name) {
    MetricData metric = metric(all, name);
    return metric == null ? List.of() : List.copyOf(metric.getHistogramData().getPoints());
  }

  @Override
  public void close() {
    if (tracers != null) {
      tracers.close();
    }
    if (meters != null) {
      meters.close();
    }
  }
}
