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
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

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
  private static final Stub OTHER = new Stub("other", 0, Availability.AVAILABLE);

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
    assertEquals(DmaException.Reason.PROVIDER_UNAVAILABLE, error.reason());
  }

  @Test
  void anUnknownNameSaysWhatToAddAndWhatIsInstalled() {
    DmaException error =
        assertThrows(DmaException.class, () -> FabricProviders.select("verbs", List.of(TCP)));
    assertEquals(DmaException.Reason.PROVIDER_UNAVAILABLE, error.reason());
    assertEquals(
        "no provider named \"verbs\" is installed; dma knows efa, efa-direct, fake,"
            + " libfabric:<prov>, local, tcp; for libfabric's own provider of that name configure"
            + " \"libfabric:verbs\" (dev.dma:dma-libfabric); any other name needs its provider's"
            + " jar; installed: tcp (available)",
        error.getMessage());
  }

  /**
   * The artifact each name dma knows lives in, written out here rather than read from {@link
   * FabricProviders}, so a wrong entry there fails (dma-it checks it against the jars).
   */
  static Stream<Arguments> everyProviderNameDmaKnows() {
    return Stream.of(
        Arguments.of("tcp", "dma-provider-tcp"),
        Arguments.of("efa", "dma-provider-efa"),
        Arguments.of("efa-direct", "dma-provider-efa"),
        Arguments.of("fake", "dma-provider-fake"),
        Arguments.of("local", "dma-provider-local"),
        Arguments.of("libfabric:shm", "dma-libfabric"),
        Arguments.of("libfabric:verbs;ofi_rxm/mlx5_0", "dma-libfabric"));
  }

  @ParameterizedTest
  @MethodSource("everyProviderNameDmaKnows")
  void aMissingProviderNamesTheJarThatHasIt(String name, String artifact) {
    DmaException error =
        assertThrows(DmaException.class, () -> FabricProviders.select(name, List.of(OTHER)));
    assertEquals(DmaException.Reason.PROVIDER_UNAVAILABLE, error.reason());
    assertEquals(
        "no provider named \""
            + name
            + "\" is installed; add the jar of dev.dma:"
            + artifact
            + " to the class path; installed: other (available)",
        error.getMessage());
  }

  @Test
  void theKnownNamesAreExactlyThoseTested() {
    assertEquals(
        List.of("efa", "efa-direct", "fake", "libfabric:<prov>", "local", "tcp"),
        FabricProviders.knownNames());
    assertEquals(
        everyProviderNameDmaKnows().count(),
        everyProviderNameDmaKnows()
            .filter(args -> FabricProviders.artifactFor((String) args.get()[0]) != null)
            .count());
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
    assertEquals(DmaException.Reason.PROVIDER_UNAVAILABLE, error.reason());
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
        "no provider named \"tcp\" is installed; add the jar of dev.dma:dma-provider-tcp to the"
            + " class path; no providers are installed",
        assertThrows(DmaException.class, () -> FabricProviders.select("tcp", List.of()))
            .getMessage());
  }
}
