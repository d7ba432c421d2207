package dev.dma.fake;

import dev.dma.api.Errno;
import dev.dma.spi.CompletionMessages;

/**
 * libfabric's error numbers and texts, as the fake reports them: the {@code FI_E*} values a test
 * scripts faults with, {@link #text(int)} (what {@code fi_strerror} prints on Linux) and {@link
 * #completionMessage(int, int, String)} (the exact message of a completion error entry). Stateless
 * and thread-safe. The numbers are {@link Errno}'s, under the short names tests script with.
 */
public final class FiErrno {
  /** {@code FI_ENOENT}: an unknown address or entry. */
  public static final int ENOENT = Errno.FI_ENOENT;

  /** {@code FI_EIO}: an I/O error (sockets fails every op of a closed peer with it). */
  public static final int EIO = Errno.FI_EIO;

  /** {@code FI_EAGAIN}: not now, retry after reaping; {@link dev.dma.spi.FabricEndpoint#AGAIN}. */
  public static final int EAGAIN = Errno.FI_EAGAIN;

  /** {@code FI_ENOMEM}: out of memory, for example no more pinnable memory for a registration. */
  public static final int ENOMEM = Errno.FI_ENOMEM;

  /** {@code FI_EACCES}: a bad remote key, bounds or access rights (the sockets provider). */
  public static final int EACCES = Errno.FI_EACCES;

  /** {@code FI_EBUSY}: device or resource busy. */
  public static final int EBUSY = Errno.FI_EBUSY;

  /**
   * {@code FI_EINVAL}: an invalid argument; what the fake's posts return for a contract violation.
   */
  public static final int EINVAL = Errno.FI_EINVAL;

  /** {@code FI_ENOSYS}: not implemented. */
  public static final int ENOSYS = Errno.FI_ENOSYS;

  /** {@code FI_ECONNABORTED}: EFA's unresponsive remote. */
  public static final int ECONNABORTED = Errno.FI_ECONNABORTED;

  /** {@code FI_ECONNRESET}: connection reset by peer. */
  public static final int ECONNRESET = Errno.FI_ECONNRESET;

  /** {@code FI_ENOTCONN}: not connected (tcp after a peer closed; EFA's unknown peer). */
  public static final int ENOTCONN = Errno.FI_ENOTCONN;

  /** {@code FI_ETIMEDOUT}: timed out. */
  public static final int ETIMEDOUT = Errno.FI_ETIMEDOUT;

  /** {@code FI_ECONNREFUSED}: connection refused. */
  public static final int ECONNREFUSED = Errno.FI_ECONNREFUSED;

  /** {@code FI_EHOSTUNREACH}: EFA's unreachable remote. */
  public static final int EHOSTUNREACH = Errno.FI_EHOSTUNREACH;

  /** {@code FI_ECANCELED}: canceled or flushed (tcp when the peer closed; EFA's FLUSHED). */
  public static final int ECANCELED = Errno.FI_ECANCELED;

  /** {@code FI_EOTHER}: libfabric's unspecified error, the first of its own codes. */
  public static final int EOTHER = Errno.FI_EOTHER;

  /** {@code FI_EAVAIL}: an error entry is available on the CQ. */
  public static final int EAVAIL = Errno.FI_EAVAIL;

  /** {@code FI_ENOKEY}: a requested memory-registration key is taken. */
  public static final int ENOKEY = Errno.FI_ENOKEY;

  /** {@code FI_ENORX}: receiver not ready (EFA's RNR). */
  public static final int ENORX = Errno.FI_ENORX;

  /** libfabric's own codes start here ({@code FI_ERRNO_OFFSET}); below it they are errno values. */
  private static final int FI_ERRNO_OFFSET = Errno.FI_ERRNO_OFFSET;

  // fi_strerror's table for its own codes, FI_EOTHER (256) to FI_ENOMR (270), in order.
  private static final String[] FABRIC_TEXTS = {
    "Unspecified error",
    "Provided buffer is too small",
    "Operation not permitted in current state",
    "Error available",
    "Flags not supported",
    "Missing or unavailable event queue",
    "Invalid resource domain",
    "Missing or unavailable completion queue",
    "CRC error",
    "Truncation error",
    "Required key not available",
    "Missing or unavailable address vector",
    "Queue has been overrun",
    "Receiver not ready, no receive buffers available",
    "Memory registration limit exceeded",
  };

  private FiErrno() {}

  /**
   * libfabric's text for an error code, as {@code fi_strerror} gives it on Linux: glibc's {@code
   * strerror} below 256 (for example 11 is "Resource temporarily unavailable", 107 "Transport
   * endpoint is not connected"), libfabric's own table from 256, "Unspecified error" past its end.
   *
   * @param code a code, negative or positive
   * @return the text
   */
  public static String text(int code) {
    int errno = code == Integer.MIN_VALUE ? Integer.MAX_VALUE : Math.abs(code);
    if (errno >= FI_ERRNO_OFFSET) {
      int index = errno - FI_ERRNO_OFFSET;
      return index < FABRIC_TEXTS.length ? FABRIC_TEXTS[index] : FABRIC_TEXTS[0];
    }
    return switch (errno) {
      case 0 -> "Success";
      case 1 -> "Operation not permitted";
      case 2 -> "No such file or directory";
      case 3 -> "No such process";
      case 4 -> "Interrupted system call";
      case 5 -> "Input/output error";
      case 6 -> "No such device or address";
      case 7 -> "Argument list too long";
      case 9 -> "Bad file descriptor";
      case 11 -> "Resource temporarily unavailable";
      case 12 -> "Cannot allocate memory";
      case 13 -> "Permission denied";
      case 14 -> "Bad address";
      case 16 -> "Device or resource busy";
      case 17 -> "File exists";
      case 19 -> "No such device";
      case 22 -> "Invalid argument";
      case 24 -> "Too many open files";
      case 28 -> "No space left on device";
      case 32 -> "Broken pipe";
      case 38 -> "Function not implemented";
      case 61 -> "No data available";
      case 71 -> "Protocol error";
      case 75 -> "Value too large for defined data type";
      case 90 -> "Message too long";
      case 95 -> "Operation not supported";
      case 98 -> "Address already in use";
      case 99 -> "Cannot assign requested address";
      case 100 -> "Network is down";
      case 101 -> "Network is unreachable";
      case 103 -> "Software caused connection abort";
      case 104 -> "Connection reset by peer";
      case 105 -> "No buffer space available";
      case 106 -> "Transport endpoint is already connected";
      case 107 -> "Transport endpoint is not connected";
      case 108 -> "Cannot send after transport endpoint shutdown";
      case 110 -> "Connection timed out";
      case 111 -> "Connection refused";
      case 112 -> "Host is down";
      case 113 -> "No route to host";
      case 114 -> "Operation already in progress";
      case 115 -> "Operation now in progress";
      case 121 -> "Remote I/O error";
      case 125 -> "Operation canceled";
      case 126 -> "Required key not available";
      case 129 -> "Key was rejected by service";
      default -> "Unknown error " + errno;
    };
  }

  /**
   * The exact message of a completion error entry, in the one format every provider uses ({@link
   * CompletionMessages}): {@code completion error: {text(errno)} (err={errno}); provider:
   * {providerText} (prov_errno={providerErrno})}. Unlike the libfabric binding, the fake always
   * shows the provider half, whatever the script put there.
   *
   * @param errno libfabric's error number; its absolute value is printed, as the binding takes
   *     {@code abs(err)} (shm reports it negative)
   * @param providerErrno the provider's error number, printed as is
   * @param providerText what {@code fi_cq_strerror} said
   * @return the message
   */
  public static String completionMessage(int errno, int providerErrno, String providerText) {
    int positive = Math.abs(errno);
    return CompletionMessages.of(positive, text(positive), providerErrno, providerText);
  }

  /**
   * The message of a failed checked libfabric call: {@code {what}: {text(code)} ({-|code|})}, for
   * example {@code fi_mr_reg(operand): Cannot allocate memory (-12)}.
   *
   * @param what the call, for example {@code fi_cq_read}
   * @param code the code, negative or positive; printed negative
   * @return the message
   */
  public static String callMessage(String what, int code) {
    int positive = code == Integer.MIN_VALUE ? Integer.MAX_VALUE : Math.abs(code);
    return what + ": " + text(positive) + " (" + -positive + ")";
  }
}
