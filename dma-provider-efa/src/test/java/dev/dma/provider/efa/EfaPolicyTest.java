package dev.dma.provider.efa;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dma.api.DmaException;
import dev.dma.libfabric.EndpointPolicy;
import dev.dma.libfabric.InfoEntry;
import dev.dma.libfabric.InfoFacts;
import dev.dma.libfabric.Libfabric;
import java.util.function.UnaryOperator;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The policies' hints, and every decision taken from a returned fi_info, on entries that libfabric
 * itself allocates ({@code fi_dupinfo(NULL)}) and the test fills with the documented efa-direct and
 * efa values of the {@code *.fi_info.properties} resources: no EFA device needed.
 */
class EfaPolicyTest {
  static final int V2_2 = (2 << 16) | 2;
  static final int V2_3 = (2 << 16) | 3;
  static final int V2_6 = (2 << 16) | 6;
  static final long MODE_CONTEXT2 = 1L << 52;
  static final long MODE_CONTEXT = 1L << 59;
  static final long MODE_RX_CQ_DATA = 1L << 56;
  static final long MODE_MSG_PREFIX = 1L << 58;
  static final int MR_LOCAL = 1 << 2;
  static final int MR_VIRT_ADDR = 1 << 4;
  static final int MR_ALLOCATED = 1 << 5;
  static final int MR_PROV_KEY = 1 << 6;
  static final int MR_ENDPOINT = 1 << 9;
  static final long RMA_CAPS = (1L << 2) | (1L << 8) | (1L << 9) | (1L << 12) | (1L << 13);

  @BeforeAll
  static void libfabric() {
    Assumptions.assumeTrue(Libfabric.availability().available(), Libfabric.availability().reason());
  }

  static InfoFacts documented(EfaFabric fabric) {
    return FiInfoResource.load(fabric.configuredName() + ".fi_info.properties");
  }

  /** Builds the entry natively, copies it as the endpoint copies its chosen entry, decides. */
  static EfaDecisions decideNatively(EfaFabric fabric, InfoFacts facts) {
    try (InfoEntry built = InfoEntry.of(facts);
        InfoEntry chosen = built.copy()) {
      InfoFacts read = chosen.facts();
      assertEquals(facts, read, "the facts survive fi_dupinfo");
      return EfaDecisions.decide(fabric, read, V2_6);
    }
  }

  static InfoFacts with(InfoFacts base, UnaryOperator<Builder> change) {
    return change.apply(new Builder(base)).build();
  }

  @Test
  void policiesPinProviderFabricModeAndIdentity() {
    EndpointPolicy direct = EfaFabric.EFA_DIRECT.policy();
    assertEquals("efa", direct.providerName());
    assertEquals("efa-direct", direct.fabricName());
    assertEquals(MODE_CONTEXT2 | MODE_RX_CQ_DATA, direct.hintMode());
    assertEquals(MR_LOCAL | MR_VIRT_ADDR | MR_ALLOCATED | MR_PROV_KEY, direct.hintMrMode());
    assertEquals(null, direct.defaultSourceNode(), "EFA binds to the device, not an IP");
    assertEquals(18, direct.identityLength());

    EndpointPolicy rdm = EfaFabric.EFA.policy();
    assertEquals("efa", rdm.providerName());
    assertEquals("efa", rdm.fabricName());
    assertEquals(MODE_CONTEXT | MODE_CONTEXT2, rdm.hintMode());
    assertEquals(MR_LOCAL | MR_VIRT_ADDR | MR_ALLOCATED | MR_PROV_KEY, rdm.hintMrMode());
    assertEquals(18, rdm.identityLength());
  }

  @Test
  void hintsAreBuiltAsFiGetinfoReceivesThem() {
    for (EfaFabric fabric : EfaFabric.values()) {
      try (InfoEntry hints = InfoEntry.hints(fabric.policy())) {
        InfoFacts facts = hints.facts();
        assertEquals("efa", facts.providerName());
        assertEquals(fabric.fabricName(), facts.fabricName());
        assertEquals("", facts.domainName(), "no domain pinned in the hints");
        assertEquals(InfoEntry.HINT_CAPS, facts.caps());
        assertEquals(
            (1L << 1) | RMA_CAPS, facts.caps(), "FI_MSG | FI_RMA | READ | WRITE | REMOTE_*");
        assertEquals(fabric.hintMode(), facts.mode());
        assertEquals(3, facts.endpointType(), "FI_EP_RDM");
        assertEquals(MR_LOCAL | MR_VIRT_ADDR | MR_ALLOCATED | MR_PROV_KEY, facts.mrMode());
        assertEquals(0, facts.addrFormat(), "address format left to the provider");
        assertEquals(0, facts.threading());
        assertEquals(0, facts.dataProgress());
      }
    }
  }

  @Test
  void efaDirectDecisions() {
    InfoFacts facts = documented(EfaFabric.EFA_DIRECT);
    EfaDecisions decisions = decideNatively(EfaFabric.EFA_DIRECT, facts);
    assertTrue(decisions.requiresLocalMr(), "FI_MR_LOCAL: every operand registered");
    assertTrue(decisions.virtualAddressing(), "FI_MR_VIRT_ADDR: advertise virtual addresses");
    assertTrue(decisions.providerKeys(), "FI_MR_PROV_KEY: register with key 0");
    assertTrue(decisions.providerOwnsContext(), "FI_CONTEXT2: the context is the provider's");
    assertEquals(4096, decisions.maxTx(), "tx_attr->size clamps the in-flight cap");
    assertEquals(32, decisions.addressBytes());
    assertEquals(18, decisions.identityBytes());
    assertFalse(decisions.targetProgressRequired(), "FI_PROGRESS_AUTO: the NIC serves RMA");
    assertFalse(decisions.handshakeFirst());
    assertTrue(decisions.initiatorFirst(), "the target must insert the initiator first");
    assertTrue(decisions.threadSafe());
    assertEquals(32, decisions.injectSize());
  }

  @Test
  void efaRdmDecisions() {
    InfoFacts facts = documented(EfaFabric.EFA);
    EfaDecisions decisions = decideNatively(EfaFabric.EFA, facts);
    assertTrue(decisions.requiresLocalMr(), "LOCAL offered and returned: no bounce buffers");
    assertTrue(decisions.virtualAddressing());
    assertTrue(decisions.providerKeys());
    assertFalse(decisions.providerOwnsContext(), "efa needs no FI_CONTEXT2");
    assertEquals(4096, decisions.maxTx());
    assertTrue(decisions.targetProgressRequired(), "FI_PROGRESS_MANUAL: targets must progress");
    assertTrue(decisions.handshakeFirst());
    assertFalse(decisions.initiatorFirst());
    assertEquals(4032, decisions.injectSize());
  }

  @Test
  void efaWithoutLocalRegistrationStillServes() {
    InfoFacts facts =
        with(documented(EfaFabric.EFA), b -> b.mrMode(MR_VIRT_ADDR | MR_ALLOCATED | MR_PROV_KEY));
    assertFalse(decideNatively(EfaFabric.EFA, facts).requiresLocalMr(), "LOCAL is optional on efa");
  }

  @Test
  void aDeviceWithoutRdmaReadAndWriteIsRefusedForEfaDirectWithAdvice() {
    InfoFacts facts = with(documented(EfaFabric.EFA_DIRECT), b -> b.caps((1L << 1) | (1L << 57)));
    DmaException refused =
        assertThrows(DmaException.class, () -> decideNatively(EfaFabric.EFA_DIRECT, facts));
    assertTrue(
        refused
            .getMessage()
            .startsWith("efa-direct cannot use what fi_getinfo returned: caps lack RMA"),
        refused.getMessage());
    assertTrue(refused.getMessage().contains("use provider efa"), refused.getMessage());
  }

  @Test
  void everyUnusableFactIsNamed() {
    InfoFacts good = documented(EfaFabric.EFA_DIRECT);
    assertRefused(with(good, b -> b.provider("tcp")), "provider is \"tcp\", not efa");
    assertRefused(with(good, b -> b.fabric("efa")), "fabric is \"efa\", not efa-direct");
    assertRefused(with(good, b -> b.endpointType(2)), "endpoint type is 2, not FI_EP_RDM (3)");
    assertRefused(with(good, b -> b.addrFormat(2)), "address format is 2, not FI_ADDR_EFA (12)");
    assertRefused(with(good, b -> b.mode(MODE_CONTEXT2 | MODE_MSG_PREFIX)), "(FI_MSG_PREFIX)");
    assertRefused(
        with(good, b -> b.mrMode(MR_LOCAL | MR_ALLOCATED | MR_PROV_KEY)),
        "without FI_MR_VIRT_ADDR");
    assertRefused(
        with(good, b -> b.mrMode(MR_VIRT_ADDR | MR_ALLOCATED | MR_PROV_KEY)), "lacks 0x4");
    assertRefused(with(good, b -> b.mrMode(good.mrMode() | MR_ENDPOINT)), "FI_MR_ENDPOINT");
    // efa-direct's own mode bit is not something the efa fabric offered to honour.
    InfoFacts rdm = documented(EfaFabric.EFA);
    assertRefused(
        EfaFabric.EFA, with(rdm, b -> b.mode(MODE_RX_CQ_DATA)), "mode needs 0x100000000000000");
  }

  @Test
  void transmitDepthIsClampedAndZeroMeansNone() {
    InfoFacts huge = with(documented(EfaFabric.EFA_DIRECT), b -> b.txSize(-1));
    assertEquals(Integer.MAX_VALUE, decideNatively(EfaFabric.EFA_DIRECT, huge).maxTx());
    InfoFacts none = with(documented(EfaFabric.EFA_DIRECT), b -> b.txSize(0));
    assertEquals(0, decideNatively(EfaFabric.EFA_DIRECT, none).maxTx());
  }

  @Test
  void efaDirectBefore23KeepsWithinItsDefaultCompletionQueue() {
    InfoFacts facts = documented(EfaFabric.EFA_DIRECT);
    try (InfoEntry entry = InfoEntry.of(facts)) {
      assertEquals(1024, EfaDecisions.decide(EfaFabric.EFA_DIRECT, entry.facts(), V2_2).maxTx());
      assertEquals(4096, EfaDecisions.decide(EfaFabric.EFA_DIRECT, entry.facts(), V2_3).maxTx());
    }
    try (InfoEntry entry = InfoEntry.of(documented(EfaFabric.EFA))) {
      assertEquals(
          4096,
          EfaDecisions.decide(EfaFabric.EFA, entry.facts(), V2_2).maxTx(),
          "efa keeps its own queues");
    }
  }

  @Test
  void genericDecisionsOfTheLibfabricEndpoint() {
    InfoFacts facts = documented(EfaFabric.EFA_DIRECT);
    try (InfoEntry basic = InfoEntry.of(with(facts, b -> b.mrMode(1)))) {
      InfoFacts read = basic.facts();
      assertTrue(read.virtualAddressing(), "FI_MR_BASIC means virtual addresses");
      assertTrue(read.providerKeys(), "and provider keys");
      assertFalse(read.requiresLocalMr());
    }
    try (InfoEntry none = InfoEntry.of(with(facts, b -> b.mrMode(0)))) {
      InfoFacts read = none.facts();
      assertFalse(read.virtualAddressing());
      assertFalse(read.providerKeys());
      assertEquals(null, read.unsupportedReason());
    }
    try (InfoEntry endpoint = InfoEntry.of(with(facts, b -> b.mrMode(MR_ENDPOINT)))) {
      assertEquals(
          "provider efa needs mr_mode 0x200 (FI_MR_RAW or FI_MR_ENDPOINT), which dma does not"
              + " support",
          endpoint.facts().unsupportedReason());
      assertThrows(DmaException.class, () -> endpoint.facts().requireSupported());
    }
  }

  private static void assertRefused(InfoFacts facts, String expected) {
    assertRefused(EfaFabric.EFA_DIRECT, facts, expected);
  }

  private static void assertRefused(EfaFabric fabric, InfoFacts facts, String expected) {
    DmaException refused = assertThrows(DmaException.class, () -> decideNatively(fabric, facts));
    assertTrue(refused.getMessage().contains(expected), refused.getMessage());
  }

  /** A copy of facts with one field changed. */
  static final class Builder {
    private String provider;
    private String fabric;
    private final String domain;
    private long caps;
    private long mode;
    private int addrFormat;
    private int endpointType;
    private int mrMode;
    private final int threading;
    private final int progress;
    private long txSize;
    private final long inject;

    Builder(InfoFacts f) {
      provider = f.providerName();
      fabric = f.fabricName();
      domain = f.domainName();
      caps = f.caps();
      mode = f.mode();
      addrFormat = f.addrFormat();
      endpointType = f.endpointType();
      mrMode = f.mrMode();
      threading = f.threading();
      progress = f.dataProgress();
      txSize = f.txSize();
      inject = f.injectSize();
    }

    Builder provider(String v) {
      provider = v;
      return this;
    }

    Builder fabric(String v) {
      fabric = v;
      return this;
    }

    Builder caps(long v) {
      caps = v;
      return this;
    }

    Builder mode(long v) {
      mode = v;
      return this;
    }

    Builder addrFormat(int v) {
      addrFormat = v;
      return this;
    }

    Builder endpointType(int v) {
      endpointType = v;
      return this;
    }

    Builder mrMode(int v) {
      mrMode = v;
      return this;
    }

    Builder txSize(long v) {
      txSize = v;
      return this;
    }

    InfoFacts build() {
      return new InfoFacts(
          provider,
          fabric,
          domain,
          caps,
          mode,
          addrFormat,
          endpointType,
          mrMode,
          threading,
          progress,
          txSize,
          inject);
    }
  }
}
