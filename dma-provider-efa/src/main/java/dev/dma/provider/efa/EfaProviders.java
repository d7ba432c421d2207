package dev.dma.provider.efa;

import dev.dma.api.DmaConfiguration;
import dev.dma.api.DmaException;
import dev.dma.libfabric.LibfabricEndpoint;
import java.util.List;

/** What {@link EfaDirectProvider} and {@link EfaProvider} share. Stateless. */
final class EfaProviders {
  private EfaProviders() {}

  /**
   * Opens an endpoint on a fabric: fails first, naming the missing piece, when the fabric is not
   * available here (so no libfabric error reaches the user as the first symptom), then decides on
   * what libfabric returned and wraps it.
   */
  static EfaEndpoint open(EfaFabric fabric, DmaConfiguration configuration) {
    fabric.requireAvailable();
    LibfabricEndpoint endpoint = LibfabricEndpoint.open(fabric.policy(), configuration);
    try {
      EfaDecisions decisions = EfaDecisions.decide(fabric, endpoint.facts());
      int length = endpoint.localAddress().length;
      if (length != EfaAddresses.ADDRESS_BYTES) {
        throw DmaException.fabric(
            DmaException.Reason.PROVIDER_UNAVAILABLE,
            fabric.configuredName()
                + " endpoint address is "
                + length
                + " bytes, not "
                + EfaAddresses.ADDRESS_BYTES);
      }
      return EfaEndpoint.over(endpoint, decisions);
    } catch (RuntimeException | Error failed) {
      endpoint.close();
      throw failed;
    }
  }

  /** The fabric's domains (one per EFA device), failing with the reason when it is unavailable. */
  static List<String> discoverDomains(EfaFabric fabric, DmaConfiguration configuration) {
    fabric.requireAvailable();
    return LibfabricEndpoint.discoverDomains(fabric.policy(), configuration);
  }
}
