/**
 * The types a dma user touches: what to move ({@link dev.dma.api.TransferRequest}, {@link
 * dev.dma.api.Operands}, {@link dev.dma.api.Direction}), what comes back ({@link
 * dev.dma.api.Completion}, {@link dev.dma.api.Outcome}, {@link dev.dma.api.DmaException}), how it
 * is configured ({@link dev.dma.api.DmaConfiguration}) and the wire vocabulary shared with clients
 * ({@link dev.dma.api.Advertisement}, {@link dev.dma.api.Checksums}). Depends on the JDK and, at
 * compile time only, on JSpecify's nullness annotations, which it passes on to every module that
 * reads it.
 */
module dev.dma.api {
  requires static transitive org.jspecify;

  exports dev.dma.api;
}
