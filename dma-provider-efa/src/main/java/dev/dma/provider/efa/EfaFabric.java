package dev.dma.provider.efa;

import dev.dma.api.DmaConfiguration;
import dev.dma.api.DmaException;
import dev.dma.libfabric.EndpointPolicy;
import dev.dma.libfabric.Libfabric;
import dev.dma.libfabric.LibfabricEndpoint;
import dev.dma.spi.Availability;
import java.util.List;
import java.util.function.Supplier;
import org.jspecify.annotations.Nullable;

/**
 * The two fabrics of libfabric's {@code efa} provider, and what dma asks of each (EFA.md sections 1
 * to 3, SEED-SPEC section 4). Both are pinned by {@code fabric_attr->name}, because one provider
 * serves both and lists efa-direct first.
 *
 * <table>
 *   <caption>Hints per fabric</caption>
 *   <tr><th></th><th>{@link #EFA_DIRECT}</th><th>{@link #EFA}</th></tr>
 *   <tr><td>prov_name / fabric name</td><td>{@code efa} / {@code efa-direct}</td>
 *       <td>{@code efa} / {@code efa}</td></tr>
 *   <tr><td>mode offered</td><td>{@code FI_CONTEXT2 | FI_RX_CQ_DATA}</td>
 *       <td>{@code FI_CONTEXT | FI_CONTEXT2}</td></tr>
 *   <tr><td>mr_mode offered</td><td colspan="2">{@code LOCAL | VIRT_ADDR | ALLOCATED |
 *       PROV_KEY}</td></tr>
 *   <tr><td>mr_mode it must return</td><td>{@code LOCAL | VIRT_ADDR | ALLOCATED | PROV_KEY}</td>
 *       <td>{@code VIRT_ADDR | ALLOCATED | PROV_KEY} ({@code LOCAL} comes back because dma offers
 *       it, and saves efa its bounce buffers)</td></tr>
 *   <tr><td>libfabric</td><td>2.1 or newer</td><td>any with the efa provider</td></tr>
 *   <tr><td>target progress</td><td>none (the NIC serves RMA)</td><td>required (emulated paths,
 *       handshake)</td></tr>
 *   <tr><td>first RMA to a peer</td><td>the target must have inserted the initiator</td><td>one
 *       operation alone until the handshake completes ({@link EfaEndpoint})</td></tr>
 * </table>
 *
 * <p>Why {@code FI_RX_CQ_DATA} for efa-direct: from libfabric 2.4, on a device without unsolicited
 * write receive, efa-direct returns an {@code FI_RMA} entry only when the application takes {@code
 * FI_RX_CQ_DATA} (efa_user_info.c). That mode concerns writes with immediate data, which dma never
 * issues (no {@code FI_REMOTE_CQ_DATA}), so honouring it costs nothing.
 *
 * <p>Immutable and thread-safe; {@link #availability()} is computed once per fabric.
 */
public enum EfaFabric {
  /** Device RMA with no software protocol: provider {@code efa-direct}. */
  EFA_DIRECT(
      "efa-direct",
      "efa-direct",
      EfaAbi.FI_CONTEXT2 | EfaAbi.FI_RX_CQ_DATA,
      EfaAbi.FI_MR_LOCAL | EfaAbi.FI_MR_VIRT_ADDR | EfaAbi.FI_MR_ALLOCATED | EfaAbi.FI_MR_PROV_KEY,
      EfaAbi.FI_VERSION_2_1),
  /**
   * The RDM protocol formerly called rxr, with emulated paths and a handshake: provider {@code
   * efa}.
   */
  EFA(
      "efa",
      "efa",
      EfaAbi.FI_CONTEXT | EfaAbi.FI_CONTEXT2,
      EfaAbi.FI_MR_VIRT_ADDR | EfaAbi.FI_MR_ALLOCATED | EfaAbi.FI_MR_PROV_KEY,
      0);

  /** libfabric's provider name for both fabrics. */
  public static final String PROVIDER = "efa";

  private final String configuredName;
  private final String fabricName;
  private final long hintMode;
  private final int requiredMrMode;
  private final int minimumVersion;
  private volatile @Nullable Availability availability;

  EfaFabric(
      String configuredName,
      String fabricName,
      long hintMode,
      int requiredMrMode,
      int minimumVersion) {
    this.configuredName = configuredName;
    this.fabricName = fabricName;
    this.hintMode = hintMode;
    this.requiredMrMode = requiredMrMode;
    this.minimumVersion = minimumVersion;
  }

  /**
   * The dma provider name, as in {@link DmaConfiguration#providers()}.
   *
   * @return {@code efa-direct} or {@code efa}
   */
  public String configuredName() {
    return configuredName;
  }

  /**
   * The fabric name pinned in the hints ({@code fabric_attr->name}).
   *
   * @return {@code efa-direct} or {@code efa}
   */
  public String fabricName() {
    return fabricName;
  }

  /**
   * The mode bits offered in the hints: what dma honours for this fabric.
   *
   * @return the bits
   */
  public long hintMode() {
    return hintMode;
  }

  /**
   * The {@code mr_mode} bits the returned entry must carry; an entry without them is refused.
   *
   * @return the bits
   */
  public int requiredMrMode() {
    return requiredMrMode;
  }

  /**
   * The oldest libfabric that has this fabric, packed as {@code major << 16 | minor}.
   *
   * @return the version, 0 for any
   */
  public int minimumVersion() {
    return minimumVersion;
  }

  /**
   * Whether a target must progress its endpoint for RMA into it to land: the {@code efa} fabric
   * emulates RMA the device cannot do, and answers handshakes, only while the target reads its
   * completion queue; efa-direct's NIC serves RMA by itself.
   *
   * @return whether targets must progress
   */
  public boolean targetProgressRequired() {
    return this == EFA;
  }

  /**
   * Whether the first RMA to a peer waits for a handshake with it ({@code efa} only).
   *
   * @return whether a handshake comes first
   */
  public boolean handshakeFirst() {
    return this == EFA;
  }

  /**
   * Whether a target must hold the initiator's address in its address vector before the initiator's
   * first RMA reaches it (efa-direct only; the {@code efa} fabric handshakes instead).
   *
   * @return whether the initiator-first rule applies
   */
  public boolean initiatorFirst() {
    return this == EFA_DIRECT;
  }

  /**
   * The endpoint policy: provider {@code efa}, this fabric pinned, {@link #hintMode()}, the default
   * {@code mr_mode} hints ({@code LOCAL | VIRT_ADDR | ALLOCATED | PROV_KEY}), no default source
   * node (EFA binds to the device and advertises its own address), identity 18 bytes.
   *
   * @return the policy
   */
  public EndpointPolicy policy() {
    return EndpointPolicy.of(PROVIDER)
        .withFabricName(fabricName)
        .withHintMode(hintMode)
        .withHintMrMode(EndpointPolicy.DEFAULT_HINT_MR_MODE)
        .withIdentityLength(EfaAddresses.IDENTITY_BYTES);
  }

  /**
   * Whether this fabric can open endpoints here, and why not; computed once. Unavailable when
   * libfabric is, when it is older than {@link #minimumVersion()}, or when {@code fi_getinfo} finds
   * no EFA device for this fabric.
   *
   * @return the availability
   */
  public Availability availability() {
    Availability known = availability;
    if (known == null) {
      synchronized (this) {
        known = availability;
        if (known == null) {
          known =
              assess(
                  Libfabric.availability(),
                  Libfabric.version(),
                  Libfabric::libraryPath,
                  Libfabric::builtInProviders,
                  this::probe);
          availability = known;
        }
      }
    }
    return known;
  }

  private List<String> probe() {
    return LibfabricEndpoint.discoverDomains(policy(), DmaConfiguration.defaults());
  }

  /**
   * The availability decision for a library that has the efa provider, for tests that step through
   * the version and device checks.
   */
  Availability assess(Availability library, int version, Supplier<List<String>> domains) {
    return assess(library, version, () -> "libfabric.so.1", () -> List.of(PROVIDER), domains);
  }

  /**
   * The availability decision, separated from the library so tests can step through it. The missing
   * piece is named in this order: libfabric itself; a version older than {@link #minimumVersion()};
   * a library without the efa provider ({@code fi_getinfo} with {@code FI_PROV_ATTR_ONLY}, as
   * {@code fi_info -l}: Debian's builds have none); no EFA device answering for this fabric.
   *
   * @param library whether libfabric loaded
   * @param version {@code fi_version()} of the library
   * @param libraryPath where the library was loaded from, for the message
   * @param builtIn the providers the library holds; may throw {@link DmaException}, and then the
   *     device probe decides
   * @param domains lists this fabric's domains (one per EFA device); may throw {@link DmaException}
   *     when {@code fi_getinfo} fails
   * @return the availability, with the missing piece named
   */
  Availability assess(
      Availability library,
      int version,
      Supplier<String> libraryPath,
      Supplier<List<String>> builtIn,
      Supplier<List<String>> domains) {
    if (!library.available()) {
      return library;
    }
    if (version < minimumVersion) {
      return Availability.unavailable(
          "libfabric "
              + Libfabric.versionText(version)
              + " is older than "
              + Libfabric.versionText(minimumVersion)
              + ", the first with "
              + fabricName
              + "; install libfabric >= "
              + Libfabric.versionText(minimumVersion)
              + " (e.g. the AWS EFA installer)");
    }
    String which =
        "libfabric " + Libfabric.versionText(version) + ", loaded from " + libraryPath.get();
    boolean hasProvider;
    try {
      hasProvider = builtIn.get().contains(PROVIDER);
    } catch (DmaException unknown) {
      hasProvider = true; // cannot tell: let the device probe speak
    }
    if (!hasProvider) {
      return Availability.unavailable(
          "this libfabric ("
              + which
              + ") has no efa provider: install libfabric >= "
              + Libfabric.versionText(Math.max(minimumVersion, EFA_DIRECT.minimumVersion))
              + " built with efa (the AWS EFA installer puts one in /opt/amazon/efa/lib64) and"
              + " load it with -D"
              + Libfabric.LIBRARY_PROPERTY
              + "=<path>; check with `fi_info -l`");
    }
    String answer;
    try {
      List<String> found = domains.get();
      if (!found.isEmpty()) {
        return Availability.AVAILABLE;
      }
      answer = "it returned no entries";
    } catch (DmaException queryFailed) {
      answer = queryFailed.getMessage();
    }
    return Availability.unavailable(
        "no EFA device answered fi_getinfo (provider efa, fabric "
            + fabricName
            + "): "
            + answer
            + "; the efa provider is present in this libfabric ("
            + which
            + "), so this host lacks an EFA device: this needs an EFA-enabled instance; check with"
            + " `fi_info -p efa -f "
            + fabricName
            + "`");
  }

  /**
   * Fails unless this fabric is available here.
   *
   * @throws DmaException of kind FABRIC, {@code provider "efa-direct" is unavailable: <reason>}
   */
  void requireAvailable() {
    Availability now = availability();
    if (!now.available()) {
      throw DmaException.fabric(
          DmaException.Reason.PROVIDER_UNAVAILABLE,
          "provider \"" + configuredName + "\" is unavailable: " + now.reason());
    }
  }
}
