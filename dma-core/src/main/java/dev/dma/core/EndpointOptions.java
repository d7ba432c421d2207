package dev.dma.core;

import dev.dma.api.DmaConfiguration;
import dev.dma.spi.FabricProvider;
import java.util.Objects;
import org.jspecify.annotations.Nullable;

/**
 * The options of every builder that opens an endpoint, held once: the configuration and the
 * provider. {@link PassiveTarget.Builder} extends it directly; the service builders through {@link
 * ServiceOptions}.
 *
 * <p>Not thread-safe: one thread fills a builder and starts it. Applications do not extend it.
 *
 * @param <B> the builder's own type, which every setter returns
 */
public abstract class EndpointOptions<B extends EndpointOptions<B>> {
  final DmaConfiguration configuration;
  @Nullable FabricProvider provider;

  EndpointOptions(DmaConfiguration configuration) {
    this.configuration = Objects.requireNonNull(configuration, "configuration");
  }

  /** This builder, as its own type: every subclass is declared as its own {@code B}. */
  @SuppressWarnings("unchecked")
  final B self() {
    return (B) this;
  }

  /**
   * Uses this provider instead of selecting one by the configuration's name.
   *
   * @param value the provider
   * @return this builder
   */
  public B provider(FabricProvider value) {
    this.provider = Objects.requireNonNull(value, "provider");
    return self();
  }

  /** The provider set, or the one the configuration selects. */
  FabricProvider providerOrSelected() {
    return provider != null ? provider : FabricProviders.select(configuration);
  }
}
