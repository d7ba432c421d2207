package dev.dma.core.internal;

import io.opentelemetry.api.OpenTelemetry;
import io.opentelemetry.api.common.AttributeKey;
import io.opentelemetry.api.common.Attributes;
import io.opentelemetry.api.metrics.DoubleHistogram;
import io.opentelemetry.api.metrics.LongCounter;
import io.opentelemetry.api.metrics.Meter;
import io.opentelemetry.api.metrics.MeterProvider;
import io.opentelemetry.api.metrics.ObservableLongMeasurement;
import io.opentelemetry.api.trace.Tracer;
import io.opentelemetry.api.trace.TracerProvider;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Consumer;

/**
 * The OpenTelemetry instruments of one fabric service: spans ({@code dma.wire}, {@code
 * dma.await_completion}, {@code dma.checksum}, {@code dma.region_register}, and {@code
 * dma.worker_pass} when asked for) and metrics. With no SDK installed both halves are off, and the
 * worker skips every telemetry step: nothing is allocated or timed per transfer.
 *
 * <p>Attribute sets are built once here, so recording a transfer allocates nothing beyond what the
 * SDK itself does. Threads: built by the service, then used by the worker and checksum-pool threads
 * (the instruments are thread-safe).
 */
public final class Telemetry {
  /** The instrumentation scope name. */
  public static final String SCOPE = "dev.dma";

  static final AttributeKey<String> DIRECTION = AttributeKey.stringKey("dma.direction");
  static final AttributeKey<String> OUTCOME = AttributeKey.stringKey("dma.outcome");
  static final AttributeKey<String> KIND = AttributeKey.stringKey("dma.error.kind");
  static final AttributeKey<String> PROVIDER = AttributeKey.stringKey("dma.provider");
  static final AttributeKey<String> DEVICE = AttributeKey.stringKey("dma.device");
  static final AttributeKey<Long> LENGTH = AttributeKey.longKey("dma.length");
  static final AttributeKey<Long> CLIENT = AttributeKey.longKey("dma.client_id");
  static final AttributeKey<Long> FABRIC_ERRNO = AttributeKey.longKey("dma.fabric_errno");
  static final AttributeKey<Long> PROVIDER_ERRNO = AttributeKey.longKey("dma.provider_errno");

  /** Telemetry that records nothing. */
  public static final Telemetry OFF = new Telemetry(OpenTelemetry.noop(), "", "", false);

  final boolean tracing;
  final boolean metrics;
  final boolean tracePasses;
  final Tracer tracer;
  final Attributes device;
  final Attributes writeDone;
  final Attributes writeFailed;
  final Attributes readDone;
  final Attributes readFailed;
  final Attributes write;
  final Attributes read;
  final Attributes fabricError;
  final Attributes transferError;
  final LongCounter transfers;
  final LongCounter bytes;
  final LongCounter errors;
  final LongCounter stalls;
  final LongCounter deadlineFailures;
  final LongCounter completionDeadlineFailures;
  final LongCounter endpointResets;
  final DoubleHistogram latency;
  private final Meter meter;
  private final List<AutoCloseable> callbacks = new ArrayList<>();

  /**
   * Instruments for one service.
   *
   * @param openTelemetry the application's OpenTelemetry (the global one by default)
   * @param provider the provider name, an attribute of every metric
   * @param device the endpoint's device or domain, an attribute of every metric
   * @param tracePasses whether to record a {@code dma.worker_pass} span for every pass that moved
   *     something (a debug aid; costly)
   */
  public Telemetry(
      OpenTelemetry openTelemetry, String provider, String device, boolean tracePasses) {
    this.tracing = openTelemetry.getTracerProvider() != TracerProvider.noop();
    this.metrics = openTelemetry.getMeterProvider() != MeterProvider.noop();
    this.tracePasses = tracing && tracePasses;
    this.tracer = openTelemetry.getTracer(SCOPE);
    this.meter = openTelemetry.getMeter(SCOPE);
    this.device = Attributes.of(PROVIDER, provider, DEVICE, device);
    this.write = with("write", null);
    this.read = with("read", null);
    this.writeDone = with("write", "done");
    this.writeFailed = with("write", "failed");
    this.readDone = with("read", "done");
    this.readFailed = with("read", "failed");
    this.fabricError = this.device.toBuilder().put(KIND, "fabric").build();
    this.transferError = this.device.toBuilder().put(KIND, "transfer").build();
    this.transfers =
        meter
            .counterBuilder("dma.transfers")
            .setDescription("Transfers completed, by direction and outcome")
            .build();
    this.bytes =
        meter
            .counterBuilder("dma.bytes")
            .setUnit("By")
            .setDescription("Bytes moved, by direction and outcome")
            .build();
    this.errors =
        meter
            .counterBuilder("dma.errors")
            .setDescription("Failed transfers, by error kind")
            .build();
    this.stalls =
        meter
            .counterBuilder("dma.eagain_stalls")
            .setDescription("Posts the provider refused with -FI_EAGAIN")
            .build();
    this.deadlineFailures =
        meter
            .counterBuilder("dma.progress_deadline_failures")
            .setDescription("Transfers failed at the progress deadline")
            .build();
    this.completionDeadlineFailures =
        meter
            .counterBuilder("dma.completion_deadline_failures")
            .setDescription("Posted transfers failed at the completion deadline")
            .build();
    this.endpointResets =
        meter
            .counterBuilder("dma.endpoint_resets")
            .setDescription("Endpoint resets that recovered from completions that did not come")
            .build();
    this.latency =
        meter
            .histogramBuilder("dma.transfer.duration")
            .setUnit("s")
            .setDescription("Time from post to completion")
            .build();
  }

  private Attributes with(String direction, String outcome) {
    var builder = device.toBuilder().put(DIRECTION, direction);
    if (outcome != null) {
      builder.put(OUTCOME, outcome);
    }
    return builder.build();
  }

  /**
   * Whether spans are recorded.
   *
   * @return whether a tracer provider is installed
   */
  public boolean tracing() {
    return tracing;
  }

  /**
   * Whether metrics are recorded.
   *
   * @return whether a meter provider is installed
   */
  public boolean metrics() {
    return metrics;
  }

  /**
   * Registers a gauge read at collection time (in flight, pending, peers, pinned bytes...).
   *
   * @param name the instrument name
   * @param description what it measures
   * @param unit its unit, or empty
   * @param reader reads the value; called on the SDK's collection thread, so it reads volatile or
   *     atomic state only
   */
  public void gauge(
      String name, String description, String unit, java.util.function.LongSupplier reader) {
    if (!metrics) {
      return;
    }
    Consumer<ObservableLongMeasurement> callback =
        measurement -> measurement.record(reader.getAsLong(), device);
    callbacks.add(
        meter
            .gaugeBuilder(name)
            .ofLongs()
            .setDescription(description)
            .setUnit(unit)
            .buildWithCallback(callback));
  }

  /**
   * Registers a monotonic counter read at collection time (registration-cache hits...).
   *
   * @param name the instrument name
   * @param description what it counts
   * @param reader reads the running total; volatile or atomic state only
   */
  public void observedCounter(
      String name, String description, java.util.function.LongSupplier reader) {
    if (!metrics) {
      return;
    }
    callbacks.add(
        meter
            .counterBuilder(name)
            .setDescription(description)
            .buildWithCallback(measurement -> measurement.record(reader.getAsLong(), device)));
  }

  /** Unregisters the gauges, so a closed service stops reporting. */
  public void close() {
    for (AutoCloseable callback : callbacks) {
      try {
        callback.close();
      } catch (Exception ignored) {
        // Closing an observable instrument only unregisters its callback; nothing to recover.
      }
    }
    callbacks.clear();
  }
}
