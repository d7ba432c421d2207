package dev.dma.provider.efa;

import com.google.auto.service.AutoService;
import dev.dma.api.DmaConfiguration;
import dev.dma.spi.Availability;
import dev.dma.spi.FabricEndpoint;
import dev.dma.spi.FabricProvider;
import java.util.List;

/**
 * Provider {@code efa}: The efa provider's RDM fabric (formerly rxr): device RMA where both sides
 * support it, emulated otherwise (p4d has no RDMA write), with a handshake before the first RMA to
 * each peer. Targets must progress their endpoint (a running PassiveTarget does) for emulated RMA
 * and handshakes to complete. Any libfabric with the efa provider.
 *
 * <p>Endpoints are {@link EfaEndpoint}s over the generic libfabric endpoint, opened with {@link
 * EfaFabric#policy()} of {@link EfaFabric#EFA} and checked with {@link EfaDecisions}. Leave {@code
 * bind} unset: EFA binds to the device and advertises its own 32-byte address. With several EFA
 * devices, use {@link FabricServiceGroup} (one service per device).
 *
 * <p>Stateless and thread-safe; {@link #availability()} is computed once.
 */
@SuppressWarnings("exports") // @AutoService is source-only metadata.
@AutoService(FabricProvider.class)
public final class EfaProvider implements FabricProvider {
  /** The name to configure. */
  public static final String NAME = "efa";

  /** Creates the provider (called by {@link java.util.ServiceLoader}). */
  public EfaProvider() {}

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
   * @return 200: above tcp (100), so EFA wins where it is available
   */
  @Override
  public int priority() {
    return 200;
  }

  /**
   * {@inheritDoc}
   *
   * <p>Unavailable, naming the missing piece, when libfabric is missing or too old, or no EFA
   * device answers {@code fi_getinfo} for this fabric.
   */
  @Override
  public Availability availability() {
    return EfaFabric.EFA.availability();
  }

  /**
   * {@inheritDoc}
   *
   * @throws dev.dma.api.DmaException {@code provider "efa" is unavailable: <reason>} when it is,
   *     before any endpoint is opened
   */
  @Override
  public FabricEndpoint open(DmaConfiguration configuration) {
    return EfaProviders.open(EfaFabric.EFA, configuration);
  }

  /**
   * {@inheritDoc}
   *
   * @return one domain per EFA device (for example {@code rdmap16s27-rdm})
   * @throws dev.dma.api.DmaException with the reason when the provider is unavailable
   */
  @Override
  public List<String> discoverDomains(DmaConfiguration configuration) {
    return EfaProviders.discoverDomains(EfaFabric.EFA, configuration);
  }

  @Override
  public String toString() {
    return "EfaProvider";
  }
}
