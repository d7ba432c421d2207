package dev.dma.fake;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dma.api.DmaConfiguration;
import dev.dma.api.DmaException;
import dev.dma.core.FabricProviders;
import dev.dma.spi.FabricEndpoint;
import dev.dma.spi.FabricProvider;
import java.util.List;
import org.junit.jupiter.api.Test;

class FakeProviderTest {

  @Test
  void isFoundOnTheClassPathByTheNameFake() {
    FabricProvider provider =
        FabricProviders.select(DmaConfiguration.builder().providers("fake").build());
    assertInstanceOf(FakeProvider.class, provider);
    assertEquals("fake", provider.name());
    assertEquals(Integer.MIN_VALUE, provider.priority());
    assertTrue(provider.availability().available());
    assertTrue(FabricProviders.installed().stream().anyMatch(FakeProvider.class::isInstance));
  }

  @Test
  void opensOnTheFabricNamedByTheFirstInterface() {
    try (FakeFabric fabric = FakeFabric.create("provider-test")) {
      DmaConfiguration configuration =
          DmaConfiguration.builder()
              .providers("fake")
              .interfaces(List.of("provider-test", "ignored"))
              .build();
      try (FabricEndpoint endpoint = new FakeProvider().open(configuration)) {
        assertEquals(List.of(endpoint), fabric.endpoints());
        assertSame(fabric, ((FakeEndpoint) endpoint).fabric());
        assertTrue(new FakeProvider().discoverDomains(configuration).contains("provider-test"));
      }
      assertEquals(List.of(), fabric.endpoints());
      assertEquals(1, fabric.counters().endpointsOpened());
    }
  }

  @Test
  void anUnknownFabricNameFailsNamingWhatIsOpen() {
    DmaConfiguration configuration =
        DmaConfiguration.builder().providers("fake").interfaces(List.of("nope")).build();
    DmaException failure =
        assertThrows(DmaException.class, () -> new FakeProvider().open(configuration));
    assertTrue(
        failure.getMessage().startsWith("no fabric domain named \"nope\"; open fake fabrics: "),
        failure.getMessage());
    assertEquals(DmaException.Kind.FABRIC, failure.kind());
  }

  @Test
  void withoutInterfacesItUsesTheDefaultFabric() {
    FakeProvider provider = new FakeProvider();
    DmaConfiguration configuration = DmaConfiguration.builder().providers("fake").build();
    assertEquals(FakeFabric.DEFAULT_NAME, provider.discoverDomains(configuration).getFirst());
    try (FabricEndpoint endpoint = provider.open(configuration)) {
      FakeFabric fabric = ((FakeEndpoint) endpoint).fabric();
      assertSame(FakeFabric.defaultFabric(), fabric);
      assertEquals(FakeFabric.DEFAULT_NAME, fabric.name());
      fabric.close();
    }
    assertNull(FakeFabric.find(FakeFabric.DEFAULT_NAME));
  }

  @Test
  void fabricNamesAreUniqueWhileOpenAndReusableAfterClose() {
    FakeFabric fabric = FakeFabric.create("unique");
    assertThrows(IllegalStateException.class, () -> FakeFabric.create("unique"));
    assertSame(fabric, FakeFabric.named("unique"));
    fabric.close();
    assertTrue(fabric.isClosed());
    assertThrows(DmaException.class, fabric::openEndpoint);
    try (FakeFabric again = FakeFabric.create("unique")) {
      assertSame(again, FakeFabric.named("unique"));
    }
  }

  @Test
  void errorTextsAreLibfabrics() {
    FabricEndpoint endpoint;
    try (FakeFabric fabric = FakeFabric.create("texts")) {
      endpoint = fabric.openEndpoint();
      assertEquals("Resource temporarily unavailable", endpoint.errorText(-11));
      assertEquals("Resource temporarily unavailable", endpoint.errorText(11));
      assertEquals("Permission denied", endpoint.errorText(13));
      assertEquals("Invalid argument", endpoint.errorText(-22));
      assertEquals("Transport endpoint is not connected", endpoint.errorText(107));
      assertEquals("Operation canceled", endpoint.errorText(125));
      assertEquals("Input/output error", endpoint.errorText(5));
      assertEquals("No such file or directory", endpoint.errorText(2));
      assertEquals("Connection timed out", endpoint.errorText(110));
      assertEquals("Cannot allocate memory", endpoint.errorText(12));
      assertEquals("Error available", endpoint.errorText(-259));
      assertEquals("Required key not available", endpoint.errorText(266));
      assertEquals("Unspecified error", endpoint.errorText(9999));
      assertEquals("Unknown error 200", endpoint.errorText(200));
    }
    assertEquals(
        "completion error: Operation canceled (err=125); provider: x (prov_errno=-3)",
        FiErrno.completionMessage(-125, -3, "x"));
    assertEquals("fi_cq_read: Input/output error (-5)", FiErrno.callMessage("fi_cq_read", 5));
  }
}
