package dev.dma.core.internal.regions;

import java.io.IOException;
import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * Derives the pinned-bytes bound of a {@link LocalRegions} from the configured {@code
 * max_pinned_bytes} and the process's {@code RLIMIT_MEMLOCK}, read from {@code /proc/self/limits}
 * (no native code).
 *
 * <p>Why: the kernel refuses a registration ({@code ibv_reg_mr}, hence {@code fi_mr_reg} with
 * {@code -FI_ENOMEM}) once the process's pinned pages would exceed {@code RLIMIT_MEMLOCK}, unless
 * it holds {@code CAP_IPC_LOCK}. Bounding the cache below that limit makes it evict idle cached
 * spans before the kernel says no, instead of failing transfers. Stateless; any thread.
 */
public final class PinnedMemoryLimit {
  /** {@code CAP_IPC_LOCK}'s bit in {@code CapEff}: with it the kernel ignores RLIMIT_MEMLOCK. */
  private static final int CAP_IPC_LOCK = 14;

  private PinnedMemoryLimit() {}

  /**
   * The bound to pass to {@link LocalRegions#LocalRegions}: {@code configured} (0 meaning no bound
   * of its own), lowered to {@code RLIMIT_MEMLOCK}'s soft limit when that is finite and the process
   * lacks {@code CAP_IPC_LOCK}.
   *
   * @param configuredMaxPinnedBytes {@code DmaConfiguration.maxPinnedBytes()}: 0 for the default,
   *     else a positive byte count
   * @return the bound, positive; {@link Long#MAX_VALUE} for unbounded
   * @throws IllegalArgumentException if {@code configuredMaxPinnedBytes} is negative
   */
  public static long bound(long configuredMaxPinnedBytes) {
    return bound(configuredMaxPinnedBytes, read("/proc/self/limits"), read("/proc/self/status"));
  }

  /**
   * {@link #bound(long)} over given texts of {@code /proc/self/limits} and {@code
   * /proc/self/status}, either possibly null (unreadable: then no limit is assumed); for tests.
   *
   * @param configuredMaxPinnedBytes 0 for the default, else a positive byte count
   * @param limits the text of {@code /proc/self/limits}, or null
   * @param status the text of {@code /proc/self/status}, or null
   * @return the bound, positive; {@link Long#MAX_VALUE} for unbounded
   */
  static long bound(long configuredMaxPinnedBytes, String limits, String status) {
    if (configuredMaxPinnedBytes < 0) {
      throw new IllegalArgumentException(
          "max_pinned_bytes must not be negative, not " + configuredMaxPinnedBytes);
    }
    long configured = configuredMaxPinnedBytes == 0 ? Long.MAX_VALUE : configuredMaxPinnedBytes;
    if (status != null && hasCapability(status, CAP_IPC_LOCK)) {
      return configured;
    }
    long memlock = memlockSoftLimit(limits);
    // A limit of 0 would make every registration fail; keep the bound positive and let the
    // registration's own -FI_ENOMEM explain itself.
    return memlock > 0 ? Math.min(configured, memlock) : configured;
  }

  /**
   * The soft "Max locked memory" limit in bytes from the text of {@code /proc/self/limits}.
   *
   * @param limits the text, or null
   * @return the limit, or {@link Long#MAX_VALUE} when unlimited, absent or unparsable
   */
  static long memlockSoftLimit(String limits) {
    if (limits == null) {
      return Long.MAX_VALUE;
    }
    for (String line : limits.split("\n")) {
      if (line.startsWith("Max locked memory")) {
        String[] fields = line.substring("Max locked memory".length()).strip().split("\\s+");
        if (fields.length == 0 || fields[0].equals("unlimited")) {
          return Long.MAX_VALUE;
        }
        try {
          return Long.parseLong(fields[0]);
        } catch (NumberFormatException unparsable) {
          return Long.MAX_VALUE;
        }
      }
    }
    return Long.MAX_VALUE;
  }

  static boolean hasCapability(String status, int capability) {
    for (String line : status.split("\n")) {
      if (line.startsWith("CapEff:")) {
        try {
          return new BigInteger(line.substring("CapEff:".length()).strip(), 16).testBit(capability);
        } catch (NumberFormatException unparsable) {
          return false;
        }
      }
    }
    return false;
  }

  private static String read(String file) {
    try {
      return Files.readString(Path.of(file), StandardCharsets.US_ASCII);
    } catch (IOException | RuntimeException unreadable) {
      // Not Linux, or /proc not mounted: nothing to derive a bound from.
      return null;
    }
  }
}
