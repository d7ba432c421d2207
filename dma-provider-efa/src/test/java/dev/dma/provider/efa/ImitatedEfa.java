package dev.dma.provider.efa;

import dev.dma.spi.EndpointInfo;
import dev.dma.spi.FabricEndpoint;

/**
 * Test fixture: EFA endpoints over an endpoint that imitates EFA (the fake, {@code
 * likeEfaDirect()}).
 */
public final class ImitatedEfa {
  private ImitatedEfa() {}

  /**
   * Wraps an endpoint that imitates EFA, taking the decisions from what it describes and the
   * fabric's documented behaviour.
   *
   * @param delegate the open endpoint, owned from now on by the returned one
   * @param fabric which fabric's rules to apply
   * @return the EFA endpoint
   */
  public static EfaEndpoint endpoint(FabricEndpoint delegate, EfaFabric fabric) {
    EndpointInfo info = delegate.describe();
    EfaDecisions decisions =
        new EfaDecisions(
            fabric,
            delegate.requiresLocalRegistration(),
            info.usesVirtualAddressing(),
            true,
            fabric == EfaFabric.EFA_DIRECT,
            delegate.maxTx(),
            EfaAddresses.ADDRESS_BYTES,
            EfaAddresses.IDENTITY_BYTES,
            fabric.targetProgressRequired(),
            fabric.handshakeFirst(),
            fabric.initiatorFirst(),
            true,
            0);
    return EfaEndpoint.over(delegate, decisions);
  }
}
