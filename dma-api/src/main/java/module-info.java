/**
 * The types a dma user touches: what to move ({@link dev.dma.api.TransferRequest},
 * {@link dev.dma.api.Operands}, {@link dev.dma.api.Direction}), what comes back
 * ({@link dev.dma.api.Completion}, {@link dev.dma.api.Outcome}, {@link dev.dma.api.DmaException}),
 * how it is configured ({@link dev.dma.api.DmaConfiguration}) and the wire vocabulary shared with
 * clients ({@link dev.dma.api.Advertisement}, {@link dev.dma.api.Checksums}). Depends on the JDK only.
 */
module dev.dma.api {
  exports dev.dma.api;
}
