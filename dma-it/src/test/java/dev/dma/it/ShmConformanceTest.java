package dev.dma.it;

import dev.dma.api.DmaConfiguration;
import dev.dma.api.DmaException;
import dev.dma.libfabric.Libfabric;
import java.nio.charset.StandardCharsets;
import java.time.Duration;

/**
 * The conformance suite on libfabric's {@code shm} provider. It joins the suite now that the
 * completion deadline bounds the writes shm never completes (a wrong key), that the advertised
 * length refuses out-of-range transfers before posting (shm checks no bounds) and that a closed
 * same-process peer is never removed or posted to (it would crash the process).
 */
class ShmConformanceTest extends ConformanceSuite {
  /** A well-formed shm name no process has: the pid is above any pid_max. */
  private static final byte[] NO_SUCH_ENDPOINT =
      "fi_shm://999999999:0:0\0".getBytes(StandardCharsets.US_ASCII);

  @Override
  protected DmaConfiguration configuration() {
    // No bind: shm then names endpoints by pid, unique per process. A short completion deadline:
    // the wrong-key case waits it out.
    return DmaConfiguration.builder()
        .providers("libfabric:shm")
        .completionDeadline(Duration.ofSeconds(2))
        .build();
  }

  @Override
  protected byte[] deadPeerAddress() {
    return NO_SUCH_ENDPOINT.clone();
  }

  /**
   * shm up to 2.4 never completes a write whose key the target refuses, so the completion deadline
   * fails it; from 2.5 dma's write check (a fetching atomic) finds the refusal (shm itself reports
   * the write done).
   */
  @Override
  protected DmaException.Reason refusedAccessReason() {
    return Libfabric.version() >= (2 << 16 | 5)
        ? DmaException.Reason.ACCESS_DENIED
        : DmaException.Reason.DEADLINE;
  }

  /**
   * shm refuses a write into a region exposed read-only, the way it refuses a wrong key: it never
   * completes up to 2.4 (so the completion deadline fails it, see {@link #refusedAccessReason()})
   * and is found by dma's write check from 2.5; reads still ignore keys and bounds.
   */
  @Override
  protected boolean enforcesAccess() {
    return true;
  }
}
