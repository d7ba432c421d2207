package dev.dma.core;

import dev.dma.api.DmaConfiguration;
import dev.dma.api.DmaException;
import dev.dma.spi.FabricProvider;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.ServiceLoader;
import org.jspecify.annotations.Nullable;

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
 * An unknown name, an unavailable provider or an empty choice fails with {@link
 * DmaException.Reason#PROVIDER_UNAVAILABLE}, naming every provider found and why each is or is not
 * available; a name dma knows but whose jar is missing also names the artifact to add ({@link
 * #artifactFor}). Stateless and thread-safe.
 */
public final class FabricProviders {
  private FabricProviders() {}

  /** The prefix of the names {@code dma-libfabric} serves: {@code libfabric:<prov>[/<fabric>]}. */
  private static final String LIBFABRIC_PREFIX = "libfabric:";

  /** Every plain provider name dma ships, and the artifact whose jar provides it. */
  private static final Map<String, String> ARTIFACTS =
      Map.of(
          "tcp", "dma-provider-tcp",
          "efa", "dma-provider-efa",
          "efa-direct", "dma-provider-efa",
          "fake", "dma-provider-fake",
          "local", "dma-provider-local");

  /**
   * The provider names dma ships a provider for, {@code libfabric:<prov>} standing for the whole
   * family that {@code dma-libfabric} serves.
   *
   * @return the names, sorted
   */
  public static List<String> knownNames() {
    List<String> names = new ArrayList<>(ARTIFACTS.keySet());
    names.add(LIBFABRIC_PREFIX + "<prov>");
    names.sort(Comparator.naturalOrder());
    return List.copyOf(names);
  }

  /**
   * The Maven artifact (group {@code dev.dma}) whose jar provides a configured provider name.
   *
   * @param name a configured provider name, such as {@code efa-direct} or {@code libfabric:shm}
   * @return the artifact id, or {@code null} for a name no dma artifact provides
   */
  public static @Nullable String artifactFor(String name) {
    if (name.startsWith(LIBFABRIC_PREFIX) && name.length() > LIBFABRIC_PREFIX.length()) {
      return "dma-libfabric";
    }
    return ARTIFACTS.get(name);
  }

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
   * @throws DmaException of kind {@link DmaException.Kind#FABRIC} and reason {@link
   *     DmaException.Reason#PROVIDER_UNAVAILABLE} when no provider accepts the name or the one that
   *     does is unavailable, listing what is installed
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
   * @throws DmaException with {@link DmaException.Reason#PROVIDER_UNAVAILABLE} when none is
   *     available
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
        DmaException.Reason.PROVIDER_UNAVAILABLE,
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
   * @throws DmaException with {@link DmaException.Reason#PROVIDER_UNAVAILABLE} when none accepts
   *     it, or the one that does is unavailable
   */
  public static FabricProvider select(String name, List<FabricProvider> providers) {
    for (FabricProvider provider : providers) {
      if (provider.accepts(name)) {
        if (provider.availability().available()) {
          return provider;
        }
        throw DmaException.fabric(
            DmaException.Reason.PROVIDER_UNAVAILABLE,
            "provider \""
                + name
                + "\" is unavailable: "
                + provider.availability().reason()
                + describe(providers));
      }
    }
    throw DmaException.fabric(
        DmaException.Reason.PROVIDER_UNAVAILABLE,
        "no provider named \"" + name + "\" is installed; " + advice(name) + describe(providers));
  }

  /** What to add for a name no installed provider accepts. */
  private static String advice(String name) {
    String artifact = artifactFor(name);
    if (artifact != null) {
      return "add the jar of dev.dma:" + artifact + " to the class path";
    }
    if (name.startsWith(LIBFABRIC_PREFIX)) {
      return "name a libfabric provider after \"libfabric:\" (for example libfabric:shm), served"
          + " by dev.dma:dma-libfabric";
    }
    return "dma knows "
        + String.join(", ", knownNames())
        + "; for libfabric's own provider of that name configure \""
        + LIBFABRIC_PREFIX
        + name
        + "\" (dev.dma:dma-libfabric); any other name needs its provider's jar";
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
