/**
 * The Panama FFM binding of libfabric and one generic {@link dev.dma.spi.FabricEndpoint} over it
 * ({@link dev.dma.libfabric.LibfabricEndpoint}), plus provider {@code libfabric:<prov_name>}.
 * Exports {@code dev.dma.libfabric} only; the binding in {@code dev.dma.libfabric.internal} is not
 * API. Needs native access ({@code --enable-native-access=dev.dma.libfabric}).
 */
module dev.dma.libfabric {
  requires transitive dev.dma.core;
  requires static com.google.auto.service;

  exports dev.dma.libfabric;

  provides dev.dma.spi.FabricProvider with
      dev.dma.libfabric.LibfabricProvider;
}
