package dev.dma.bench;

import java.util.Arrays;

/**
 * A preallocated log-linear histogram of non-negative longs (latencies in nanoseconds): exact below
 * {@value #SUB_BUCKETS}, and within 1/{@value #SUB_BUCKETS} (0.8 %) of the true value above, up to
 * 2<sup>{@value #MAX_EXPONENT}</sup> (larger values land in the last bucket; the exact maximum is
 * kept aside).
 *
 * <p>{@link #record(long)} does not allocate and costs a leading-zero count and an array increment,
 * so it can sit on the completion path of millions of transfers per second; HdrHistogram does the
 * same thing with more options, but is not a dependency worth taking for one method.
 *
 * <p>Not thread-safe: one writer at a time (the benchmark records under its own lock).
 */
public final class LatencyHistogram {
  /** Sub-bucket bits: 2^7 linear buckets per power of two. */
  static final int SUB_BITS = 7;

  /** Linear buckets per power of two. */
  static final int SUB_BUCKETS = 1 << SUB_BITS;

  /** The largest power of two with its own buckets: 2^40 ns is about 18 minutes. */
  static final int MAX_EXPONENT = 40;

  private final long[] counts = new long[(MAX_EXPONENT - SUB_BITS + 2) * SUB_BUCKETS];
  private long count;
  private long sum;
  private long min = Long.MAX_VALUE;
  private long max;

  /** An empty histogram. */
  public LatencyHistogram() {}

  /**
   * Records one value; negative values (a clock step) count as 0.
   *
   * @param value the value, in nanoseconds for latencies
   */
  public void record(long value) {
    long v = Math.max(0, value);
    counts[index(v)]++;
    count++;
    sum += v;
    if (v < min) {
      min = v;
    }
    if (v > max) {
      max = v;
    }
  }

  /** Forgets every value. */
  public void reset() {
    Arrays.fill(counts, 0);
    count = 0;
    sum = 0;
    min = Long.MAX_VALUE;
    max = 0;
  }

  /**
   * How many values were recorded.
   *
   * @return the count
   */
  public long count() {
    return count;
  }

  /**
   * The exact largest value.
   *
   * @return the maximum, 0 when empty
   */
  public long max() {
    return max;
  }

  /**
   * The exact smallest value.
   *
   * @return the minimum, 0 when empty
   */
  public long min() {
    return count == 0 ? 0 : min;
  }

  /**
   * The exact mean.
   *
   * @return the mean, 0 when empty
   */
  public double mean() {
    return count == 0 ? 0 : (double) sum / count;
  }

  /**
   * The nearest-rank percentile: the value at rank {@code ceil(p / 100 * count)} of the sorted
   * values, to the bucket's precision (its midpoint, never beyond the exact min and max).
   *
   * @param percentile in {@code [0, 100]}
   * @return the value, 0 when empty
   */
  public long percentile(double percentile) {
    if (percentile < 0 || percentile > 100 || Double.isNaN(percentile)) {
      throw new IllegalArgumentException("percentile must be in [0, 100], not " + percentile);
    }
    if (count == 0) {
      return 0;
    }
    long rank = Math.max(1, (long) Math.ceil(percentile / 100.0 * count));
    long seen = 0;
    for (int i = 0; i < counts.length; i++) {
      seen += counts[i];
      if (seen >= rank) {
        if (i == counts.length - 1) {
          return max; // the overflow bucket has no upper bound; the exact max is the honest answer
        }
        long low = lowerBound(i);
        long width = lowerBound(i + 1) - low;
        long mid = low + (width - 1) / 2;
        return Math.min(max, Math.max(min, mid));
      }
    }
    return max;
  }

  /**
   * Adds another histogram's values to this one.
   *
   * @param other the histogram to add
   */
  public void add(LatencyHistogram other) {
    for (int i = 0; i < counts.length; i++) {
      counts[i] += other.counts[i];
    }
    count += other.count;
    sum += other.sum;
    min = Math.min(min, other.min);
    max = Math.max(max, other.max);
  }

  /** The number of buckets. */
  static int bucketCount() {
    return (MAX_EXPONENT - SUB_BITS + 2) * SUB_BUCKETS;
  }

  static int index(long value) {
    if (value < SUB_BUCKETS) {
      return (int) value;
    }
    int exponent = 63 - Long.numberOfLeadingZeros(value);
    if (exponent > MAX_EXPONENT) {
      return (MAX_EXPONENT - SUB_BITS + 2) * SUB_BUCKETS - 1;
    }
    int shift = exponent - SUB_BITS;
    int mantissa = (int) (value >>> shift) - SUB_BUCKETS;
    return ((shift + 1) << SUB_BITS) + mantissa;
  }

  static long lowerBound(int index) {
    int group = index >>> SUB_BITS;
    long sub = index & (SUB_BUCKETS - 1);
    if (group == 0) {
      return sub;
    }
    return (SUB_BUCKETS + sub) << (group - 1);
  }
}
