package dev.dma.provider.efa;

import com.google.auto.service.AutoService;
import dev.dma.spi.FabricProvider;

/**
 * Provider {@code efa-direct}: device RMA through the efa provider's efa-direct fabric: no software
 * protocol, the NIC serves RMA at the target, and a target must insert the initiator's address
 * before the initiator's first RMA (initiator first). Needs libfabric 2.1 or newer and an EFA
 * device; requires FI_CONTEXT2 and local registration of every operand. See {@link
 * EfaFabricProvider} for what both EFA providers share.
 */
@SuppressWarnings("exports") // @AutoService is source-only metadata.
@AutoService(FabricProvider.class)
public final class EfaDirectProvider extends EfaFabricProvider {
  /** The name to configure. */
  public static final String NAME = "efa-direct";

  /** Creates the provider (called by {@link java.util.ServiceLoader}). */
  public EfaDirectProvider() {
    super(EfaFabric.EFA_DIRECT, 300);
  }
}
