package dev.dma.provider.efa;

import dev.dma.api.DmaConfiguration;
import dev.dma.spi.Availability;
import dev.dma.spi.FabricEndpoint;
import dev.dma.spi.FabricProvider;
import java.util.List;

/**
 * What both EFA providers share: endpoints are {@link EfaEndpoint}s over the generic libfabric
 * endpoint, opened with the {@linkplain EfaFabric#policy() policy} of one {@link EfaFabric} and
 * checked with {@link EfaDecisions}. Leave {@code bind} unset: EFA binds to the device and
 * advertises its own 32-byte address. With several EFA devices, use {@link
 * dev.dma.core.FabricServiceGroup} (one service per device {@link #discoverDomains} lists).
 *
 * <p>Stateless and thread-safe; {@link #availability()} is computed once per fabric.
 */
public abstract sealed class EfaFabricProvider implements FabricProvider
    permits EfaDirectProvider, EfaProvider {
  private final EfaFabric fabric;
  private final int priority;

  EfaFabricProvider(EfaFabric fabric, int priority) {
    this.fabric = fabric;
    this.priority = priority;
  }

  /**
   * The EFA fabric this provider opens.
   *
   * @return the fabric
   */
  public EfaFabric fabric() {
    return fabric;
  }

  @Override
  public String name() {
    return fabric.configuredName();
  }

  /**
   * {@inheritDoc}
   *
   * @return above tcp (100), so EFA wins where it is available; efa-direct above efa
   */
  @Override
  public int priority() {
    return priority;
  }

  /**
   * {@inheritDoc}
   *
   * <p>Unavailable, naming the missing piece, when libfabric is missing or too old, or no EFA
   * device answers {@code fi_getinfo} for this fabric.
   */
  @Override
  public Availability availability() {
    return fabric.availability();
  }

  /**
   * {@inheritDoc}
   *
   * @throws dev.dma.api.DmaException {@code provider "<name>" is unavailable: <reason>} when it is,
   *     before any endpoint is opened
   */
  @Override
  public FabricEndpoint open(DmaConfiguration configuration) {
    return EfaProviders.open(fabric, configuration);
  }

  /**
   * {@inheritDoc}
   *
   * @return one domain per EFA device (for example {@code rdmap16s27-rdm})
   * @throws dev.dma.api.DmaException with the reason when the provider is unavailable
   */
  @Override
  public List<String> discoverDomains(DmaConfiguration configuration) {
    return EfaProviders.discoverDomains(fabric, configuration);
  }

  @Override
  public String toString() {
    return getClass().getSimpleName();
  }
}
