package dev.dma.libfabric;

import dev.dma.libfabric.internal.Abi;
import org.jspecify.annotations.Nullable;

/**
 * What a provider module decides about the endpoints it opens; {@link LibfabricEndpoint} itself
 * decides nothing of that kind. What the returned provider does differently from libfabric's man
 * pages (shm's, sockets', tcp's quirks) is not policy but a fact of the library: {@code Quirks}
 * holds every such decision, and is the one class of the package that reads a provider's name.
 * Immutable.
 *
 * @param providerName the libfabric provider to ask for ({@code fabric_attr.prov_name} in the
 *     hints, for example {@code tcp;ofi_rxm}, {@code net}, {@code shm}, {@code efa}); an entry
 *     whose returned name equals it exactly is preferred over layered variants ({@code
 *     net;ofi_rxm})
 * @param fabricName the fabric to pin ({@code fabric_attr.name}), or {@code null} for any
 * @param hintMode the hint mode bits the application offers, for example {@code FI_CONTEXT2} for
 *     efa-direct; 0 for most. {@code FI_CONTEXT} and {@code FI_CONTEXT2} are always honoured (every
 *     operation's context is a 64-byte slot); offer no other bits
 * @param hintMrMode the {@code mr_mode} bits offered; the provider returns the subset it requires
 * @param defaultSourceNode the source node used with {@code FI_SOURCE} when the configuration sets
 *     no {@code bind}, or {@code null} for none
 * @param identityLength how many leading address bytes name a peer's endpoint slot for {@link
 *     dev.dma.spi.FabricEndpoint#peerIdentity}; 0 for every byte (EFA uses 18: GID and QPN)
 */
public record EndpointPolicy(
    String providerName,
    @Nullable String fabricName,
    long hintMode,
    int hintMrMode,
    @Nullable String defaultSourceNode,
    int identityLength) {

  /**
   * The {@code mr_mode} bits offered by default: {@code FI_MR_LOCAL | FI_MR_VIRT_ADDR |
   * FI_MR_ALLOCATED | FI_MR_PROV_KEY}. Offering 0 instead makes some providers (efa) return a
   * variant that still needs virtual addresses but says {@code mr_mode = 0}.
   */
  public static final int DEFAULT_HINT_MR_MODE =
      Abi.MR_LOCAL | Abi.MR_VIRT_ADDR | Abi.MR_ALLOCATED | Abi.MR_PROV_KEY;

  /**
   * Checks the fields.
   *
   * @throws IllegalArgumentException for a blank provider name, a name with NUL characters, or a
   *     negative identity length
   */
  public EndpointPolicy {
    if (providerName == null || providerName.isBlank() || providerName.indexOf('\0') >= 0) {
      throw new IllegalArgumentException("invalid provider name");
    }
    if (fabricName != null && (fabricName.isBlank() || fabricName.indexOf('\0') >= 0)) {
      throw new IllegalArgumentException("invalid fabric name");
    }
    if (defaultSourceNode != null && defaultSourceNode.indexOf('\0') >= 0) {
      throw new IllegalArgumentException("invalid source node");
    }
    if (identityLength < 0) {
      throw new IllegalArgumentException(
          "identity length must not be negative, not " + identityLength);
    }
  }

  /**
   * A policy with the defaults: any fabric, mode 0, {@link #DEFAULT_HINT_MR_MODE}, no default
   * source node, every address byte is identity.
   *
   * @param providerName the libfabric provider name
   * @return the policy
   */
  public static EndpointPolicy of(String providerName) {
    return new EndpointPolicy(providerName, null, 0, DEFAULT_HINT_MR_MODE, null, 0);
  }

  /**
   * This policy pinned to a fabric.
   *
   * @param name the fabric name, or null for any
   * @return the new policy
   */
  public EndpointPolicy withFabricName(@Nullable String name) {
    return new EndpointPolicy(
        providerName, name, hintMode, hintMrMode, defaultSourceNode, identityLength);
  }

  /**
   * This policy with other hint mode bits.
   *
   * @param mode the mode bits
   * @return the new policy
   */
  public EndpointPolicy withHintMode(long mode) {
    return new EndpointPolicy(
        providerName, fabricName, mode, hintMrMode, defaultSourceNode, identityLength);
  }

  /**
   * This policy with a default source node.
   *
   * @param node the node, or null for none
   * @return the new policy
   */
  public EndpointPolicy withDefaultSourceNode(@Nullable String node) {
    return new EndpointPolicy(providerName, fabricName, hintMode, hintMrMode, node, identityLength);
  }

  /**
   * This policy with other hint {@code mr_mode} bits.
   *
   * @param mrMode the bits to offer
   * @return the new policy
   */
  public EndpointPolicy withHintMrMode(int mrMode) {
    return new EndpointPolicy(
        providerName, fabricName, hintMode, mrMode, defaultSourceNode, identityLength);
  }

  /**
   * This policy with a peer identity prefix.
   *
   * @param length leading address bytes that identify a peer slot, or 0 for all
   * @return the new policy
   */
  public EndpointPolicy withIdentityLength(int length) {
    return new EndpointPolicy(
        providerName, fabricName, hintMode, hintMrMode, defaultSourceNode, length);
  }
}
