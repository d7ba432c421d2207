package dev.dma.spi;

import dev.dma.api.DmaException;

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

  /**
   * The operation posted for {@code slot} failed, for a reason the endpoint knows better than its
   * error number says: the same libfabric error can mean different things on different providers
   * (tcp reports a refused key as {@code ECANCELED}, the closing of the connection it causes). The
   * reason is what the transfer's {@link DmaException} carries, so each endpoint maps its
   * provider's errors onto the meanings every provider shares.
   *
   * <p>By default the reason is dropped and {@link #failed(int, int, int, String)} decides from the
   * error number ({@link DmaException.Reason#ofErrno}); the fabric worker uses it.
   *
   * @param slot the op slot the operation was posted with
   * @param reason what the failure means for the caller
   * @param errno libfabric's error number, positive
   * @param providerErrno the provider's error number
   * @param message the full text, as for {@link #failed(int, int, int, String)}
   */
  default void failed(
      int slot, DmaException.Reason reason, int errno, int providerErrno, String message) {
    failed(slot, errno, providerErrno, message);
  }
}
