package dev.dma.bench;

import java.time.Duration;
import java.util.List;
import java.util.Optional;

/**
 * What one {@code run} or {@code serve} measures. Immutable.
 *
 * @param provider the dma provider name
 * @param bind the source address for real providers, if any
 * @param ops {@code write} and/or {@code read}, in order
 * @param sizes transfer sizes, in order
 * @param window transfers kept outstanding
 * @param duration measured time per point (when {@code iterations} is 0)
 * @param iterations measured transfers per point, or 0 to measure for {@code duration}
 * @param warmup unmeasured time before each point
 * @param clients passive targets the window is spread over
 * @param checksum whether transfers ask for CRC-32C
 * @param processes 1 (targets in this JVM) or 2 (targets in a child JVM)
 * @param connect {@code host:port} of a remote {@code dma-bench target}, or empty
 * @param pasted advertisements given on the command line instead of a control socket
 * @param targetIdle the passive targets' {@code target_idle}, or empty for the configuration's
 *     default
 */
public record Plan(
    String provider,
    Optional<String> bind,
    List<String> ops,
    List<Long> sizes,
    int window,
    Duration duration,
    long iterations,
    Duration warmup,
    int clients,
    boolean checksum,
    int processes,
    Optional<String> connect,
    List<Control.TargetAd> pasted,
    Optional<Duration> targetIdle) {

  /**
   * The largest size, which every buffer must hold.
   *
   * @return bytes
   */
  public long maxSize() {
    long max = 1;
    for (long size : sizes) {
      max = Math.max(max, size);
    }
    return max;
  }
}
