/**
 * Providers {@code efa-direct} and {@code efa}: libfabric RMA on AWS Elastic Fabric Adapter through
 * the generic endpoint of {@code dev.dma.libfabric}, with EFA's address identity, error advice, the
 * {@code efa} fabric's handshake rule. Instances with several EFA devices use {@link
 * dev.dma.core.FabricServiceGroup} (in {@code dma-core}, over any provider), one service per device
 * that the provider's {@code discoverDomains} lists.
 */
module dev.dma.provider.efa {
  requires transitive dev.dma.libfabric;
  requires static com.google.auto.service;

  exports dev.dma.provider.efa;

  provides dev.dma.spi.FabricProvider with
      dev.dma.provider.efa.EfaDirectProvider,
      dev.dma.provider.efa.EfaProvider;
}
