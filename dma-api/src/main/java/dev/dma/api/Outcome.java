package dev.dma.api;

/** How a transfer ended: {@link TransferDone} or {@link Failed}. Immutable. */
public sealed interface Outcome permits TransferDone, Outcome.Failed {

  /**
   * A failed outcome.
   *
   * @param error what failed
   * @return the outcome
   */
  static Outcome failed(DmaException error) {
    return new Failed(error);
  }

  /**
   * Whether the transfer completed.
   *
   * @return {@code true} for {@link TransferDone}
   */
  boolean isDone();

  /**
   * The completed transfer.
   *
   * @return this outcome as {@link TransferDone}
   * @throws DmaException the error, when the transfer failed
   */
  TransferDone done();

  /**
   * The error of a failed transfer.
   *
   * @return the error
   * @throws IllegalStateException when the transfer completed
   */
  DmaException error();

  /**
   * A transfer that failed; only that transfer, never its neighbours.
   *
   * @param error what failed
   */
  record Failed(DmaException error) implements Outcome {
    /**
     * Checks the error.
     *
     * @throws NullPointerException if {@code error} is null
     */
    public Failed {
      if (error == null) {
        throw new NullPointerException("error");
      }
    }

    @Override
    public boolean isDone() {
      return false;
    }

    @Override
    public TransferDone done() {
      throw error;
    }
  }
}
