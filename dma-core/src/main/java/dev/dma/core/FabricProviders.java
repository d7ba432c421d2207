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
 * <p>Selection: the first name in {@link DmaConfiguration#providers()} picks the provider that
 * {@linkplain FabricProvider#accepts accepts} it; an unknown name, or a provider that is not
 * available here, fails naming every provider found and why each is or is not available. Stateless
 * and thread-safe.
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
    return select(configuration.provider(), installed());
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
            + "\" is installed; add its jar (for example dma-provider-"
            + name.replaceFirst(":.*", "")
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
