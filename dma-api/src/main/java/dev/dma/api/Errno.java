package dev.dma.api;

/**
 * libfabric's error numbers, positive, as {@link DmaException#fabricErrno()} carries them and as
 * libfabric calls return them negated. Values below {@link #FI_ERRNO_OFFSET} are the Linux errno
 * values libfabric maps directly ({@code FI_EAGAIN} is {@code EAGAIN}); from it on they are
 * libfabric's own. The one home of these numbers in dma: the binding, the providers and the service
 * all use these. Complete against libfabric 2.6's {@code rdma/fi_errno.h}: every {@code FI_E*} it
 * defines is here (not its commented-out ones), plus {@code EPIPE}. The libfabric binding's ABI
 * test checks every constant the headers under test define, and that they define no other; a
 * constant added after those headers' version (its javadoc says from when) is reported, not
 * compared. Constants and pure functions only.
 */
public final class Errno {
  private Errno() {}

  /** {@code FI_EPERM}: operation not permitted. */
  public static final int FI_EPERM = 1;

  /** {@code FI_ENOENT}: no such entry (an unknown address; sockets' unconnectable peer). */
  public static final int FI_ENOENT = 2;

  /** {@code FI_EINTR}: interrupted system call. */
  public static final int FI_EINTR = 4;

  /** {@code FI_EIO}: an I/O error (sockets fails every op of a closed peer with it). */
  public static final int FI_EIO = 5;

  /** {@code FI_E2BIG}: argument list too long. */
  public static final int FI_E2BIG = 7;

  /** {@code FI_EBADF}: bad file number. */
  public static final int FI_EBADF = 9;

  /** {@code FI_EAGAIN}: not now; reap completions, then try again. */
  public static final int FI_EAGAIN = 11;

  /** {@code FI_EWOULDBLOCK}: operation would block; the same number as {@link #FI_EAGAIN}. */
  public static final int FI_EWOULDBLOCK = 11;

  /** {@code FI_ENOMEM}: out of memory, for example no more pinnable memory for a registration. */
  public static final int FI_ENOMEM = 12;

  /** {@code FI_EACCES}: permission denied (a bad remote key, bounds or access rights). */
  public static final int FI_EACCES = 13;

  /** {@code FI_EFAULT}: bad address. */
  public static final int FI_EFAULT = 14;

  /** {@code FI_EBUSY}: device or resource busy. */
  public static final int FI_EBUSY = 16;

  /** {@code FI_ENODEV}: no such device. */
  public static final int FI_ENODEV = 19;

  /** {@code FI_EINVAL}: an invalid argument. */
  public static final int FI_EINVAL = 22;

  /** {@code FI_EMFILE}: too many open files. */
  public static final int FI_EMFILE = 24;

  /** {@code FI_ENOSPC}: no space left on device. */
  public static final int FI_ENOSPC = 28;

  /** {@code EPIPE}: broken pipe; libfabric defines no {@code FI_EPIPE}, providers report it raw. */
  public static final int EPIPE = 32;

  /** {@code FI_ENOSYS}: function not implemented. */
  public static final int FI_ENOSYS = 38;

  /** {@code FI_ENOMSG}: no message of the desired type. */
  public static final int FI_ENOMSG = 42;

  /** {@code FI_ENODATA}: no data available ({@code fi_getinfo} found no match). */
  public static final int FI_ENODATA = 61;

  /** {@code FI_EPROTO}: protocol error; commented out in the 1.17 headers, defined in 2.1's. */
  public static final int FI_EPROTO = 71;

  /** {@code FI_EOVERFLOW}: value too large for the defined data type. */
  public static final int FI_EOVERFLOW = 75;

  /** {@code FI_EMSGSIZE}: message too long. */
  public static final int FI_EMSGSIZE = 90;

  /** {@code FI_ENOPROTOOPT}: protocol not available (an option the provider does not know). */
  public static final int FI_ENOPROTOOPT = 92;

  /** {@code FI_EOPNOTSUPP}: operation not supported. */
  public static final int FI_EOPNOTSUPP = 95;

  /** {@code FI_EADDRINUSE}: address already in use. */
  public static final int FI_EADDRINUSE = 98;

  /** {@code FI_EADDRNOTAVAIL}: cannot assign the requested address. */
  public static final int FI_EADDRNOTAVAIL = 99;

  /** {@code FI_ENETDOWN}: network is down. */
  public static final int FI_ENETDOWN = 100;

  /** {@code FI_ENETUNREACH}: network is unreachable. */
  public static final int FI_ENETUNREACH = 101;

  /** {@code FI_ECONNABORTED}: connection aborted (EFA's unresponsive remote). */
  public static final int FI_ECONNABORTED = 103;

  /** {@code FI_ECONNRESET}: connection reset by peer. */
  public static final int FI_ECONNRESET = 104;

  /** {@code FI_ENOBUFS}: no buffer space available. */
  public static final int FI_ENOBUFS = 105;

  /** {@code FI_EISCONN}: transport endpoint is already connected. */
  public static final int FI_EISCONN = 106;

  /** {@code FI_ENOTCONN}: not connected (tcp after a peer closed; EFA's uninserted initiator). */
  public static final int FI_ENOTCONN = 107;

  /** {@code FI_ESHUTDOWN}: cannot send after transport endpoint shutdown. */
  public static final int FI_ESHUTDOWN = 108;

  /** {@code FI_ETIMEDOUT}: timed out. */
  public static final int FI_ETIMEDOUT = 110;

  /** {@code FI_ECONNREFUSED}: connection refused. */
  public static final int FI_ECONNREFUSED = 111;

  /** {@code FI_EHOSTDOWN}: host is down. */
  public static final int FI_EHOSTDOWN = 112;

  /** {@code FI_EHOSTUNREACH}: no route to host (EFA's unreachable remote). */
  public static final int FI_EHOSTUNREACH = 113;

  /** {@code FI_EALREADY}: operation already in progress. */
  public static final int FI_EALREADY = 114;

  /** {@code FI_EINPROGRESS}: operation now in progress. */
  public static final int FI_EINPROGRESS = 115;

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

  /** {@code FI_EOPBADSTATE}: operation not permitted in the current state. */
  public static final int FI_EOPBADSTATE = 258;

  /** {@code FI_EAVAIL}: an error entry waits in the completion queue. */
  public static final int FI_EAVAIL = 259;

  /** {@code FI_EBADFLAGS}: flags not supported. */
  public static final int FI_EBADFLAGS = 260;

  /** {@code FI_ENOEQ}: missing or unavailable event queue. */
  public static final int FI_ENOEQ = 261;

  /** {@code FI_EDOMAIN}: invalid resource domain. */
  public static final int FI_EDOMAIN = 262;

  /** {@code FI_ENOCQ}: missing or unavailable completion queue. */
  public static final int FI_ENOCQ = 263;

  /** {@code FI_ECRC}: CRC error. */
  public static final int FI_ECRC = 264;

  /** {@code FI_ETRUNC}: truncation error. */
  public static final int FI_ETRUNC = 265;

  /** {@code FI_ENOKEY}: a required key is not available (a requested MR key is taken). */
  public static final int FI_ENOKEY = 266;

  /** {@code FI_ENOAV}: missing or unavailable address vector. */
  public static final int FI_ENOAV = 267;

  /** {@code FI_EOVERRUN}: queue has been overrun. */
  public static final int FI_EOVERRUN = 268;

  /** {@code FI_ENORX}: receiver not ready, no receive buffers (EFA's RNR). */
  public static final int FI_ENORX = 269;

  /**
   * {@code FI_ENOMR}: no more memory registrations available; not in 1.17's headers (NEWS.md:
   * introduced in 1.20.0).
   */
  public static final int FI_ENOMR = 270;

  /**
   * {@code FI_EFIREWALLADDR}: host unreachable because it is behind a firewall; not in the 1.17 or
   * 2.1 headers, in 2.6's.
   */
  public static final int FI_EFIREWALLADDR = 271;
}
