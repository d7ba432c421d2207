package dev.dma.core;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;

import dev.dma.api.DmaConfiguration;
import dev.dma.api.DmaException;
import dev.dma.spi.Availability;
import dev.dma.spi.FabricEndpoint;
import dev.dma.spi.FabricProvider;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The provider selection rules, on stand-in providers. */
class FabricProvidersTest {
  private record Stub(String name, int priority, Availability availability, String prefix)
      implements FabricProvider {
    Stub(String name, int priority, Availability availability) {
      this(name, priority, availability, null);
    }

    @Override
    public boolean accepts(String configuredName) {
      return prefix == null ? name.equals(configuredName) : configuredName.startsWith(prefix);
    }

    @Override
    public FabricEndpoint open(DmaConfiguration configuration) {
      throw new UnsupportedOperationException("not opened in these tests");
    }
  }

  private static final Stub EFA =
      new Stub("efa-direct", 200, Availability.unavailable("no EFA device answered"));
  private static final Stub TCP = new Stub("tcp", 100, Availability.AVAILABLE);
  private static final Stub FAMILY =
      new Stub("libfabric", 10, Availability.AVAILABLE, "libfabric:");
  private static final Stub FAKE = new Stub("fake", Integer.MIN_VALUE, Availability.AVAILABLE);

  @Test
  void aNamedProviderIsTheOneThatAcceptsTheName() {
    List<FabricProvider> all = List.of(EFA, TCP, FAMILY, FAKE);
    assertSame(TCP, FabricProviders.select("tcp", all));
    assertSame(FAKE, FabricProviders.select("fake", all));
    assertSame(FAMILY, FabricProviders.select("libfabric:sockets", all));
  }

  @Test
  void anUnavailableNamedProviderFailsWithItsReasonAndTheInventory() {
    DmaException error =
        assertThrows(
            DmaException.class,
            () -> FabricProviders.select("efa-direct", List.of(EFA, TCP, FAKE)));
    assertEquals(
        "provider \"efa-direct\" is unavailable: no EFA device answered; installed: efa-direct"
            + " (unavailable: no EFA device answered), tcp (available), fake (available)",
        error.getMessage());
  }

  @Test
  void anUnknownNameSaysWhatToAddAndWhatIsInstalled() {
    DmaException error =
        assertThrows(DmaException.class, () -> FabricProviders.select("verbs", List.of(TCP)));
    assertEquals(
        "no provider named \"verbs\" is installed; add its jar (for example dma-provider-verbs) to"
            + " the class path; installed: tcp (available)",
        error.getMessage());
  }

  @Test
  void withNoNameTheHighestPriorityAvailableProviderWins() {
    assertSame(TCP, FabricProviders.selectByPriority(List.of(EFA, TCP, FAMILY, FAKE)));
  }

  @Test
  void theFakeIsChosenOnlyWhenItIsTheOnlyProvider() {
    assertSame(FAKE, FabricProviders.selectByPriority(List.of(FAKE)));
    Stub noTcp = new Stub("tcp", 100, Availability.unavailable("libfabric is not installed"));
    DmaException error =
        assertThrows(
            DmaException.class, () -> FabricProviders.selectByPriority(List.of(noTcp, FAKE)));
    assertEquals(
        "no provider is named in the configuration and none installed is available; name one in"
            + " \"providers\" or install one (for example dma-provider-tcp with libfabric);"
            + " installed: tcp (unavailable: libfabric is not installed), fake (available)",
        error.getMessage());
  }

  @Test
  void aFamilyThatNeedsANameIsNeverChosenWithout() {
    assertThrows(DmaException.class, () -> FabricProviders.selectByPriority(List.of(FAMILY, FAKE)));
  }

  @Test
  void theResolvedConfigurationNamesTheChosenProvider() {
    DmaConfiguration unnamed = DmaConfiguration.defaults();
    assertEquals(List.of("tcp"), FabricProviders.resolve(unnamed, TCP).providers());
    DmaConfiguration named = DmaConfiguration.builder().providers("libfabric:shm").build();
    assertSame(named, FabricProviders.resolve(named, FAMILY));
  }

  @Test
  void noProvidersAtAll() {
    assertEquals(
        "no provider named \"tcp\" is installed; add its jar (for example dma-provider-tcp) to the"
            + " class path; no providers are installed",
        assertThrows(DmaException.class, () -> FabricProviders.select("tcp", List.of()))
            .getMessage());
  }
}
