/**
 * Provider {@code tcp}: libfabric RMA over TCP ({@code tcp;ofi_rxm} or {@code net} on libfabric
 * 1.x, {@code tcp} on 2.x), through the generic endpoint of {@code dev.dma.libfabric}.
 */
module dev.dma.provider.tcp {
  requires dev.dma.libfabric;
  requires static com.google.auto.service;

  exports dev.dma.provider.tcp;

  provides dev.dma.spi.FabricProvider with
      dev.dma.provider.tcp.TcpProvider;
}
