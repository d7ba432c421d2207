/**
 * The fabric service and its worker over the {@link dev.dma.spi} provider interface. Exports the
 * service API ({@code dev.dma.core}) and the SPI ({@code dev.dma.spi}); everything in {@code
 * dev.dma.core.internal} is not API.
 */
module dev.dma.core {
  requires transitive dev.dma.api;
  requires transitive io.opentelemetry.api;
  requires io.opentelemetry.context;

  exports dev.dma.core;
  exports dev.dma.spi;

  uses dev.dma.spi.FabricProvider;
}
