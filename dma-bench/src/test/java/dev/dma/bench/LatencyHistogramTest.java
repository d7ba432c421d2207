package dev.dma.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Arrays;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

class LatencyHistogramTest {
  private static long nearestRank(long[] sorted, double p) {
    int rank = (int) Math.max(1, Math.ceil(p / 100.0 * sorted.length));
    return sorted[rank - 1];
  }

  @Test
  void percentilesMatchASortedArrayWithinOneBucket() {
    SplittableRandom random = new SplittableRandom(42);
    for (int round = 0; round < 5; round++) {
      int n = 1 + random.nextInt(200_000);
      long[] values = new long[n];
      LatencyHistogram histogram = new LatencyHistogram();
      for (int i = 0; i < n; i++) {
        // Log-uniform from 1 ns to ~1 s: every bucket group gets exercised.
        values[i] = (long) Math.exp(random.nextDouble() * Math.log(1e9));
        histogram.record(values[i]);
      }
      Arrays.sort(values);
      for (double p : new double[] {0, 1, 25, 50, 90, 99, 99.9, 100}) {
        long exact = nearestRank(values, p);
        long approx = histogram.percentile(p);
        double tolerance = Math.max(1, exact / (double) LatencyHistogram.SUB_BUCKETS);
        assertTrue(
            Math.abs(approx - exact) <= tolerance,
            "p" + p + ": exact " + exact + ", histogram " + approx + " (n=" + n + ")");
      }
      assertEquals(values[n - 1], histogram.max());
      assertEquals(values[0], histogram.min());
      assertEquals(n, histogram.count());
      assertEquals(
          Arrays.stream(values).average().orElseThrow(), histogram.mean(), 1e-6 * values[n - 1]);
    }
  }

  @Test
  void smallValuesAreExact() {
    LatencyHistogram histogram = new LatencyHistogram();
    for (int v = 0; v < LatencyHistogram.SUB_BUCKETS; v++) {
      histogram.record(v);
    }
    assertEquals(63, histogram.percentile(50));
    assertEquals(LatencyHistogram.SUB_BUCKETS - 1, histogram.percentile(100));
  }

  @Test
  void bucketsAreContiguous() {
    for (int i = 0; i < LatencyHistogram.bucketCount() - 1; i++) {
      long low = LatencyHistogram.lowerBound(i);
      assertEquals(i, LatencyHistogram.index(low), "index of lower bound of " + i);
      assertEquals(i, LatencyHistogram.index(LatencyHistogram.lowerBound(i + 1) - 1));
    }
  }

  @Test
  void hugeAndNegativeValuesAreClamped() {
    LatencyHistogram histogram = new LatencyHistogram();
    histogram.record(Long.MAX_VALUE);
    histogram.record(-5);
    assertEquals(0, histogram.min());
    assertEquals(Long.MAX_VALUE, histogram.max());
    assertEquals(Long.MAX_VALUE, histogram.percentile(100));
  }

  @Test
  void emptyAndResetAnswerZero() {
    LatencyHistogram histogram = new LatencyHistogram();
    assertEquals(0, histogram.percentile(99));
    histogram.record(1000);
    histogram.reset();
    assertEquals(0, histogram.count());
    assertEquals(0, histogram.percentile(50));
    assertThrows(IllegalArgumentException.class, () -> histogram.percentile(101));
  }
}
