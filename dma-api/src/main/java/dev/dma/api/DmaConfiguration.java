package dev.dma.api;

import java.io.IOException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Properties;
import org.jspecify.annotations.Nullable;

/**
 * How a fabric service opens its endpoint and paces its worker. Immutable and validated at
 * construction; build one with {@link #builder()} or load one with {@link #load(Path)}.
 *
 * <p>Property keys (unknown keys are rejected, so a misspelling never passes silently):
 *
 * <table>
 *   <caption>Configuration keys</caption>
 *   <tr><th>key</th><th>default</th><th>meaning</th></tr>
 *   <tr><td>{@code providers}</td><td>(none)</td><td>comma-separated provider names; only the
 *       first is used, there is no fallback to the second. None named: the highest-priority
 *       provider on the class path that is available here (the fake only when it is the only one
 *       installed)</td></tr>
 *   <tr><td>{@code interfaces}</td><td>(none)</td><td>comma-separated domain names; the endpoint
 *       pins to the first, or takes the provider's first domain</td></tr>
 *   <tr><td>{@code bind}</td><td>(none)</td><td>source node for {@code fi_getinfo} (for example
 *       {@code 127.0.0.1} for tcp); leave unset for EFA</td></tr>
 *   <tr><td>{@code max_in_flight}</td><td>64</td><td>posted, unreaped operations per worker, at
 *       least 1, clamped to the provider's transmit depth</td></tr>
 *   <tr><td>{@code crc_pool_threads}</td><td>2</td><td>threads of the checksum pool</td></tr>
 *   <tr><td>{@code progress_deadline}</td><td>{@code 1s}</td><td>how long one operation may be
 *       refused with {@code -FI_EAGAIN} before it fails; {@code 50ms}, {@code 2s} or ISO-8601
 *       {@code PT2S}</td></tr>
 *   <tr><td>{@code completion_deadline}</td><td>{@code 30s}</td><td>how long one posted operation
 *       may wait for its completion before it fails with {@link DmaException.Reason#DEADLINE}, its
 *       peer is marked unreachable and the endpoint is recovered; {@code 0} turns it off (then a
 *       silent partition holds a transfer until the kernel's TCP retransmissions give up, about 15
 *       minutes)</td></tr>
 *   <tr><td>{@code max_pending}</td><td>65536</td><td>transfers a worker holds accepted but not yet
 *       posted: once this many plus the in-flight cap are outstanding (accepted, not completed), a
 *       submit is refused as full (backpressure) rather than queued</td></tr>
 *   <tr><td>{@code close_timeout}</td><td>{@code 10s}</td><td>how long {@code close()} waits for
 *       posted operations before it recovers the endpoint and fails what remains</td></tr>
 *   <tr><td>{@code max_pinned_bytes}</td><td>0</td><td>the most bytes one endpoint keeps registered
 *       for local operands (cached spans, registered regions, in-flight operands); idle cached
 *       spans are evicted, least recently used first, to stay under it, and a transfer whose
 *       operand does not fit beside those in flight waits for one of them to finish (failing as
 *       {@link DmaException.Reason#BACKPRESSURE} after {@code progress_deadline}, or at once when
 *       none is in flight). {@code 0} means as much as
 *       {@code RLIMIT_MEMLOCK} ({@code ulimit -l}) allows, unbounded when that is unlimited or the
 *       process holds {@code CAP_IPC_LOCK}; a positive value is still capped by that limit. A whole
 *       number of bytes, optionally with a binary suffix: {@code 512m}, {@code 64GiB}</td></tr>
 *   <tr><td>{@code target_idle}</td><td>{@code 100ms}</td><td>how an idle {@code PassiveTarget}
 *       waits between progress calls: after about a millisecond of spinning and yielding it
 *       sleeps, at most this long at a time, on a wait object that wakes it the moment a peer's
 *       RMA arrives (tcp, the fake) or a call is made on it, so an idle target costs next to no
 *       CPU and the sleep delays no transfer. {@code 0} spins always (one busy core). Providers
 *       without such a wait object (shm, efa) keep yielding instead of sleeping, whatever is
 *       set, since a blind sleep would delay every incoming transfer by it</td></tr>
 * </table>
 *
 * @param providers the provider names given, of which only the first is used; empty when none is
 *     named (the service then selects the highest-priority available provider)
 * @param interfaces domain names to pin to; possibly empty
 * @param bind the source node, or {@code null} for none (the provider's default: 127.0.0.1 for tcp,
 *     every device for EFA)
 * @param maxInFlight the per-worker cap on posted, unreaped operations
 * @param crcPoolThreads threads of the checksum pool
 * @param progressDeadline how long posts to a peer may keep getting {@code -FI_EAGAIN} with nothing
 *     else in flight before the peer is judged unreachable (with other transfers in flight, a
 *     refused post waits up to {@code completionDeadline} instead: a full queue is not a dead peer)
 * @param maxPinnedBytes the per-endpoint bound on registered bytes, or 0 for the default (derived
 *     from {@code RLIMIT_MEMLOCK}); never negative
 * @param completionDeadline how long a posted operation may wait for its completion, or {@link
 *     Duration#ZERO} for no deadline
 * @param maxPending the most transfers a worker holds accepted but not yet posted
 * @param closeTimeout how long {@code close()} waits for posted operations
 * @param targetIdle the longest a passive target sleeps between progress calls once idle, or {@link
 *     Duration#ZERO} to spin always
 */
public record DmaConfiguration(
    List<String> providers,
    List<String> interfaces,
    @Nullable String bind,
    int maxInFlight,
    int crcPoolThreads,
    Duration progressDeadline,
    long maxPinnedBytes,
    Duration completionDeadline,
    int maxPending,
    Duration closeTimeout,
    Duration targetIdle) {

  /**
   * The provider the original crate used when none was named, and {@code dma-bench}'s default. A
   * configuration naming none does not fall back to it: the service selects the highest-priority
   * available provider (of those shipped, {@code efa-direct} ranks first, then {@code efa}, {@code
   * tcp} and {@code libfabric:<prov>}; the fake is taken only when it is the only one installed).
   */
  public static final String DEFAULT_PROVIDER = "tcp";

  /** The default in-flight cap: a few tens saturate a NIC at large payloads. */
  public static final int DEFAULT_MAX_IN_FLIGHT = 64;

  /** The default checksum-pool size: two threads per EFA device hash at line rate. */
  public static final int DEFAULT_CRC_POOL_THREADS = 2;

  /** The default progress deadline. */
  public static final Duration DEFAULT_PROGRESS_DEADLINE = Duration.ofSeconds(1);

  /**
   * The default pinned-bytes bound, 0: as much as {@code RLIMIT_MEMLOCK} allows, unbounded when it
   * is unlimited. Generous on purpose: the bound exists to evict idle cached spans before the
   * kernel refuses a registration, not to ration memory.
   */
  public static final long DEFAULT_MAX_PINNED_BYTES = 0;

  /**
   * The default completion deadline, 30 s. A healthy operation completes in milliseconds: the
   * largest window at its largest size (64 in flight of 64 MiB, 4 GiB) drains in under 10 s even at
   * 4 Gbit/s, so 30 s is never reached by a slow but live peer. It is still 30 times shorter than
   * the kernel's own give-up on a silent TCP peer (about 15 minutes with {@code tcp_retries2=15}),
   * which is what a partition costs without it.
   */
  public static final Duration DEFAULT_COMPLETION_DEADLINE = Duration.ofSeconds(30);

  /**
   * The default bound on accepted, unposted transfers per worker: as many as the worker's channel
   * held before the bound existed, a few seconds of backlog at tcp's rate of small transfers.
   */
  public static final int DEFAULT_MAX_PENDING = 1 << 16;

  /**
   * The default close timeout, 10 s: long enough for every posted operation to a live peer to
   * finish, short enough that a shutdown behind a partition is not mistaken for a hang.
   */
  public static final Duration DEFAULT_CLOSE_TIMEOUT = Duration.ofSeconds(10);

  /**
   * The default {@code target_idle}, 100 ms. An arriving transfer or a call on the target ends its
   * sleep at once, so the bound only says how often an idle target looks again by itself: ten times
   * a second costs nothing measurable (a 1 ms bound cost 3 % of a core on tcp, each look being a
   * wait, a progress call and their system calls).
   */
  public static final Duration DEFAULT_TARGET_IDLE = Duration.ofMillis(100);

  /**
   * Validates and normalizes the fields: a null list becomes empty (for {@code providers}: none
   * named, so the service selects by priority) and names are stripped.
   *
   * @throws IllegalArgumentException naming the field that is invalid
   */
  public DmaConfiguration {
    providers = names(providers, "providers");
    interfaces = names(interfaces, "interfaces");
    if (bind != null && (bind.isBlank() || bind.indexOf('\0') >= 0)) {
      throw new IllegalArgumentException(
          "bind must be a host name or address, not \"" + bind + "\"");
    }
    if (maxInFlight < 1) {
      throw new IllegalArgumentException("max_in_flight must be at least 1, not " + maxInFlight);
    }
    if (crcPoolThreads < 1) {
      throw new IllegalArgumentException(
          "crc_pool_threads must be at least 1, not " + crcPoolThreads);
    }
    if (progressDeadline == null || progressDeadline.isNegative() || progressDeadline.isZero()) {
      throw new IllegalArgumentException(
          "progress_deadline must be positive, not " + progressDeadline);
    }
    if (maxPinnedBytes < 0) {
      throw new IllegalArgumentException(
          "max_pinned_bytes must not be negative, not " + maxPinnedBytes);
    }
    if (completionDeadline == null || completionDeadline.isNegative()) {
      throw new IllegalArgumentException(
          "completion_deadline must be positive, or 0 to turn it off, not " + completionDeadline);
    }
    if (maxPending < 1) {
      throw new IllegalArgumentException("max_pending must be at least 1, not " + maxPending);
    }
    if (closeTimeout == null || closeTimeout.isNegative()) {
      throw new IllegalArgumentException("close_timeout must not be negative, not " + closeTimeout);
    }
    if (targetIdle == null || targetIdle.isNegative()) {
      throw new IllegalArgumentException(
          "target_idle must be positive, or 0 to spin, not " + targetIdle);
    }
  }

  /**
   * The defaults: no provider named, no interfaces, no bind, 64 in flight, 2 checksum threads, a 1
   * s progress deadline, pinned bytes bounded only by {@code RLIMIT_MEMLOCK}, a 30 s completion
   * deadline, 65,536 pending transfers, a 10 s close timeout, idle targets sleeping at most 100 ms
   * at a time.
   *
   * @return the default configuration
   */
  public static DmaConfiguration defaults() {
    return builder().build();
  }

  /**
   * A builder starting from the defaults.
   *
   * @return the builder
   */
  public static Builder builder() {
    return new Builder();
  }

  /**
   * A builder starting from this configuration.
   *
   * @return the builder
   */
  public Builder toBuilder() {
    return new Builder()
        .providers(providers)
        .interfaces(interfaces)
        .bind(bind)
        .maxInFlight(maxInFlight)
        .crcPoolThreads(crcPoolThreads)
        .progressDeadline(progressDeadline)
        .maxPinnedBytes(maxPinnedBytes)
        .completionDeadline(completionDeadline)
        .maxPending(maxPending)
        .closeTimeout(closeTimeout)
        .targetIdle(targetIdle);
  }

  /**
   * The provider that is used: the first of {@link #providers()}.
   *
   * @return the provider name, or the empty string when none is named (the service then selects the
   *     highest-priority available provider, see {@code FabricProviders.select})
   */
  public String provider() {
    return providers.isEmpty() ? "" : providers.getFirst();
  }

  /**
   * Whether a provider is named, rather than selected by priority.
   *
   * @return whether {@link #providers()} is non-empty
   */
  public boolean namesProvider() {
    return !providers.isEmpty();
  }

  /**
   * Loads a properties file (UTF-8).
   *
   * @param file the file
   * @return the configuration
   * @throws IOException if the file cannot be read
   * @throws IllegalArgumentException for an unknown key or an invalid value, naming it
   */
  public static DmaConfiguration load(Path file) throws IOException {
    return ConfigurationProperties.load(file);
  }

  /**
   * Builds a configuration from properties; absent keys keep their defaults.
   *
   * @param properties the keys of this class's table
   * @return the configuration
   * @throws IllegalArgumentException for an unknown key or an invalid value, naming it
   */
  public static DmaConfiguration fromProperties(Properties properties) {
    return ConfigurationProperties.fromProperties(properties);
  }

  /**
   * Parses a duration written as a whole number and a unit ({@code ns}, {@code us}, {@code ms},
   * {@code s}, {@code m}, {@code h}), or in ISO-8601 ({@code PT1.5S}).
   *
   * @param key the key being parsed, for the error message
   * @param text the text
   * @return the duration
   * @throws IllegalArgumentException naming the key when the text is not a duration
   */
  public static Duration parseDuration(String key, String text) {
    return ConfigurationProperties.parseDuration(key, text);
  }

  /**
   * Parses a byte count written as a whole number with an optional binary suffix: {@code k}, {@code
   * m}, {@code g} or {@code t}, optionally followed by {@code b} or {@code ib} ({@code 512m},
   * {@code 64GiB}, {@code 4096}); {@code 1k} is 1024 bytes.
   *
   * @param key the key being parsed, for the error message
   * @param text the text
   * @return the byte count
   * @throws IllegalArgumentException naming the key when the text is not a byte count or overflows
   */
  public static long parseBytes(String key, String text) {
    return ConfigurationProperties.parseBytes(key, text);
  }

  private static List<String> names(List<String> names, String field) {
    if (names == null) {
      return List.of();
    }
    List<String> checked = new ArrayList<>(names.size());
    for (String name : names) {
      if (name == null || name.isBlank() || name.indexOf('\0') >= 0) {
        throw new IllegalArgumentException(
            field
                + " must hold non-blank names, not "
                + (name == null ? "null" : "\"" + name + "\""));
      }
      checked.add(name.strip());
    }
    return List.copyOf(checked);
  }

  /** Builds a {@link DmaConfiguration}; not thread-safe. */
  public static final class Builder {
    private List<String> providers = List.of();
    private List<String> interfaces = List.of();
    private @Nullable String bind;
    private int maxInFlight = DEFAULT_MAX_IN_FLIGHT;
    private int crcPoolThreads = DEFAULT_CRC_POOL_THREADS;
    private Duration progressDeadline = DEFAULT_PROGRESS_DEADLINE;
    private long maxPinnedBytes = DEFAULT_MAX_PINNED_BYTES;
    private Duration completionDeadline = DEFAULT_COMPLETION_DEADLINE;
    private int maxPending = DEFAULT_MAX_PENDING;
    private Duration closeTimeout = DEFAULT_CLOSE_TIMEOUT;
    private Duration targetIdle = DEFAULT_TARGET_IDLE;

    private Builder() {}

    /**
     * Sets the provider names: only the first is used, there is no fallback to the next; none (the
     * default) selects the highest-priority available provider.
     *
     * @param value provider names
     * @return this builder
     */
    public Builder providers(List<String> value) {
      this.providers = value;
      return this;
    }

    /**
     * Sets the provider names: only the first is used, there is no fallback to the next; none (the
     * default) selects the highest-priority available provider.
     *
     * @param value provider names
     * @return this builder
     */
    public Builder providers(String... value) {
      return providers(Arrays.asList(value));
    }

    /**
     * Sets the domain names to pin to.
     *
     * @param value domain names
     * @return this builder
     */
    public Builder interfaces(List<String> value) {
      this.interfaces = value;
      return this;
    }

    /**
     * Sets the domain names to pin to.
     *
     * @param value domain names
     * @return this builder
     */
    public Builder interfaces(String... value) {
      return interfaces(Arrays.asList(value));
    }

    /**
     * Sets the source node.
     *
     * @param value a host name or address, or {@code null} for none
     * @return this builder
     */
    public Builder bind(@Nullable String value) {
      this.bind = value;
      return this;
    }

    /**
     * Sets the in-flight cap.
     *
     * @param value at least 1
     * @return this builder
     */
    public Builder maxInFlight(int value) {
      this.maxInFlight = value;
      return this;
    }

    /**
     * Sets the checksum-pool size.
     *
     * @param value at least 1
     * @return this builder
     */
    public Builder crcPoolThreads(int value) {
      this.crcPoolThreads = value;
      return this;
    }

    /**
     * Sets the progress deadline.
     *
     * @param value a positive duration
     * @return this builder
     */
    public Builder progressDeadline(Duration value) {
      this.progressDeadline = value;
      return this;
    }

    /**
     * Sets the per-endpoint bound on registered bytes.
     *
     * @param value a positive byte count, or 0 for the default (as much as {@code RLIMIT_MEMLOCK}
     *     allows)
     * @return this builder
     */
    public Builder maxPinnedBytes(long value) {
      this.maxPinnedBytes = value;
      return this;
    }

    /**
     * Sets the completion deadline.
     *
     * @param value a positive duration, or {@link Duration#ZERO} for none
     * @return this builder
     */
    public Builder completionDeadline(Duration value) {
      this.completionDeadline = value;
      return this;
    }

    /**
     * Sets the bound on accepted, unposted transfers per worker.
     *
     * @param value at least 1
     * @return this builder
     */
    public Builder maxPending(int value) {
      this.maxPending = value;
      return this;
    }

    /**
     * Sets how long {@code close()} waits for posted operations.
     *
     * @param value a duration, not negative
     * @return this builder
     */
    public Builder closeTimeout(Duration value) {
      this.closeTimeout = value;
      return this;
    }

    /**
     * Sets how an idle passive target waits between progress calls ({@code target_idle}).
     *
     * @param value the longest sleep once idle, or {@link Duration#ZERO} to spin always
     * @return this builder
     */
    public Builder targetIdle(Duration value) {
      this.targetIdle = value;
      return this;
    }

    /**
     * Builds and validates the configuration.
     *
     * @return the configuration
     * @throws IllegalArgumentException naming the field that is invalid
     */
    public DmaConfiguration build() {
      return new DmaConfiguration(
          providers,
          interfaces,
          bind,
          maxInFlight,
          crcPoolThreads,
          progressDeadline,
          maxPinnedBytes,
          completionDeadline,
          maxPending,
          closeTimeout,
          targetIdle);
    }
  }
}
