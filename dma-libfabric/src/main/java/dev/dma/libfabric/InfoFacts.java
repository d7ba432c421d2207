package dev.dma.libfabric;

import dev.dma.api.DmaException;
import dev.dma.libfabric.internal.Abi;
import dev.dma.libfabric.internal.Native;
import java.util.Objects;
import org.jspecify.annotations.Nullable;

/**
 * The facts of one {@code fi_info} entry that an endpoint decides on, read with the offsets of
 * {@code dev.dma.libfabric.internal.Abi}, and the generic decisions taken from them (the ones
 * {@link LibfabricEndpoint} takes when it opens: local registration, virtual addressing, provider
 * keys, transmit depth, unsupported {@code mr_mode} bits). A provider module adds its own decisions
 * on top (EFA checks the fabric, the mode bits, the address format and the RMA capabilities), and
 * tests run the same decisions on an entry built by libfabric's own {@code fi_dupinfo} ({@link
 * InfoEntry}) without the hardware that would return it.
 *
 * <p>Immutable and thread-safe; reading ({@link #read(long)}) must not race with whoever frees or
 * changes the entry.
 *
 * @param providerName {@code fabric_attr->prov_name}, or empty
 * @param fabricName {@code fabric_attr->name}, or empty
 * @param domainName {@code domain_attr->name}, or empty
 * @param caps {@code caps}
 * @param mode {@code mode}: the context and buffer requirements the provider puts on every
 *     operation
 * @param addrFormat {@code addr_format}
 * @param endpointType {@code ep_attr->type} ({@code FI_EP_RDM} = 3)
 * @param mrMode {@code domain_attr->mr_mode}
 * @param threading {@code domain_attr->threading} ({@code FI_THREAD_SAFE} = 1)
 * @param dataProgress {@code domain_attr->data_progress} ({@code FI_PROGRESS_AUTO} = 1, {@code
 *     MANUAL} = 2)
 * @param txSize {@code tx_attr->size}: operations the provider accepts before {@code -FI_EAGAIN}
 * @param injectSize {@code tx_attr->inject_size}
 */
public record InfoFacts(
    String providerName,
    String fabricName,
    String domainName,
    long caps,
    long mode,
    int addrFormat,
    int endpointType,
    int mrMode,
    int threading,
    int dataProgress,
    long txSize,
    long injectSize) {

  /** Normalizes null names to empty strings. */
  public InfoFacts {
    providerName = providerName == null ? "" : providerName;
    fabricName = fabricName == null ? "" : fabricName;
    domainName = domainName == null ? "" : domainName;
  }

  /**
   * Reads the facts of one entry. Attribute pointers that are null read as zero.
   *
   * @param info the address of an {@code fi_info} allocated by libfabric, not 0
   * @return the facts
   * @throws DmaException of kind FABRIC when libfabric is unavailable
   * @throws IllegalArgumentException for address 0
   */
  public static InfoFacts read(long info) {
    Native.require();
    if (info == 0) {
      throw new IllegalArgumentException("fi_info address is 0");
    }
    long fabricAttr = Native.word(info + Abi.INFO_FABRIC_ATTR);
    long domainAttr = Native.word(info + Abi.INFO_DOMAIN_ATTR);
    long epAttr = Native.word(info + Abi.INFO_EP_ATTR);
    long txAttr = Native.word(info + Abi.INFO_TX_ATTR);
    return new InfoFacts(
        fabricAttr == 0 ? "" : Native.string(Native.word(fabricAttr + Abi.FABRIC_ATTR_PROV_NAME)),
        fabricAttr == 0 ? "" : Native.string(Native.word(fabricAttr + Abi.FABRIC_ATTR_NAME)),
        domainAttr == 0 ? "" : Native.string(Native.word(domainAttr + Abi.DOMAIN_ATTR_NAME)),
        Native.word(info + Abi.INFO_CAPS),
        Native.word(info + Abi.INFO_MODE),
        Native.int32(info + Abi.INFO_ADDR_FORMAT),
        epAttr == 0 ? 0 : Native.int32(epAttr + Abi.EP_ATTR_TYPE),
        domainAttr == 0 ? 0 : Native.int32(domainAttr + Abi.DOMAIN_ATTR_MR_MODE),
        domainAttr == 0 ? 0 : Native.int32(domainAttr + Abi.DOMAIN_ATTR_THREADING),
        domainAttr == 0 ? 0 : Native.int32(domainAttr + Abi.DOMAIN_ATTR_DATA_PROGRESS),
        txAttr == 0 ? 0 : Native.word(txAttr + Abi.TX_ATTR_SIZE),
        txAttr == 0 ? 0 : Native.word(txAttr + Abi.TX_ATTR_INJECT_SIZE));
  }

  /**
   * The facts an open endpoint reports. Fabric name and endpoint type are not kept by the endpoint;
   * they are taken from what its policy asked for (the provider filtered on both).
   *
   * @param endpoint an open endpoint
   * @return the facts
   */
  public static InfoFacts of(LibfabricEndpoint endpoint) {
    var info = endpoint.describe();
    return new InfoFacts(
        info.provider(),
        Objects.requireNonNullElse(endpoint.policy().fabricName(), ""),
        endpoint.domainName(),
        info.caps(),
        endpoint.mode(),
        info.addrFormat(),
        Abi.FI_EP_RDM,
        info.mrMode(),
        endpoint.threading(),
        endpoint.dataProgress(),
        endpoint.maxTx(),
        endpoint.injectSize());
  }

  /**
   * Whether the legacy {@code FI_MR_BASIC} bit is set: it means virtual addresses, provider keys
   * and allocated memory, so reading only the new bits would send offsets and requested keys.
   *
   * @return whether {@code FI_MR_BASIC} is set
   */
  public boolean basicMrMode() {
    return (mrMode & Abi.MR_BASIC) != 0;
  }

  /**
   * Decision: every local operand needs a registration and its descriptor ({@code FI_MR_LOCAL}).
   *
   * @return whether local registration is required
   */
  public boolean requiresLocalMr() {
    return (mrMode & Abi.MR_LOCAL) != 0;
  }

  /**
   * Decision: remote addresses are the peer buffer's virtual address ({@code FI_MR_VIRT_ADDR} or
   * legacy {@code FI_MR_BASIC}), not an offset into the region.
   *
   * @return whether virtual addressing is used
   */
  public boolean virtualAddressing() {
    return basicMrMode() || (mrMode & Abi.MR_VIRT_ADDR) != 0;
  }

  /**
   * Decision: the provider picks registration keys ({@code FI_MR_PROV_KEY} or {@code FI_MR_BASIC}),
   * so registrations ask for key 0; otherwise each asks for a unique key.
   *
   * @return whether keys are provider-chosen
   */
  public boolean providerKeys() {
    return basicMrMode() || (mrMode & Abi.MR_PROV_KEY) != 0;
  }

  /**
   * The most operations kept in flight on rxd ({@code udp;ofi_rxd}), whatever its {@code
   * tx_attr->size} (1024) says. Measured with {@code BurstProbe} (600 mixed 16 KiB writes and
   * reads, one competing busy process, libfabric 1.17): a window of 64 stalled for good in 10 of 10
   * tries (no completion and no error for 30 s, after 24 to 416 completions), 32 and 16 in 0 of 10,
   * and 16 finished fastest. {@code FI_OFI_RXD_MAX_UNACKED=16} (fewer packets in flight) did not
   * help (4 of 5 stalled): the number of operations in flight is what matters.
   */
  static final int RXD_MAX_DEPTH = 16;

  /**
   * Decision: the transmit depth, {@code tx_attr->size} clamped to {@code int}, and at most {@link
   * #RXD_MAX_DEPTH} on rxd, where deeper windows stall under contention. The fabric worker keeps no
   * more operations in flight than this.
   *
   * @return the depth, 0 when the provider reports none
   */
  public int transmitDepth() {
    int depth = txSize < 0 || txSize > Integer.MAX_VALUE ? Integer.MAX_VALUE : (int) txSize;
    return Quirks.rxd(providerName) && depth > RXD_MAX_DEPTH ? RXD_MAX_DEPTH : depth;
  }

  /**
   * Why this entry cannot be used by {@link LibfabricEndpoint}, or null: {@code FI_MR_RAW} (keys
   * wider than 64 bits) and {@code FI_MR_ENDPOINT} (registrations bound to an endpoint) are not
   * supported.
   *
   * @return the reason, or null when supported
   */
  public @Nullable String unsupportedReason() {
    if ((mrMode & (Abi.MR_RAW | Abi.MR_ENDPOINT)) != 0) {
      return "provider "
          + providerName
          + " needs mr_mode 0x"
          + Integer.toHexString(mrMode)
          + " (FI_MR_RAW or FI_MR_ENDPOINT), which dma does not support";
    }
    return null;
  }

  /**
   * Fails when {@link #unsupportedReason()} names a reason.
   *
   * @throws DmaException of kind FABRIC with that reason
   */
  public void requireSupported() {
    String reason = unsupportedReason();
    if (reason != null) {
      throw DmaException.fabric(DmaException.Reason.PROVIDER_UNAVAILABLE, reason);
    }
  }
}
