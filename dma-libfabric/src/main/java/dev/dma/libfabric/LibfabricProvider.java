package dev.dma.libfabric;

import com.google.auto.service.AutoService;
import dev.dma.api.DmaConfiguration;
import dev.dma.api.DmaException;
import dev.dma.libfabric.internal.Abi;
import dev.dma.spi.Availability;
import dev.dma.spi.FabricEndpoint;
import dev.dma.spi.FabricProvider;
import java.util.List;

/**
 * Provider {@code libfabric}: any libfabric provider that serves {@code FI_EP_RDM} with {@code
 * FI_RMA}, named in the configuration as {@code libfabric:<prov_name>} or {@code
 * libfabric:<prov_name>/<fabric_name>} (for example {@code libfabric:sockets}, {@code
 * libfabric:shm}, {@code libfabric:tcp;ofi_rxm/127.0.0.1/32}: only the first {@code /} splits).
 *
 * <p>It applies no provider policy beyond what the endpoint can always honour: mode {@code
 * FI_CONTEXT|FI_CONTEXT2} (every operation gets a 64-byte slot, so providers that need per-op
 * scratch, such as psm2 or rxd, match too), the default {@code mr_mode} hints, and no default
 * source node, so without a configured {@code bind} libfabric picks the address (for socket
 * providers its first interface, not loopback). For production TCP use provider {@code tcp}.
 *
 * <h2>shm</h2>
 *
 * Names carry the pid ({@code fi_shm://<pid>:<uid>:<index>}; a configured {@code bind} is not
 * passed to shm, see {@link ShmNames}). Writes are delivery-complete, and shm sends a write of at
 * most its inject size (4 KiB) with delivery-complete through its segmentation protocol ({@code
 * smr_select_proto}: SAR, bounce buffers in the target's region), which moves only while the target
 * reads its completion queue; larger writes and all reads go straight between the address spaces
 * (CMA). On a small, busy host a starved target progress thread therefore stalls 4 KiB writes, and
 * the fabric worker's progress deadline fails them ("no progress posting for 1s"), while reads of
 * the same size never are: give the target a core, or raise the deadline.
 *
 * <p>Stateless and thread-safe.
 */
// "exports": @AutoService is source-only metadata; users of this class never need the module.
@SuppressWarnings("exports")
@AutoService(FabricProvider.class)
public final class LibfabricProvider implements FabricProvider {
  /** The prefix of the names this provider accepts. */
  public static final String PREFIX = "libfabric:";

  /** Creates the provider (called by {@link java.util.ServiceLoader}). */
  public LibfabricProvider() {}

  /** {@inheritDoc} */
  @Override
  public String name() {
    return "libfabric";
  }

  /**
   * {@inheritDoc}
   *
   * @return true for {@code libfabric:<prov_name>[/<fabric_name>]} with a non-empty provider name
   */
  @Override
  public boolean accepts(String configuredName) {
    return configuredName.startsWith(PREFIX) && !providerPart(configuredName).isEmpty();
  }

  /**
   * {@inheritDoc}
   *
   * @return 10: below every named provider, above the fake
   */
  @Override
  public int priority() {
    return 10;
  }

  /** {@inheritDoc} */
  @Override
  public Availability availability() {
    return Libfabric.availability();
  }

  /**
   * The endpoint policy a configured name stands for.
   *
   * @param configuredName {@code libfabric:<prov_name>[/<fabric_name>]}
   * @return the policy
   * @throws DmaException of kind FABRIC for a name this provider does not accept
   */
  public static EndpointPolicy policyFor(String configuredName) {
    if (!configuredName.startsWith(PREFIX) || providerPart(configuredName).isEmpty()) {
      throw DmaException.fabric(
          DmaException.Reason.PROVIDER_UNAVAILABLE,
          "provider name \"" + configuredName + "\" is not libfabric:<prov_name>[/<fabric_name>]");
    }
    String rest = configuredName.substring(PREFIX.length());
    int slash = rest.indexOf('/');
    EndpointPolicy policy =
        EndpointPolicy.of(slash < 0 ? rest : rest.substring(0, slash))
            .withHintMode(Abi.MODE_CONTEXT | Abi.MODE_CONTEXT2);
    return slash < 0 || slash == rest.length() - 1
        ? policy
        : policy.withFabricName(rest.substring(slash + 1));
  }

  private static String providerPart(String configuredName) {
    String rest = configuredName.substring(PREFIX.length());
    int slash = rest.indexOf('/');
    return slash < 0 ? rest : rest.substring(0, slash);
  }

  /** {@inheritDoc} */
  @Override
  public FabricEndpoint open(DmaConfiguration configuration) {
    return LibfabricEndpoint.open(policyFor(configuration.provider()), configuration);
  }

  /**
   * {@inheritDoc}
   *
   * <p>On {@code libfabric:tcp} with a wait fd, so an idle target sleeps until a peer's RMA
   * arrives; as {@link #open} elsewhere.
   */
  @Override
  public FabricEndpoint openTarget(DmaConfiguration configuration) {
    return LibfabricEndpoint.open(policyFor(configuration.provider()), configuration, true);
  }

  /** {@inheritDoc} */
  @Override
  public List<String> discoverDomains(DmaConfiguration configuration) {
    return LibfabricEndpoint.discoverDomains(policyFor(configuration.provider()), configuration);
  }
}
