package dev.dma.api;

import java.io.Serial;

/**
 * The one exception type dma reports, carrying what kind of failure it was and, when libfabric
 * said, its error numbers.
 *
 * <p>{@link #getMessage()} is the exact text of the failure (for example
 * {@code "fabric worker is gone"}); {@link #toString()} prefixes it with the kind. Instances are
 * immutable and may be shared between threads.
 */
public final class DmaException extends RuntimeException {
  @Serial private static final long serialVersionUID = 1L;

  /** What failed. */
  public enum Kind {
    /**
     * Set-up, control and post failures: opening the endpoint, registering memory, inserting a
     * peer, a post the provider refused, an operand the caller context did not supply, a worker
     * that is gone.
     */
    FABRIC,
    /**
     * The transfer itself failed after it was accepted: a completion-queue error entry, or no
     * progress before the progress deadline.
     */
    TRANSFER
  }

  /** The value of {@link #fabricErrno()} and {@link #providerErrno()} when not known. */
  public static final int UNKNOWN_ERRNO = 0;

  /** What failed. */
  private final Kind kind;

  /** libfabric's error number, or {@link #UNKNOWN_ERRNO}. */
  private final int fabricErrno;

  /** The provider's error number, or {@link #UNKNOWN_ERRNO}. */
  private final int providerErrno;

  /**
   * An exception with no error numbers.
   *
   * @param kind what failed
   * @param message the exact failure text
   */
  public DmaException(Kind kind, String message) {
    this(kind, message, UNKNOWN_ERRNO, UNKNOWN_ERRNO, null);
  }

  /**
   * An exception with libfabric's error numbers.
   *
   * @param kind what failed
   * @param message the exact failure text
   * @param fabricErrno libfabric's error number, positive ({@code FI_E*}), or {@link #UNKNOWN_ERRNO}
   * @param providerErrno the provider's own error number, or {@link #UNKNOWN_ERRNO}
   * @param cause the underlying exception, or {@code null}
   */
  public DmaException(
      Kind kind, String message, int fabricErrno, int providerErrno, Throwable cause) {
    super(message, cause);
    if (kind == null) {
      throw new NullPointerException("kind");
    }
    this.kind = kind;
    this.fabricErrno = Math.abs(fabricErrno);
    this.providerErrno = providerErrno;
  }

  /**
   * A {@link Kind#FABRIC} exception.
   *
   * @param message the exact failure text
   * @return the exception
   */
  public static DmaException fabric(String message) {
    return new DmaException(Kind.FABRIC, message);
  }

  /**
   * A {@link Kind#TRANSFER} exception.
   *
   * @param message the exact failure text
   * @return the exception
   */
  public static DmaException transfer(String message) {
    return new DmaException(Kind.TRANSFER, message);
  }

  /**
   * What failed.
   *
   * @return the kind
   */
  public Kind kind() {
    return kind;
  }

  /**
   * libfabric's error number ({@code FI_E*}, positive), when libfabric reported one.
   *
   * @return the error number, or {@link #UNKNOWN_ERRNO}
   */
  public int fabricErrno() {
    return fabricErrno;
  }

  /**
   * The provider's own error number from a completion error entry, when there was one.
   *
   * @return the provider error number, or {@link #UNKNOWN_ERRNO}
   */
  public int providerErrno() {
    return providerErrno;
  }

  @Override
  public String toString() {
    return (kind == Kind.FABRIC ? "fabric error: " : "transfer failed: ") + getMessage();
  }
}
