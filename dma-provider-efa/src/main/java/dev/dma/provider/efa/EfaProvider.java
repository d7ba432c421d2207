package dev.dma.provider.efa;

import com.google.auto.service.AutoService;
import dev.dma.spi.FabricProvider;

/**
 * Provider {@code efa}: the efa provider's RDM fabric (formerly rxr): device RMA where both sides
 * support it, emulated otherwise (p4d has no RDMA write), with a handshake before the first RMA to
 * each peer. Targets must progress their endpoint (a running PassiveTarget does) for emulated RMA
 * and handshakes to complete. Any libfabric with the efa provider. See {@link EfaFabricProvider}
 * for what both EFA providers share.
 */
@SuppressWarnings("exports") // @AutoService is source-only metadata.
@AutoService(FabricProvider.class)
public final class EfaProvider extends EfaFabricProvider {
  /** The name to configure. */
  public static final String NAME = "efa";

  /** Creates the provider (called by {@link java.util.ServiceLoader}). */
  public EfaProvider() {
    super(EfaFabric.EFA, 200);
  }
}
