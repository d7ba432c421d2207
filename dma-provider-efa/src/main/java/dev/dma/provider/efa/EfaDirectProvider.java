package dev.dma.provider.efa;

import com.google.auto.service.AutoService;
import dev.dma.api.DmaConfiguration;
import dev.dma.spi.Availability;
import dev.dma.spi.FabricEndpoint;
import dev.dma.spi.FabricProvider;
import java.util.List;

/**
 * Provider {@code efa-direct}: Device RMA through the efa provider's efa-direct fabric: no software
 * protocol, the NIC serves RMA at the target, and a target must insert the initiator's address
 * before the initiator's first RMA (initiator first). Needs libfabric 2.1 or newer and an EFA
 * device; requires FI_CONTEXT2 and local registration of every operand.
 *
 * <p>Endpoints are {@link EfaEndpoint}s over the generic libfabric endpoint, opened with {@link
 * EfaFabric#policy()} of {@link EfaFabric#EFA_DIRECT} and checked with {@link EfaDecisions}. Leave
 * {@code bind} unset: EFA binds to the device and advertises its own 32-byte address. With several
 * EFA devices, use {@link FabricServiceGroup} (one service per device).
 *
 * <p>Stateless and thread-safe; {@link #availability()} is computed once.
 */
@SuppressWarnings("exports") // @AutoService is source-only metadata.
@AutoService(FabricProvider.class)
public final class EfaDirectProvider implements FabricProvider {
  /** The name to configure. */
  public static final String NAME = "efa-direct";

  /** Creates the provider (called by {@link java.util.ServiceLoader}). */
  public EfaDirectProvider() {}

  /**
   * {@inheritDoc}
   *
   * @return {@value #NAME}
   */
  @Override
  public String name() {
    return NAME;
  }

  /**
   * {@inheritDoc}
   *
   * @return 300: above tcp (100), so EFA wins where it is available
   */
  @Override
  public int priority() {
    return 300;
  }

  /**
   * {@inheritDoc}
   *
   * <p>Unavailable, naming the missing piece, when libfabric is missing or too old, or no EFA
   * device answers {@code fi_getinfo} for this fabric.
   */
  @Override
  public Availability availability() {
    return EfaFabric.EFA_DIRECT.availability();
  }

  /**
   * {@inheritDoc}
   *
   * @throws dev.dma.api.DmaException {@code provider "efa-direct" is unavailable: <reason>} when it
   *     is, before any endpoint is opened
   */
  @Override
  public FabricEndpoint open(DmaConfiguration configuration) {
    return EfaProviders.open(EfaFabric.EFA_DIRECT, configuration);
  }

  /**
   * {@inheritDoc}
   *
   * @return one domain per EFA device (for example {@code rdmap16s27-rdm})
   * @throws dev.dma.api.DmaException with the reason when the provider is unavailable
   */
  @Override
  public List<String> discoverDomains(DmaConfiguration configuration) {
    return EfaProviders.discoverDomains(EfaFabric.EFA_DIRECT, configuration);
  }

  @Override
  public String toString() {
    return "EfaDirectProvider";
  }
}
