package dev.dma.api;

import java.io.Serial;
import org.jspecify.annotations.Nullable;

/**
 * The one exception type dma reports, carrying what kind of failure it was and, when libfabric
 * said, its error numbers.
 *
 * <p>{@link #getMessage()} is the exact text of the failure (for example {@code "the service is
 * closed"}); {@link #toString()} prefixes it with the kind. Instances are immutable and may be
 * shared between threads.
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

  /**
   * Why a transfer or call failed, for callers that switch on it. The raw errnos and the message
   * stay the detail; the reason is the decision: retry, drop the client, fix the request, or
   * investigate the provider.
   */
  public enum Reason {
    /**
     * The peer did not answer: a posted operation passed {@code completion_deadline}, or no post to
     * the peer was accepted for {@code progress_deadline} while nothing else was in flight. The
     * client's incarnation (its id and that address) is marked unreachable: its later transfers
     * fail at once with {@link #PEER_UNREACHABLE} until the peer is added again or a transfer
     * carries a new address for the client. A post refused while other transfers are in flight (a
     * full queue) waits instead, up to {@code completion_deadline}.
     */
    DEADLINE,
    /**
     * The client's endpoint is gone (it closed, exited or restarted: nothing accepts connections at
     * its tcp address any more, its shm region or process is gone; the message says {@code its
     * endpoint is gone:} and what showed it), or its incarnation is known to be unreachable (an
     * earlier transfer to the same id and address found it gone or passed a deadline), or the
     * provider reported its connection refused, reset or gone. The same on every provider that can
     * look at a peer (tcp, sockets, shm, the fake); efa and udp;ofi_rxd cannot, and end such a
     * transfer at a deadline. A transfer carrying the client's new address is served; ask the
     * client for its current advertisement; add the peer again once the same address is back.
     */
    PEER_UNREACHABLE,
    /**
     * The target answered and refused the access: wrong key, outside its registered range, no
     * permission, or an advertisement it no longer honours. On tcp both a refusal and a target that
     * died close the connection; dma then tries a connection to the target's address, and a target
     * that is gone is reported as {@link #PEER_UNREACHABLE} instead. Ask the client for its current
     * advertisement; one that does not answer is gone.
     */
    ACCESS_DENIED,
    /**
     * The endpoint was recovered (closed and reopened) while the operation was posted, through no
     * fault of this transfer; submitting it again is expected to succeed. A read lands nothing
     * after this failure is delivered. A write may still land from its post ({@link
     * TargetMemory#MAY_HAVE_CHANGED}): submit it again when a late landing of the same bytes is
     * harmless, and never reuse that remote range for other bytes meanwhile if it is not.
     */
    ENDPOINT_RESET,
    /**
     * The service or target is closed or closing ({@code "the service is closed"} after {@code
     * close()}), or its worker is gone ({@code "fabric worker is gone"}: it failed, which its log
     * says). Nothing more will be served by it: start a new one.
     */
    CLOSED,
    /**
     * The request or call itself cannot be served: a bad operand, length, range or peer address, a
     * heap segment where native memory is needed. Nothing moved; fix the code that made it.
     */
    BAD_REQUEST,
    /**
     * A local bound is full; retry later. Either the service's pending queue ({@code max_pending}),
     * or {@code max_pinned_bytes} when local registration is required: the operand's registration
     * did not fit beside those of the transfers in flight, and none of them made room within {@code
     * progress_deadline} (or none was in flight). Nothing moved.
     */
    BACKPRESSURE,
    /**
     * A limit on how many clients or resources one endpoint or process may have was reached: shm's
     * 256 peers per endpoint, rxd's peer count, the process's file descriptors. The message names
     * the limit, its value where known, and the setting or {@code ulimit} that raises it.
     */
    LIMIT,
    /**
     * No provider can serve the configuration: none installed answers to the configured name (the
     * message names the jar to add), the one that does is unavailable here (its native library,
     * device or hardware is missing), or the configuration names a device or domain that does not
     * exist. Raised when a service, group or target starts, never by a transfer. Fix the class
     * path, the host or the configuration; the same call fails the same way until then.
     */
    PROVIDER_UNAVAILABLE,
    /** Anything else the provider or libfabric reported; the errnos say what. */
    PROVIDER;

    /**
     * Whether submitting the same transfer again may succeed without changing it or the peer.
     *
     * @return true for {@link #ENDPOINT_RESET} and {@link #BACKPRESSURE}
     */
    public boolean retryable() {
      return this == ENDPOINT_RESET || this == BACKPRESSURE;
    }

    /**
     * The reason a libfabric error number implies, for failures that name no other.
     *
     * @param fabricErrno a positive {@code FI_E*} / errno value, or 0
     * @return {@link #ACCESS_DENIED} for {@code EACCES}, {@code EPERM}, {@code FI_ENOKEY} and
     *     {@code FI_EKEYREJECTED}; {@link #PEER_UNREACHABLE} for refused, reset, aborted,
     *     broken-pipe, unreachable, host-down, timed-out and not-connected errors; {@link #LIMIT}
     *     for {@code EMFILE} (out of file descriptors); {@link #PROVIDER} otherwise (the values are
     *     {@link Errno}'s)
     */
    public static Reason ofErrno(int fabricErrno) {
      return switch (Math.abs(fabricErrno)) {
        case Errno.FI_EMFILE -> LIMIT;
        case Errno.FI_EPERM, Errno.FI_EACCES, Errno.FI_ENOKEY, Errno.FI_EKEYREJECTED ->
            ACCESS_DENIED;
        case Errno.EPIPE,
            Errno.FI_ECONNABORTED,
            Errno.FI_ECONNRESET,
            Errno.FI_ENOTCONN,
            Errno.FI_ETIMEDOUT,
            Errno.FI_ECONNREFUSED,
            Errno.FI_EHOSTDOWN,
            Errno.FI_EHOSTUNREACH ->
            PEER_UNREACHABLE;
        default -> PROVIDER;
      };
    }
  }

  /**
   * What a failed transfer may have done to the peer's memory: the one question a caller needs
   * answered before it reuses a remote range or tells anyone it holds the old bytes.
   */
  public enum TargetMemory {
    /**
     * The transfer changed nothing at the peer: it was refused before it was handed to the provider
     * (an intake check, a dead peer, backpressure, a close), or it was a read, which never writes
     * the peer's memory.
     */
    UNCHANGED,
    /**
     * A write was handed to the provider, so it may still land, now or later, whole or in part,
     * with the bytes its operand held when it was posted (never with what the caller put in the
     * operand after the failure was delivered). A peer that was stopped and resumes, or bytes still
     * in a socket buffer, land after the failure. Treat that range as unknown until it is written
     * again by a transfer that succeeds, and do not write it with anything else meanwhile if a late
     * landing of the old bytes would matter.
     */
    MAY_HAVE_CHANGED
  }

  /** The value of {@link #fabricErrno()} and {@link #providerErrno()} when not known. */
  public static final int UNKNOWN_ERRNO = 0;

  /** What failed. */
  private final Kind kind;

  /** Why, for callers that switch on it. */
  private final Reason reason;

  /** libfabric's error number, or {@link #UNKNOWN_ERRNO}. */
  private final int fabricErrno;

  /** The provider's error number, or {@link #UNKNOWN_ERRNO}. */
  private final int providerErrno;

  /** What the failed transfer may have done to the peer's memory. */
  private final TargetMemory targetMemory;

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
   * @param fabricErrno libfabric's error number, positive ({@code FI_E*}), or {@link
   *     #UNKNOWN_ERRNO}
   * @param providerErrno the provider's own error number, or {@link #UNKNOWN_ERRNO}
   * @param cause the underlying exception, or {@code null}
   */
  public DmaException(
      Kind kind, String message, int fabricErrno, int providerErrno, @Nullable Throwable cause) {
    this(kind, Reason.ofErrno(fabricErrno), message, fabricErrno, providerErrno, cause);
  }

  /**
   * An exception with a reason and libfabric's error numbers.
   *
   * @param kind what failed
   * @param reason why, for callers that switch on it
   * @param message the exact failure text
   * @param fabricErrno libfabric's error number, positive ({@code FI_E*}), or {@link
   *     #UNKNOWN_ERRNO}
   * @param providerErrno the provider's own error number, or {@link #UNKNOWN_ERRNO}
   * @param cause the underlying exception, or {@code null}
   */
  public DmaException(
      Kind kind,
      Reason reason,
      String message,
      int fabricErrno,
      int providerErrno,
      @Nullable Throwable cause) {
    super(message, cause);
    if (kind == null) {
      throw new NullPointerException("kind");
    }
    if (reason == null) {
      throw new NullPointerException("reason");
    }
    this.kind = kind;
    this.reason = reason;
    this.fabricErrno = Math.abs(fabricErrno);
    this.providerErrno = providerErrno;
    this.targetMemory = TargetMemory.UNCHANGED;
  }

  /** A copy of {@code original} that says {@code targetMemory}, with its stack trace. */
  private DmaException(DmaException original, TargetMemory targetMemory) {
    super(original.getMessage(), original.getCause());
    this.kind = original.kind;
    this.reason = original.reason;
    this.fabricErrno = original.fabricErrno;
    this.providerErrno = original.providerErrno;
    this.targetMemory = targetMemory;
    setStackTrace(original.getStackTrace());
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
   * A {@link Kind#FABRIC} exception with a reason.
   *
   * @param reason why
   * @param message the exact failure text
   * @return the exception
   */
  public static DmaException fabric(Reason reason, String message) {
    return new DmaException(Kind.FABRIC, reason, message, UNKNOWN_ERRNO, UNKNOWN_ERRNO, null);
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
   * Why it failed, for callers that switch on it; see {@link Reason}.
   *
   * @return the reason
   */
  public Reason reason() {
    return reason;
  }

  /**
   * Whether the same transfer, submitted again unchanged, may succeed ({@link Reason#retryable()}).
   *
   * @return whether to retry
   */
  public boolean retryable() {
    return reason.retryable();
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

  /**
   * What this failure may have done to the peer's memory; {@link TargetMemory#UNCHANGED} for
   * anything but a failed transfer that was posted. Every failed write a service delivers says
   * which: {@link TargetMemory#MAY_HAVE_CHANGED} once it was handed to the provider.
   *
   * @return the peer memory's state
   */
  public TargetMemory targetMemory() {
    return targetMemory;
  }

  /**
   * This failure saying {@code value} about the peer's memory: this instance when it already does,
   * else a copy (same kind, reason, message, errnos, cause and stack trace).
   *
   * @param value what the failed transfer may have done to the peer's memory
   * @return an exception that says so
   */
  public DmaException withTargetMemory(TargetMemory value) {
    if (value == null) {
      throw new NullPointerException("value");
    }
    return value == targetMemory ? this : new DmaException(this, value);
  }

  @Override
  public String toString() {
    return (kind == Kind.FABRIC ? "fabric error: " : "transfer failed: ") + getMessage();
  }
}
