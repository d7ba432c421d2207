/**
 * Provider {@code local}: RMA between processes of one host, made by the server itself. A passive
 * target allocates exposed memory in sealed memfds and passes their descriptors over a Unix socket;
 * the server maps them and copies with {@code MemorySegment.copy} on its worker thread. Needs
 * native access ({@code --enable-native-access=dev.dma.provider.local}).
 */
module dev.dma.provider.local {
  requires transitive dev.dma.core;
  requires static com.google.auto.service;

  exports dev.dma.provider.local;

  provides dev.dma.spi.FabricProvider with
      dev.dma.provider.local.LocalProvider;
}
