package dev.dma.core;

import dev.dma.api.DmaConfiguration;
import dev.dma.api.DmaException;
import dev.dma.spi.FabricProvider;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.ServiceLoader;

/**
 * Finds fabric providers on the class path or module path and picks the one a configuration asks
 * for.
 *
 * <p>Selection:
 *
 * <ol>
 *   <li>A configuration that names providers uses the first name: the provider that {@linkplain
 *       FabricProvider#accepts accepts} it, which must be available here. There is no fallback to
 *       the second name.
 *   <li>A configuration that names none takes the highest-{@linkplain FabricProvider#priority()
 *       priority} provider that is available here. The fake provider ranks lowest and is taken only
 *       when it is the only provider installed.
 * </ol>
 *
 * An unknown name, an unavailable provider or an empty choice fails, naming every provider found
 * and why each is or is not available. Stateless and thread-safe.
 */
public final class FabricProviders {
  private FabricProviders() {}

  /**
   * Every provider visible to this module's class loader, highest priority first.
   *
   * @return the providers
   */
  public static List<FabricProvider> installed() {
    List<FabricProvider> providers = new ArrayList<>();
    ServiceLoader.load(FabricProvider.class, FabricProviders.class.getClassLoader())
        .forEach(providers::add);
    providers.sort(Comparator.comparingInt(FabricProvider::priority).reversed());
    return providers;
  }

  /**
   * The provider a configuration selects.
   *
   * @param configuration the configuration
   * @return the available provider that accepts {@link DmaConfiguration#provider()}
   * @throws DmaException of kind {@link DmaException.Kind#FABRIC} when no provider accepts the name
   *     or the one that does is unavailable, listing what is installed
   */
  public static FabricProvider select(DmaConfiguration configuration) {
    List<FabricProvider> providers = installed();
    return configuration.namesProvider()
        ? select(configuration.provider(), providers)
        : selectByPriority(providers);
  }

  /**
   * The configuration a provider is opened with: the given one when it names a provider, otherwise
   * the same with the selected provider's name filled in (so a provider family such as {@code
   * libfabric:<prov>} always sees the name it was chosen by).
   *
   * @param configuration the configuration
   * @param provider the provider {@link #select(DmaConfiguration)} returned for it
   * @return the configuration to open with
   */
  public static DmaConfiguration resolve(DmaConfiguration configuration, FabricProvider provider) {
    return configuration.namesProvider()
        ? configuration
        : configuration.toBuilder().providers(provider.name()).build();
  }

  /**
   * The highest-priority available provider among {@code providers}; the lowest-ranked one (the
   * fake) only when it is the only one.
   *
   * @param providers the candidates, highest priority first
   * @return the provider
   * @throws DmaException when none is available
   */
  public static FabricProvider selectByPriority(List<FabricProvider> providers) {
    if (providers.size() == 1 && providers.getFirst().availability().available()) {
      return providers.getFirst();
    }
    for (FabricProvider provider : providers) {
      // A family that needs a name of its own (libfabric:<prov>) cannot be chosen without one, and
      // the lowest rank (the fake) is never chosen over real providers that are installed.
      if (provider.priority() != Integer.MIN_VALUE
          && provider.accepts(provider.name())
          && provider.availability().available()) {
        return provider;
      }
    }
    throw DmaException.fabric(
        "no provider is named in the configuration and none installed is available; name one in"
            + " \"providers\" or install one (for example dma-provider-tcp with libfabric)"
            + describe(providers));
  }

  /**
   * The provider named {@code name} among {@code providers}.
   *
   * @param name a configured provider name
   * @param providers the candidates
   * @return the available provider that accepts the name
   * @throws DmaException when none accepts it, or the one that does is unavailable
   */
  public static FabricProvider select(String name, List<FabricProvider> providers) {
    for (FabricProvider provider : providers) {
      if (provider.accepts(name)) {
        if (provider.availability().available()) {
          return provider;
        }
        throw DmaException.fabric(
            "provider \""
                + name
                + "\" is unavailable: "
                + provider.availability().reason()
                + describe(providers));
      }
    }
    throw DmaException.fabric(
        "no provider named \""
            + name
            + "\" is installed; add its jar (for example "
            + (name.startsWith("libfabric:") ? "dma-libfabric" : "dma-provider-" + name)
            + ") to the class path"
            + describe(providers));
  }

  private static String describe(List<FabricProvider> providers) {
    if (providers.isEmpty()) {
      return "; no providers are installed";
    }
    StringBuilder text = new StringBuilder("; installed:");
    for (FabricProvider provider : providers) {
      text.append(' ').append(provider.name());
      if (provider.availability().available()) {
        text.append(" (available)");
      } else {
        text.append(" (unavailable: ").append(provider.availability().reason()).append(')');
      }
      text.append(',');
    }
    text.setLength(text.length() - 1);
    return text.toString();
  }
}
