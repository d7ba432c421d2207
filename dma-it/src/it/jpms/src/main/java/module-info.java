/** A downstream service on the module path: it needs dma-core only; providers come by binding. */
module demo.app {
  requires dev.dma.core;
}
