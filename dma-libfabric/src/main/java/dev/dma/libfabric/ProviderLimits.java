package dev.dma.libfabric;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.jspecify.annotations.Nullable;

/**
 * The limits on how many clients one endpoint can serve, per provider, in words a failure message
 * and {@code dma-bench info} can show: what the limit is, its value where it is known, and the
 * setting or {@code ulimit} that raises it. Read from libfabric's source (1.17, 2.1, 2.6) and the
 * process's own limits. Stateless; failure paths and diagnostics only, any thread.
 */
public final class ProviderLimits {
  /** shm's peers per endpoint: {@code SMR_MAX_PEERS}, compiled into libfabric (1.17 to 2.6). */
  public static final int SHM_MAX_PEERS = 256;

  /** rxd's default peer count ({@code FI_OFI_RXD_MAX_PEERS}), the size of its address vector. */
  public static final int RXD_DEFAULT_MAX_PEERS = 1024;

  /** libfabric's default {@code FI_UNIVERSE_SIZE}, which rxm sizes its completion queues by. */
  public static final int DEFAULT_UNIVERSE_SIZE = 1024;

  private ProviderLimits() {}

  /**
   * What limits the peers of an endpoint on {@code provider}, for a failed {@code fi_av_insert};
   * null when the provider names none.
   *
   * @param provider the provider name, for example {@code shm}
   * @param livePeers the peers the endpoint holds now
   * @return the sentence, or null
   */
  public static @Nullable String peerLimit(String provider, int livePeers) {
    if (Quirks.shm(provider)) {
      return "shm serves at most "
          + SHM_MAX_PEERS
          + " peers per endpoint (SMR_MAX_PEERS, fixed when libfabric is built) and this endpoint"
          + " holds "
          + livePeers
          + "; spread the clients over more services (a FabricServiceGroup opens one endpoint"
          + " per device) or serve them over a network provider";
    }
    if (Quirks.rxd(provider)) {
      return "rxd's address vector holds at most FI_OFI_RXD_MAX_PEERS peers ("
          + env("FI_OFI_RXD_MAX_PEERS", RXD_DEFAULT_MAX_PEERS)
          + " here) and this endpoint holds "
          + livePeers
          + "; raise FI_OFI_RXD_MAX_PEERS in the server's environment";
    }
    return null;
  }

  /**
   * The file-descriptor limit, for a failure with {@code EMFILE} or {@code ENFILE}: on tcp and
   * tcp;ofi_rxm each connected peer holds one descriptor.
   *
   * @return the sentence
   */
  public static String descriptorLimit() {
    long[] limits = openFilesLimits();
    String values =
        limits == null
            ? "unknown"
            : "soft " + limits[0] + ", hard " + (limits[1] < 0 ? "unlimited" : limits[1]);
    return "the process ran out of file descriptors (RLIMIT_NOFILE: "
        + values
        + "); tcp and tcp;ofi_rxm hold one per connected peer: raise the soft limit"
        + " (`ulimit -n`, or LimitNOFILE= for a systemd service) above the number of clients plus"
        + " what the application uses";
  }

  /**
   * Every limit this process can know for {@code provider}, one line each, for {@code dma-bench
   * info}.
   *
   * @param provider the provider name
   * @return the lines (empty when there is nothing to say)
   */
  public static List<String> known(String provider) {
    List<String> lines = new ArrayList<>();
    if (Quirks.shm(provider)) {
      lines.add("peers per endpoint: " + SHM_MAX_PEERS + " (SMR_MAX_PEERS, compiled in)");
    }
    if (Quirks.rxd(provider)) {
      lines.add(
          "peers per endpoint: "
              + env("FI_OFI_RXD_MAX_PEERS", RXD_DEFAULT_MAX_PEERS)
              + " (FI_OFI_RXD_MAX_PEERS)");
    }
    if (Quirks.rxm(provider)) {
      lines.add(
          "universe size: "
              + env("FI_UNIVERSE_SIZE", DEFAULT_UNIVERSE_SIZE)
              + " (FI_UNIVERSE_SIZE: rxm sizes its completion queue for this many peers)");
    }
    if (Quirks.overTcp(provider)) {
      long[] limits = openFilesLimits();
      lines.add(
          "file descriptors: "
              + (limits == null ? "unknown" : "soft " + limits[0] + ", hard " + limits[1])
              + " (one per connected peer; ulimit -n)");
    }
    return lines;
  }

  /**
   * The value of a numeric environment variable, or {@code fallback} when unset or not a number.
   */
  private static long env(String name, long fallback) {
    String value = System.getenv(name);
    if (value == null) {
      return fallback;
    }
    try {
      return Long.parseLong(value.trim());
    } catch (NumberFormatException notANumber) {
      return fallback;
    }
  }

  /** {soft, hard} of RLIMIT_NOFILE from /proc/self/limits (-1 for unlimited), or null. */
  private static long @Nullable [] openFilesLimits() {
    try {
      for (String line : Files.readAllLines(Path.of("/proc/self/limits"))) {
        if (line.startsWith("Max open files")) {
          String[] words = line.substring("Max open files".length()).trim().split("\\s+");
          return new long[] {number(words[0]), number(words[1])};
        }
      }
    } catch (IOException | RuntimeException unreadable) {
      return null;
    }
    return null;
  }

  private static long number(String word) {
    return word.equals("unlimited") ? -1 : Long.parseLong(word);
  }
}
