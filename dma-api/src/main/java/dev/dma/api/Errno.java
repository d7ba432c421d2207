package dev.dma.api;

/**
 * libfabric's error numbers, positive, as {@link DmaException#fabricErrno()} carries them and as
 * libfabric calls return them negated. Values below {@link #FI_ERRNO_OFFSET} are the Linux errno
 * values libfabric maps directly ({@code FI_EAGAIN} is {@code EAGAIN}); from it on they are
 * libfabric's own. The one home of these numbers in dma: the binding, the providers and the service
 * all use these, and the libfabric binding's ABI test checks every one against the installed {@code
 * rdma/fi_errno.h}. Constants and pure functions only.
 */
public final class Errno {
  private Errno() {}

  /** {@code FI_EPERM}: operation not permitted. */
  public static final int FI_EPERM = 1;

  /** {@code FI_ENOENT}: no such entry (an unknown address; sockets' unconnectable peer). */
  public static final int FI_ENOENT = 2;

  /** {@code FI_EIO}: an I/O error (sockets fails every op of a closed peer with it). */
  public static final int FI_EIO = 5;

  /** {@code FI_EAGAIN}: not now; reap completions, then try again. */
  public static final int FI_EAGAIN = 11;

  /** {@code FI_ENOMEM}: out of memory, for example no more pinnable memory for a registration. */
  public static final int FI_ENOMEM = 12;

  /** {@code FI_EACCES}: permission denied (a bad remote key, bounds or access rights). */
  public static final int FI_EACCES = 13;

  /** {@code FI_EBUSY}: device or resource busy. */
  public static final int FI_EBUSY = 16;

  /** {@code FI_EINVAL}: an invalid argument. */
  public static final int FI_EINVAL = 22;

  /** {@code EPIPE}: broken pipe; libfabric defines no {@code FI_EPIPE}, providers report it raw. */
  public static final int EPIPE = 32;

  /** {@code FI_ENOSYS}: function not implemented. */
  public static final int FI_ENOSYS = 38;

  /** {@code FI_ENODATA}: no data available ({@code fi_getinfo} found no match). */
  public static final int FI_ENODATA = 61;

  /** {@code FI_EMSGSIZE}: message too long. */
  public static final int FI_EMSGSIZE = 90;

  /** {@code FI_EOPNOTSUPP}: operation not supported. */
  public static final int FI_EOPNOTSUPP = 95;

  /** {@code FI_ECONNABORTED}: connection aborted (EFA's unresponsive remote). */
  public static final int FI_ECONNABORTED = 103;

  /** {@code FI_ECONNRESET}: connection reset by peer. */
  public static final int FI_ECONNRESET = 104;

  /** {@code FI_ENOTCONN}: not connected (tcp after a peer closed; EFA's uninserted initiator). */
  public static final int FI_ENOTCONN = 107;

  /** {@code FI_ETIMEDOUT}: timed out. */
  public static final int FI_ETIMEDOUT = 110;

  /** {@code FI_ECONNREFUSED}: connection refused. */
  public static final int FI_ECONNREFUSED = 111;

  /** {@code FI_EHOSTDOWN}: host is down. */
  public static final int FI_EHOSTDOWN = 112;

  /** {@code FI_EHOSTUNREACH}: no route to host (EFA's unreachable remote). */
  public static final int FI_EHOSTUNREACH = 113;

  /** {@code FI_EREMOTEIO}: remote I/O error. */
  public static final int FI_EREMOTEIO = 121;

  /** {@code FI_ECANCELED}: canceled or flushed (tcp when the peer closed; EFA's FLUSHED). */
  public static final int FI_ECANCELED = 125;

  /** {@code FI_EKEYREJECTED}: key was rejected by service ({@code EKEYREJECTED}). */
  public static final int FI_EKEYREJECTED = 129;

  /** {@code FI_ERRNO_OFFSET}: libfabric's own codes start here; below it they are errno values. */
  public static final int FI_ERRNO_OFFSET = 256;

  /** {@code FI_EOTHER}: libfabric's unspecified error, the first of its own codes. */
  public static final int FI_EOTHER = 256;

  /** {@code FI_ETOOSMALL}: the buffer provided is too small ({@code fi_getname}). */
  public static final int FI_ETOOSMALL = 257;

  /** {@code FI_EAVAIL}: an error entry waits in the completion queue. */
  public static final int FI_EAVAIL = 259;

  /** {@code FI_ENOKEY}: a required key is not available (a requested MR key is taken). */
  public static final int FI_ENOKEY = 266;

  /** {@code FI_ENOAV}: missing or unavailable address vector. */
  public static final int FI_ENOAV = 267;

  /** {@code FI_ENORX}: receiver not ready, no receive buffers (EFA's RNR). */
  public static final int FI_ENORX = 269;
}
