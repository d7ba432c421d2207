/**
 * Provider {@code tcp}: libfabric RMA over TCP ({@code tcp} where it serves RDM itself, from
 * libfabric 1.18 on; {@code net} before), through the generic endpoint of {@code
 * dev.dma.libfabric}.
 */
module dev.dma.provider.tcp {
  requires dev.dma.libfabric;
  requires static com.google.auto.service;

  exports dev.dma.provider.tcp;

  provides dev.dma.spi.FabricProvider with
      dev.dma.provider.tcp.TcpProvider;
}
