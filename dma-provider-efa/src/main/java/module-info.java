/**
 * Providers {@code efa-direct} and {@code efa}: libfabric RMA on AWS Elastic Fabric Adapter through
 * the generic endpoint of {@code dev.dma.libfabric}, with EFA's address identity, error advice, the
 * {@code efa} fabric's handshake rule, and {@link dev.dma.provider.efa.FabricServiceGroup} for
 * instances with several EFA devices.
 */
module dev.dma.provider.efa {
  requires transitive dev.dma.libfabric;
  requires static com.google.auto.service;

  exports dev.dma.provider.efa;

  provides dev.dma.spi.FabricProvider with
      dev.dma.provider.efa.EfaDirectProvider,
      dev.dma.provider.efa.EfaProvider;
}
