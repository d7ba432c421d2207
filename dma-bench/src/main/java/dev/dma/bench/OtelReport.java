package dev.dma.bench;

import io.opentelemetry.api.OpenTelemetry;
import io.opentelemetry.sdk.OpenTelemetrySdk;
import io.opentelemetry.sdk.metrics.SdkMeterProvider;
import io.opentelemetry.sdk.metrics.data.DoublePointData;
import io.opentelemetry.sdk.metrics.data.HistogramPointData;
import io.opentelemetry.sdk.metrics.data.LongPointData;
import io.opentelemetry.sdk.metrics.data.MetricData;
import io.opentelemetry.sdk.metrics.data.PointData;
import io.opentelemetry.sdk.testing.exporter.InMemoryMetricReader;
import java.io.PrintWriter;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Locale;

/**
 * {@code dma-bench run --otel}: an OpenTelemetry SDK with an in-memory metric reader for the run,
 * and a plain listing of what dma recorded. Metrics only: tracing every transfer would measure the
 * tracer rather than the fabric.
 */
final class OtelReport implements AutoCloseable {
  private final InMemoryMetricReader reader;
  private final OpenTelemetrySdk sdk;

  private OtelReport(InMemoryMetricReader reader, OpenTelemetrySdk sdk) {
    this.reader = reader;
    this.sdk = sdk;
  }

  /** An SDK whose meter provider reads into memory. */
  static OtelReport install() {
    InMemoryMetricReader reader = InMemoryMetricReader.create();
    OpenTelemetrySdk sdk =
        OpenTelemetrySdk.builder()
            .setMeterProvider(SdkMeterProvider.builder().registerMetricReader(reader).build())
            .build();
    return new OtelReport(reader, sdk);
  }

  /** The SDK to hand the service. */
  OpenTelemetry openTelemetry() {
    return sdk;
  }

  /** Prints every dma metric point: name, attributes, value. */
  void print(PrintWriter out) {
    List<MetricData> metrics = new ArrayList<>(reader.collectAllMetrics());
    metrics.sort(Comparator.comparing(MetricData::getName));
    out.println();
    out.println("OpenTelemetry metrics recorded by dma:");
    for (MetricData metric : metrics) {
      for (PointData point : metric.getData().getPoints()) {
        out.printf(
            Locale.ROOT,
            "  %-34s %-60s %s%n",
            metric.getName(),
            attributes(point),
            value(point, metric.getUnit()));
      }
    }
    out.flush();
  }

  private static String attributes(PointData point) {
    List<String> pairs = new ArrayList<>();
    point.getAttributes().forEach((key, value) -> pairs.add(key.getKey() + "=" + value));
    pairs.sort(null);
    return String.join(",", pairs);
  }

  private static String value(PointData point, String unit) {
    return switch (point) {
      case LongPointData longPoint -> longPoint.getValue() + (unit.isEmpty() ? "" : " " + unit);
      case DoublePointData doublePoint -> doublePoint.getValue() + " " + unit;
      case HistogramPointData histogram ->
          String.format(
              Locale.ROOT,
              "count %d, mean %.2f us, max %.2f us",
              histogram.getCount(),
              histogram.getCount() == 0 ? 0 : histogram.getSum() / histogram.getCount() * 1e6,
              histogram.getMax() * 1e6);
      default -> point.toString();
    };
  }

  @Override
  public void close() {
    sdk.close();
  }
}
