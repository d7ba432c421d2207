package dev.dma.spi;

/**
 * Receives reaped completions from {@link FabricEndpoint#reap(CompletionSink, int)}, on the thread
 * that called it. Implemented by the fabric worker as one preallocated object, so reaping allocates
 * nothing.
 */
public interface CompletionSink {

  /**
   * The operation posted for {@code slot} completed successfully.
   *
   * @param slot the op slot the operation was posted with
   */
  void completed(int slot);

  /**
   * The operation posted for {@code slot} failed.
   *
   * @param slot the op slot the operation was posted with
   * @param errno libfabric's error number, positive
   * @param providerErrno the provider's error number
   * @param message the full text, built by {@link CompletionMessages} ({@code completion error:
   *     <fi_strerror> (err=N); provider: <fi_cq_strerror> (prov_errno=M)} and its variants)
   */
  void failed(int slot, int errno, int providerErrno, String message);
}
