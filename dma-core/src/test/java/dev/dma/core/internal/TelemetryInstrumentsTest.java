package dev.dma.core.internal;

import static dev.dma.core.internal.RecordingOpenTelemetry.DEVICE_ATTRIBUTES;
import static dev.dma.core.internal.RecordingOpenTelemetry.longPoints;
import static dev.dma.core.internal.RecordingOpenTelemetry.metric;
import static dev.dma.core.internal.RecordingOpenTelemetry.value;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.opentelemetry.api.OpenTelemetry;
import io.opentelemetry.sdk.metrics.data.MetricData;
import io.opentelemetry.sdk.metrics.data.MetricDataType;
import java.util.Collection;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The service's instruments on their own: each half is on exactly when its SDK provider is
 * installed (the worker skips every telemetry step otherwise), the worker-pass span only when asked
 * and traced, and a registered gauge or observed counter reports its reader's value, under the
 * device's attributes, at each collection until {@link Telemetry#close()}.
 */
@Timeout(value = 10, unit = TimeUnit.SECONDS)
class TelemetryInstrumentsTest {
  @Test
  void eachHalfIsOnExactlyWhenItsProviderIsInstalled() {
    assertFalse(Telemetry.OFF.tracing());
    assertFalse(Telemetry.OFF.metrics());
    Telemetry noop = new Telemetry(OpenTelemetry.noop(), "fake", "dev0", true);
    assertFalse(noop.tracing());
    assertFalse(noop.metrics());
    assertFalse(noop.tracePasses, "no pass spans without a tracer, even when asked");
    for (boolean tracing : new boolean[] {false, true}) {
      for (boolean metrics : new boolean[] {false, true}) {
        try (RecordingOpenTelemetry sdk = new RecordingOpenTelemetry(tracing, metrics)) {
          Telemetry asked = sdk.telemetry(true);
          assertEquals(tracing, asked.tracing(), "tracing " + tracing + ", metrics " + metrics);
          assertEquals(metrics, asked.metrics(), "tracing " + tracing + ", metrics " + metrics);
          assertEquals(tracing, asked.tracePasses, "pass spans when asked and traced");
          assertFalse(sdk.telemetry(false).tracePasses, "pass spans only when asked");
        }
      }
    }
  }

  /**
   * A gauge and an observed counter report their readers at each collection, and nothing once
   * closed; closing again closes nothing twice (the SDK warns when an instrument is).
   */
  @Test
  void aGaugeReportsItsReaderAtEachCollectionUntilClosed() {
    CapturedWarnings warnings = new CapturedWarnings("io.opentelemetry");
    warnings.start();
    try (RecordingOpenTelemetry sdk = new RecordingOpenTelemetry(false, true)) {
      Telemetry telemetry = sdk.telemetry(false);
      AtomicLong level = new AtomicLong(5);
      AtomicLong total = new AtomicLong(40);
      telemetry.gauge("test.level", "A level", "By", level::get);
      telemetry.observedCounter("test.total", "A running total", total::get);

      Collection<MetricData> first = sdk.metrics();
      MetricData gauge = metric(first, "test.level");
      assertEquals(MetricDataType.LONG_GAUGE, gauge.getType());
      assertEquals("A level", gauge.getDescription());
      assertEquals("By", gauge.getUnit());
      assertEquals(5, value(first, "test.level", DEVICE_ATTRIBUTES));
      MetricData counter = metric(first, "test.total");
      assertEquals(MetricDataType.LONG_SUM, counter.getType());
      assertTrue(counter.getLongSumData().isMonotonic());
      assertEquals("A running total", counter.getDescription());
      assertEquals(40, value(first, "test.total", DEVICE_ATTRIBUTES));

      level.set(3);
      total.set(46);
      Collection<MetricData> second = sdk.metrics();
      assertEquals(3, value(second, "test.level", DEVICE_ATTRIBUTES));
      assertEquals(46, value(second, "test.total", DEVICE_ATTRIBUTES));

      telemetry.close();
      Collection<MetricData> closed = sdk.metrics();
      assertEquals(List.of(), longPoints(closed, "test.level"));
      assertEquals(List.of(), longPoints(closed, "test.total"));
      telemetry.close();
      assertEquals(List.of(), warnings.messages(), "a second close closed an instrument again");
    } finally {
      warnings.stop();
    }
  }
}
