/**
 * dma's examples: a value cache whose server moves values by RMA into and out of passive clients
 * over their own socket control channel ({@link dev.dma.examples.cache}). Runs on the class path as
 * well (the tests run it there); the server and client mains need a provider at run time, {@code
 * dev.dma.provider.tcp} for their defaults.
 */
module dev.dma.examples {
  requires transitive dev.dma.core;
  requires static transitive org.jspecify;

  exports dev.dma.examples.cache;
}
