package dev.dma.bench;

/**
 * The measurement of one operation at one size: what a table row, a CSV line and a JSON object
 * show. Immutable.
 *
 * @param provider the dma provider name ({@code tcp}, {@code fake}, {@code libfabric:shm})
 * @param fabric the libfabric provider underneath, as the endpoint describes itself ({@code net},
 *     {@code tcp;ofi_rxm}), the name to give the C anchor's {@code -p}
 * @param op {@code write} or {@code read}
 * @param sizeBytes bytes per transfer
 * @param window transfers kept outstanding
 * @param processes 1 (target in this JVM) or 2 (target in its own process)
 * @param transfers transfers completed successfully in the measured interval
 * @param errors transfers that failed in the measured interval
 * @param seconds the measured interval
 * @param p50Nanos median latency, submit to completion
 * @param p99Nanos 99th percentile latency
 * @param maxNanos largest latency
 * @param meanNanos mean latency (the C anchor's {@code avg_latency_us})
 * @param firstError the first failure's message, or empty
 */
public record Result(
    String provider,
    String fabric,
    String op,
    long sizeBytes,
    int window,
    int processes,
    long transfers,
    long errors,
    double seconds,
    long p50Nanos,
    long p99Nanos,
    long maxNanos,
    double meanNanos,
    String firstError) {

  /**
   * Throughput in MB/s, MB being 10<sup>6</sup> bytes as in the C anchor.
   *
   * @return the throughput
   */
  public double megabytesPerSecond() {
    return seconds <= 0 ? 0 : transfers * (double) sizeBytes / seconds / 1e6;
  }

  /**
   * Completed transfers per second.
   *
   * @return the rate
   */
  public double transfersPerSecond() {
    return seconds <= 0 ? 0 : transfers / seconds;
  }
}
