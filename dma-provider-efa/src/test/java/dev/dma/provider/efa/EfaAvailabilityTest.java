package dev.dma.provider.efa;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dma.api.DmaConfiguration;
import dev.dma.api.DmaException;
import dev.dma.core.FabricProviders;
import dev.dma.core.FabricService;
import dev.dma.core.PassiveTarget;
import dev.dma.libfabric.Libfabric;
import dev.dma.spi.Availability;
import dev.dma.spi.FabricProvider;
import java.util.List;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;

/**
 * Availability: the decision stepped through by version and probe, and what this host says (no EFA
 * device here, libfabric 1.17): asking for efa-direct fails at start naming the missing piece.
 */
class EfaAvailabilityTest {
  static final int V1_17 = (1 << 16) | 17;
  static final int V2_0 = 2 << 16;
  static final int V2_1 = (2 << 16) | 1;

  @Test
  void efaDirectNeedsLibfabric21() {
    Availability old =
        EfaFabric.EFA_DIRECT.assess(Availability.AVAILABLE, V1_17, () -> List.of("x"));
    assertFalse(old.available());
    assertEquals(
        "libfabric 1.17 is older than 2.1, the first with efa-direct; install libfabric >= 2.1"
            + " (e.g. the AWS EFA installer)",
        old.reason());
    assertFalse(EfaFabric.EFA_DIRECT.assess(Availability.AVAILABLE, V2_0, List::of).available());
    assertTrue(
        EfaFabric.EFA_DIRECT
            .assess(Availability.AVAILABLE, V2_1, () -> List.of("rdmap0-rdm"))
            .available());
  }

  @Test
  void noDeviceIsNamedWithTheQueryThatFoundNone() {
    Availability none =
        EfaFabric.EFA_DIRECT.assess(
            Availability.AVAILABLE,
            V2_1,
            () -> {
              throw DmaException.fabric("fi_getinfo: No data available (-61)");
            });
    assertFalse(none.available());
    assertTrue(
        none.reason()
            .startsWith(
                "no EFA device answered fi_getinfo (provider efa, fabric efa-direct): fi_getinfo:"
                    + " No data available (-61)"),
        none.reason());
    assertTrue(none.reason().contains("fi_info -p efa -f efa-direct"), none.reason());
    Availability empty = EfaFabric.EFA.assess(Availability.AVAILABLE, V1_17, List::of);
    assertTrue(
        empty.reason().startsWith("no EFA device answered fi_getinfo (provider efa, fabric efa)"));
  }

  @Test
  void aLibraryWithoutTheEfaProviderIsToldApartFromAHostWithoutADevice() {
    Availability noProvider =
        EfaFabric.EFA.assess(
            Availability.AVAILABLE,
            V1_17,
            () -> "/usr/lib/x86_64-linux-gnu/libfabric.so.1",
            () -> List.of("tcp", "shm", "net"),
            () -> {
              throw DmaException.fabric("fi_getinfo: No data available (-61)");
            });
    assertEquals(
        "this libfabric (libfabric 1.17, loaded from /usr/lib/x86_64-linux-gnu/libfabric.so.1) has"
            + " no efa provider: install libfabric >= 2.1 built with efa (the AWS EFA installer"
            + " puts one in /opt/amazon/efa/lib64) and load it with -Ddma.libfabric.library=<path>;"
            + " check with `fi_info -l`",
        noProvider.reason());
    Availability noDevice =
        EfaFabric.EFA.assess(
            Availability.AVAILABLE,
            V2_1,
            () -> "/opt/x/libfabric.so.1",
            () -> List.of("efa", "tcp"),
            List::of);
    assertTrue(
        noDevice
            .reason()
            .startsWith("no EFA device answered fi_getinfo (provider efa, fabric efa)"),
        noDevice.reason());
    assertTrue(
        noDevice
            .reason()
            .contains(
                "the efa provider is present in this libfabric (libfabric 2.1,"
                    + " loaded from /opt/x/libfabric.so.1)"),
        noDevice.reason());
    // The version gate still comes first for efa-direct, with its own message.
    assertTrue(
        EfaFabric.EFA_DIRECT
            .assess(Availability.AVAILABLE, V1_17, () -> "p", List::of, List::of)
            .reason()
            .startsWith("libfabric 1.17 is older than 2.1, the first with efa-direct"));
  }

  @Test
  void aMissingLibfabricIsPassedOn() {
    Availability missing = Availability.unavailable("libfabric.so.1 was not found");
    assertEquals(missing, EfaFabric.EFA.assess(missing, 0, List::of));
  }

  @Test
  void bothProvidersAreFoundByName() {
    List<FabricProvider> installed = FabricProviders.installed();
    assertTrue(
        installed.stream().anyMatch(p -> p instanceof EfaDirectProvider), installed.toString());
    assertTrue(installed.stream().anyMatch(p -> p instanceof EfaProvider), installed.toString());
    assertEquals("efa-direct", new EfaDirectProvider().name());
    assertEquals("efa", new EfaProvider().name());
    assertTrue(new EfaDirectProvider().priority() > new EfaProvider().priority());
    assertTrue(new EfaProvider().priority() > 100, "above tcp");
  }

  /** The "done when": here, efa-direct fails at start with the missing piece named. */
  @Test
  void startingEfaDirectWithoutEfaFailsNamingTheMissingPiece() {
    Availability here = new EfaDirectProvider().availability();
    Assumptions.assumeFalse(
        here.available(), "this host has efa-direct; the hardware tests cover it");
    System.out.println("efa-direct here: " + here.reason());
    System.out.println("efa here: " + new EfaProvider().availability().reason());
    if (Libfabric.availability().available() && Libfabric.version() < V2_1) {
      assertEquals(
          "libfabric "
              + Libfabric.versionText(Libfabric.version())
              + " is older than 2.1, the first"
              + " with efa-direct; install libfabric >= 2.1 (e.g. the AWS EFA installer)",
          here.reason());
    }
    DmaConfiguration configuration = DmaConfiguration.builder().providers("efa-direct").build();
    DmaException error =
        assertThrows(
            DmaException.class,
            () -> FabricService.<Buffer>builder(configuration).completer(batch -> {}).start());
    assertEquals(DmaException.Kind.FABRIC, error.kind());
    assertTrue(
        error.getMessage().startsWith("provider \"efa-direct\" is unavailable: " + here.reason()),
        error.getMessage());
    assertEquals(null, error.getCause(), "a message, not a stack trace from libfabric");
    // The same through the passive target, through the provider directly, and for discovery.
    assertThrows(DmaException.class, () -> PassiveTarget.start(configuration));
    DmaException direct =
        assertThrows(DmaException.class, () -> new EfaDirectProvider().open(configuration));
    assertEquals("provider \"efa-direct\" is unavailable: " + here.reason(), direct.getMessage());
    assertThrows(DmaException.class, () -> new EfaDirectProvider().discoverDomains(configuration));
  }

  @Test
  void efaWithoutADeviceFailsTheSameWay() {
    Availability here = new EfaProvider().availability();
    Assumptions.assumeFalse(here.available(), "this host has the efa fabric");
    System.out.println("efa here: " + here.reason());
    if (Libfabric.availability().available()) {
      if (Libfabric.builtInProviders().contains("efa")) {
        // libfabric 2.1 built from source here: the provider is there, the device is not.
        assertTrue(
            here.reason()
                .startsWith("no EFA device answered fi_getinfo (provider efa, fabric efa)"),
            here.reason());
        assertTrue(here.reason().contains("the efa provider is present"), here.reason());
      } else {
        // Debian's 1.17 has no efa provider at all: that is what must be said.
        assertTrue(
            here.reason()
                .startsWith(
                    "this libfabric (libfabric "
                        + Libfabric.versionText(Libfabric.version())
                        + ", loaded from "
                        + Libfabric.libraryPath()
                        + ") has no efa provider"),
            here.reason());
        assertTrue(Libfabric.libraryPath().startsWith("/"), Libfabric.libraryPath());
      }
    }
    DmaConfiguration configuration = DmaConfiguration.builder().providers("efa").build();
    DmaException error =
        assertThrows(DmaException.class, () -> FabricProviders.select(configuration));
    assertTrue(
        error.getMessage().startsWith("provider \"efa\" is unavailable: " + here.reason()),
        error.getMessage());
    assertInstanceOf(
        EfaProvider.class,
        FabricProviders.installed().stream()
            .filter(p -> p.accepts("efa"))
            .findFirst()
            .orElseThrow());
  }
}
