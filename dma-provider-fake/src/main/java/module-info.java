/**
 * Provider {@code fake}: an in-JVM fabric for tests. Endpoints of one named {@link
 * dev.dma.fake.FakeFabric} address each other, RMA copies real bytes between native memory, and a
 * deterministic {@link dev.dma.fake.FakeScript} reproduces on demand what real providers do wrong
 * or differently ({@code -FI_EAGAIN}, CQ error entries, failed CQ reads, unreachable peers, EFA's
 * local-registration, {@code FI_CONTEXT2} and address-vector rules).
 *
 * <p>The fake reads and writes memory by raw address, so it needs native access: {@code
 * --enable-native-access=dev.dma.provider.fake} on the module path, {@code ALL-UNNAMED} on the
 * class path (without it the JDK prints a warning the first time bytes move).
 */
module dev.dma.provider.fake {
  // Transitive: FakeEndpoint and FakeProvider are the SPI's types, so a test using them needs it.
  requires transitive dev.dma.core;
  requires static com.google.auto.service;

  exports dev.dma.fake;

  provides dev.dma.spi.FabricProvider with
      dev.dma.fake.FakeProvider;
}
