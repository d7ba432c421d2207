package dev.dma.core;

import dev.dma.api.DmaConfiguration;

/**
 * The options of a builder that may start a {@link FabricServiceGroup}, beyond those of every
 * service ({@link ServiceOptions}): whether and how it stripes large transfers over its devices.
 * Held once for {@link FabricServiceGroup.Builder} and {@link AsyncFabricService.Builder}.
 *
 * <p>Not thread-safe: one thread fills a builder and starts it. Applications do not extend it.
 *
 * @param <B> the builder's own type, which every setter returns
 */
public abstract class GroupOptions<B extends GroupOptions<B>> extends ServiceOptions<B> {
  long stripeThresholdBytes;
  int stripeChunks;

  /** Whether a striping option was set, which makes the futures API run over a group. */
  boolean stripingSet;

  GroupOptions(DmaConfiguration configuration) {
    super(configuration);
  }

  /**
   * Stripes transfers of at least this many bytes over several devices; 0 (the default) turns
   * striping off. Off by default because striping asks a write's {@code source()} on the submitting
   * thread and allocates per striped transfer, and because whether it pays depends on the devices:
   * measure (with {@code dma-bench run --devices N}) and then set it, e.g. 1 MiB on EFA, where one
   * device's bandwidth is the limit. On {@link AsyncFabricService.Builder} it also makes the
   * futures run over a group, as {@link AsyncFabricService.Builder#group()}.
   *
   * @param value the threshold in bytes, at least 0
   * @return this builder
   * @throws IllegalArgumentException if negative
   */
  public B stripeThresholdBytes(long value) {
    if (value < 0) {
      throw new IllegalArgumentException("stripeThresholdBytes is negative: " + value);
    }
    this.stripeThresholdBytes = value;
    this.stripingSet = true;
    return self();
  }

  /**
   * How many chunks a striped transfer is split into; 0 (the default) means one per device. On
   * {@link AsyncFabricService.Builder} it also makes the futures run over a group.
   *
   * @param value the chunk count, at least 0
   * @return this builder
   * @throws IllegalArgumentException if negative
   */
  public B stripeChunks(int value) {
    if (value < 0) {
      throw new IllegalArgumentException("stripeChunks is negative: " + value);
    }
    this.stripeChunks = value;
    this.stripingSet = true;
    return self();
  }

  /** Hands every option held here, striping included, to the builder of a group this one starts. */
  <O extends GroupOptions<O>> O copyGroupTo(O other) {
    copyTo(other);
    other.stripeThresholdBytes = stripeThresholdBytes;
    other.stripeChunks = stripeChunks;
    other.stripingSet = stripingSet;
    return other;
  }
}
