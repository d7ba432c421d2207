package dev.dma.provider.efa;

import dev.dma.api.DmaException;
import dev.dma.libfabric.InfoFacts;
import dev.dma.libfabric.Libfabric;
import java.util.ArrayList;
import java.util.List;

/**
 * Every decision dma takes from the {@code fi_info} entry the {@code efa} provider returned for one
 * fabric: whether to use the entry at all, and how to drive it. The same code runs on a real
 * returned entry ({@link EfaEndpoint} after open) and, in tests, on an entry built by libfabric's
 * {@code fi_dupinfo} from the documented values, so every row is checked without the hardware.
 *
 * <table>
 *   <caption>Decisions</caption>
 *   <tr><th>fact</th><th>decision</th></tr>
 *   <tr><td>{@code prov_name}, {@code fabric_attr->name}, {@code ep_attr->type}</td><td>must be
 *       {@code efa}, the pinned fabric, {@code FI_EP_RDM}: otherwise refused</td></tr>
 *   <tr><td>{@code addr_format}</td><td>must be {@code FI_ADDR_EFA}: addresses are 32 bytes,
 *       identity 18 (GID + QPN)</td></tr>
 *   <tr><td>{@code mode}</td><td>only bits dma offered ({@link EfaFabric#hintMode()}); with
 *       {@code FI_CONTEXT2} the provider owns each operation's 64-byte context until its
 *       completion</td></tr>
 *   <tr><td>{@code mr_mode}</td><td>must include {@link EfaFabric#requiredMrMode()}; {@code
 *       LOCAL} → every operand registered (cache or per op); {@code VIRT_ADDR} → advertise virtual
 *       addresses; {@code PROV_KEY} → register with key 0</td></tr>
 *   <tr><td>{@code caps}</td><td>must include RMA, READ, WRITE, REMOTE_READ, REMOTE_WRITE
 *       (efa-direct drops them on a device without RDMA read and write, such as p4d)</td></tr>
 *   <tr><td>{@code tx_attr->size}</td><td>the transmit depth that clamps the in-flight cap; on
 *       efa-direct before libfabric 2.3 at most 1024, the default completion queue, which efa-direct
 *       does not protect against overrun</td></tr>
 *   <tr><td>{@code data_progress}</td><td>{@code MANUAL} → targets must progress</td></tr>
 *   <tr><td>fabric</td><td>{@code efa} → handshake first; efa-direct → initiator first</td></tr>
 * </table>
 *
 * <p>Immutable and thread-safe.
 *
 * @param fabric the fabric decided for
 * @param requiresLocalMr every local operand needs a registration's descriptor
 * @param virtualAddressing remote addresses are virtual addresses
 * @param providerKeys registrations ask for key 0 and the provider picks
 * @param providerOwnsContext each operation's context belongs to the provider until it completes
 *     ({@code FI_CONTEXT2}: it writes the first 16 bytes)
 * @param maxTx the transmit depth ({@code tx_attr->size}, clamped to int and, on efa-direct before
 *     libfabric 2.3, to its 1024-entry completion queue)
 * @param addressBytes the peer address length, 32
 * @param identityBytes the peer identity length, 18
 * @param targetProgressRequired whether a target must read its completion queue for RMA to land
 * @param handshakeFirst whether the first RMA to a peer goes alone until the handshake completes
 * @param initiatorFirst whether a target must insert the initiator before its first RMA
 * @param threadSafe whether the domain is {@code FI_THREAD_SAFE} (informational)
 * @param injectSize {@code tx_attr->inject_size} (informational: dma never injects)
 */
public record EfaDecisions(
    EfaFabric fabric,
    boolean requiresLocalMr,
    boolean virtualAddressing,
    boolean providerKeys,
    boolean providerOwnsContext,
    int maxTx,
    int addressBytes,
    int identityBytes,
    boolean targetProgressRequired,
    boolean handshakeFirst,
    boolean initiatorFirst,
    boolean threadSafe,
    long injectSize) {

  /**
   * efa-direct's default completion queue before libfabric 2.3: 1024 entries, with no overrun
   * protection (EFA.md section 2), so at most this many operations may be in flight.
   */
  public static final int OLD_EFA_DIRECT_CQ_ENTRIES = 1024;

  /**
   * {@code FI_VERSION(2, 3)}: from here efa-direct's default completion queue has 12288 entries.
   */
  static final int FI_VERSION_2_3 = (2 << 16) | 3;

  /**
   * Decides on one returned entry, for the loaded libfabric.
   *
   * @param fabric the fabric the hints pinned
   * @param facts the entry's facts
   * @return the decisions
   * @throws DmaException of kind FABRIC naming every fact that makes the entry unusable
   */
  public static EfaDecisions decide(EfaFabric fabric, InfoFacts facts) {
    return decide(fabric, facts, Libfabric.version());
  }

  /**
   * Decides on one returned entry.
   *
   * @param fabric the fabric the hints pinned
   * @param facts the entry's facts
   * @param libfabricVersion {@code fi_version()}, packed: it sizes efa-direct's default completion
   *     queue, which bounds the transmit depth
   * @return the decisions
   * @throws DmaException of kind FABRIC naming every fact that makes the entry unusable
   */
  public static EfaDecisions decide(EfaFabric fabric, InfoFacts facts, int libfabricVersion) {
    List<String> problems = new ArrayList<>();
    if (!EfaFabric.PROVIDER.equals(facts.providerName())) {
      problems.add("provider is \"" + facts.providerName() + "\", not efa");
    }
    if (!fabric.fabricName().equals(facts.fabricName())) {
      problems.add("fabric is \"" + facts.fabricName() + "\", not " + fabric.fabricName());
    }
    if (facts.endpointType() != EfaAbi.FI_EP_RDM) {
      problems.add("endpoint type is " + facts.endpointType() + ", not FI_EP_RDM (3)");
    }
    if (facts.addrFormat() != EfaAbi.FI_ADDR_EFA) {
      problems.add("address format is " + facts.addrFormat() + ", not FI_ADDR_EFA (12)");
    }
    long unhonoured = facts.mode() & ~fabric.hintMode();
    if (unhonoured != 0) {
      problems.add(
          "mode needs 0x"
              + Long.toHexString(unhonoured)
              + ", which dma did not offer and cannot honour"
              + ((unhonoured & EfaAbi.FI_MSG_PREFIX) != 0 ? " (FI_MSG_PREFIX)" : ""));
    }
    int missingMr = fabric.requiredMrMode() & ~facts.mrMode();
    if (missingMr != 0) {
      problems.add(
          "mr_mode 0x"
              + Integer.toHexString(facts.mrMode())
              + " lacks 0x"
              + Integer.toHexString(missingMr)
              + ((missingMr & EfaAbi.FI_MR_VIRT_ADDR) != 0
                  ? " (without FI_MR_VIRT_ADDR efa still expects virtual addresses, and every RMA"
                      + " fails with a bad remote address)"
                  : ""));
    }
    String unsupported = facts.unsupportedReason();
    if (unsupported != null) {
      problems.add(unsupported);
    }
    long missingCaps = EfaAbi.RMA_CAPS & ~facts.caps();
    if (missingCaps != 0) {
      problems.add(
          "caps lack RMA (0x"
              + Long.toHexString(missingCaps)
              + " missing)"
              + (fabric == EfaFabric.EFA_DIRECT
                  ? ": this EFA device has no RDMA read and write for efa-direct (p4d lacks RDMA"
                      + " write); use provider efa, which emulates what the device lacks"
                  : ""));
    }
    if (!problems.isEmpty()) {
      throw DmaException.fabric(
          DmaException.Reason.PROVIDER_UNAVAILABLE,
          fabric.configuredName()
              + " cannot use what fi_getinfo returned: "
              + String.join("; ", problems));
    }
    return new EfaDecisions(
        fabric,
        facts.requiresLocalMr(),
        facts.virtualAddressing(),
        facts.providerKeys(),
        (facts.mode() & EfaAbi.FI_CONTEXT2) != 0,
        transmitDepth(fabric, facts, libfabricVersion),
        EfaAddresses.ADDRESS_BYTES,
        EfaAddresses.IDENTITY_BYTES,
        fabric.targetProgressRequired() || facts.dataProgress() == EfaAbi.FI_PROGRESS_MANUAL,
        fabric.handshakeFirst(),
        fabric.initiatorFirst(),
        facts.threading() == EfaAbi.FI_THREAD_SAFE,
        facts.injectSize());
  }

  /**
   * {@code tx_attr->size}, but no more than efa-direct's completion queue holds: the endpoint opens
   * its queue at the provider's default size, and efa-direct does not protect against overrunning
   * it (1024 entries before libfabric 2.3, against a transmit depth of about 4096).
   */
  private static int transmitDepth(EfaFabric fabric, InfoFacts facts, int libfabricVersion) {
    int depth = facts.transmitDepth();
    if (fabric == EfaFabric.EFA_DIRECT
        && libfabricVersion < FI_VERSION_2_3
        && (depth == 0 || depth > OLD_EFA_DIRECT_CQ_ENTRIES)) {
      return OLD_EFA_DIRECT_CQ_ENTRIES;
    }
    return depth;
  }
}
