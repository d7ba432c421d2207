package dev.dma.provider.local;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.StructLayout;
import java.lang.foreign.SymbolLookup;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.VarHandle;

/**
 * The libc calls the {@code local} provider makes (Linux x86_64), one {@code static final} downcall
 * handle each, every one capturing {@code errno}. A call returns the raw result; a negative one
 * leaves the error number in the caller's capture segment ({@link #errno}). Only the control path
 * and failure paths call these; the copy itself is Java.
 *
 * <p>Stateless; any thread. The constants are Linux's x86_64 values.
 */
@SuppressWarnings("restricted") // every downcall; native access is this module's premise
final class Libc {
  static final int AF_UNIX = 1;
  static final int SOCK_SEQPACKET = 5;
  static final int SOCK_NONBLOCK = 0x800;
  static final int SOCK_CLOEXEC = 0x80000;
  static final int MFD_CLOEXEC = 1;
  static final int MFD_ALLOW_SEALING = 2;
  static final int F_ADD_SEALS = 1033;
  static final int F_GET_SEALS = 1034;
  static final int F_SEAL_SEAL = 1;
  static final int F_SEAL_SHRINK = 2;
  static final int F_SEAL_GROW = 4;
  static final int PROT_READ = 1;
  static final int PROT_WRITE = 2;
  static final int MAP_SHARED = 1;
  static final int MSG_DONTWAIT = 0x40;
  static final int MSG_NOSIGNAL = 0x4000;
  static final int MSG_CMSG_CLOEXEC = 0x40000000;
  static final int SOL_SOCKET = 1;
  static final int SCM_RIGHTS = 1;
  static final short POLLIN = 1;
  static final int EFD_NONBLOCK = 0x800;
  static final int EFD_CLOEXEC = 0x80000;
  static final int SEEK_END = 2;
  static final int EPOLL_CLOEXEC = 0x80000;
  static final int EPOLL_CTL_ADD = 1;
  static final int EPOLLIN = 1;
  static final int EPOLLRDHUP = 0x2000;

  /** {@code struct epoll_event}, packed on x86_64: events (u32), then data (u64). */
  static final int EPOLL_EVENT_BYTES = 12;

  static final int EINTR = 4;
  static final int EAGAIN = 11;
  static final int ENOENT = 2;
  static final int ECONNREFUSED = 111;

  /** {@code struct sockaddr_un}: family and a 108-byte path. */
  static final int SOCKADDR_UN_BYTES = 110;

  /** {@code struct msghdr} on x86_64. */
  static final int MSGHDR_BYTES = 56;

  /** {@code CMSG_SPACE(sizeof(int))}: the control buffer for one descriptor. */
  static final int CMSG_ONE_FD_BYTES = 24;

  /** {@code struct pollfd}. */
  static final int POLLFD_BYTES = 8;

  private static final Linker LINKER = Linker.nativeLinker();
  private static final SymbolLookup LIBC = LINKER.defaultLookup();
  private static final StructLayout CAPTURE = Linker.Option.captureStateLayout();
  private static final VarHandle ERRNO =
      CAPTURE.varHandle(MemoryLayout.PathElement.groupElement("errno"));

  private static final ValueLayout.OfInt I = ValueLayout.JAVA_INT;
  private static final ValueLayout.OfLong L = ValueLayout.JAVA_LONG;
  private static final ValueLayout P = ValueLayout.ADDRESS;

  private static final MethodHandle MEMFD_CREATE = handle("memfd_create", I, P, I);
  private static final MethodHandle FTRUNCATE = handle("ftruncate", I, I, L);
  private static final MethodHandle FCNTL =
      LINKER.downcallHandle(
          LIBC.find("fcntl").orElseThrow(),
          FunctionDescriptor.of(I, I, I, I),
          Linker.Option.captureCallState("errno"),
          Linker.Option.firstVariadicArg(2));
  private static final MethodHandle LSEEK = handle("lseek", L, I, L, I);
  private static final MethodHandle MMAP = handle("mmap", P, P, L, I, I, I, L);
  private static final MethodHandle MUNMAP = handle("munmap", I, P, L);
  private static final MethodHandle CLOSE = handle("close", I, I);
  private static final MethodHandle SOCKET = handle("socket", I, I, I, I);
  private static final MethodHandle BIND = handle("bind", I, I, P, I);
  private static final MethodHandle LISTEN = handle("listen", I, I, I);
  private static final MethodHandle ACCEPT4 = handle("accept4", I, I, P, P, I);
  private static final MethodHandle CONNECT = handle("connect", I, I, P, I);
  private static final MethodHandle SENDMSG = handle("sendmsg", L, I, P, I);
  private static final MethodHandle RECVMSG = handle("recvmsg", L, I, P, I);
  private static final MethodHandle POLL = handle("poll", I, P, L, I);
  private static final MethodHandle EVENTFD = handle("eventfd", I, I, I);
  private static final MethodHandle WRITE = handle("write", L, I, P, L);
  private static final MethodHandle READ = handle("read", L, I, P, L);
  private static final MethodHandle EPOLL_CREATE1 = handle("epoll_create1", I, I);
  private static final MethodHandle EPOLL_CTL = handle("epoll_ctl", I, I, I, I, P);
  private static final MethodHandle EPOLL_WAIT = handle("epoll_wait", I, I, P, I, I);

  private Libc() {}

  private static MethodHandle handle(String name, MemoryLayout result, MemoryLayout... args) {
    return LINKER.downcallHandle(
        LIBC.find(name).orElseThrow(() -> new UnsatisfiedLinkError("libc has no " + name)),
        FunctionDescriptor.of(result, args),
        Linker.Option.captureCallState("errno"));
  }

  /** A segment to capture {@code errno} into, one per calling thread or object. */
  static MemorySegment captureSegment(Arena arena) {
    return arena.allocate(CAPTURE);
  }

  /** The {@code errno} the last call through {@code capture} left. */
  static int errno(MemorySegment capture) {
    return (int) ERRNO.get(capture, 0L);
  }

  /** Whether every entry point resolved: the availability check. */
  static boolean loads() {
    return MEMFD_CREATE != null && SENDMSG != null;
  }

  static int memfdCreate(MemorySegment e, MemorySegment name, int flags) {
    try {
      return (int) MEMFD_CREATE.invokeExact(e, name, flags);
    } catch (Throwable t) {
      throw rethrow(t);
    }
  }

  static int ftruncate(MemorySegment e, int fd, long length) {
    try {
      return (int) FTRUNCATE.invokeExact(e, fd, length);
    } catch (Throwable t) {
      throw rethrow(t);
    }
  }

  static int fcntl(MemorySegment e, int fd, int cmd, int arg) {
    try {
      return (int) FCNTL.invokeExact(e, fd, cmd, arg);
    } catch (Throwable t) {
      throw rethrow(t);
    }
  }

  static long lseek(MemorySegment e, int fd, long offset, int whence) {
    try {
      return (long) LSEEK.invokeExact(e, fd, offset, whence);
    } catch (Throwable t) {
      throw rethrow(t);
    }
  }

  /** {@code mmap(NULL, length, prot, flags, fd, 0)}: the address, or -1. */
  static long mmap(MemorySegment e, long length, int prot, int flags, int fd) {
    try {
      MemorySegment at =
          (MemorySegment) MMAP.invokeExact(e, MemorySegment.NULL, length, prot, flags, fd, 0L);
      return at.address();
    } catch (Throwable t) {
      throw rethrow(t);
    }
  }

  static int munmap(MemorySegment e, long address, long length) {
    try {
      return (int) MUNMAP.invokeExact(e, MemorySegment.ofAddress(address), length);
    } catch (Throwable t) {
      throw rethrow(t);
    }
  }

  static int close(MemorySegment e, int fd) {
    try {
      return (int) CLOSE.invokeExact(e, fd);
    } catch (Throwable t) {
      throw rethrow(t);
    }
  }

  static int socket(MemorySegment e, int domain, int type, int protocol) {
    try {
      return (int) SOCKET.invokeExact(e, domain, type, protocol);
    } catch (Throwable t) {
      throw rethrow(t);
    }
  }

  static int bind(MemorySegment e, int fd, MemorySegment address, int length) {
    try {
      return (int) BIND.invokeExact(e, fd, address, length);
    } catch (Throwable t) {
      throw rethrow(t);
    }
  }

  static int listen(MemorySegment e, int fd, int backlog) {
    try {
      return (int) LISTEN.invokeExact(e, fd, backlog);
    } catch (Throwable t) {
      throw rethrow(t);
    }
  }

  static int accept4(MemorySegment e, int fd, int flags) {
    try {
      return (int) ACCEPT4.invokeExact(e, fd, MemorySegment.NULL, MemorySegment.NULL, flags);
    } catch (Throwable t) {
      throw rethrow(t);
    }
  }

  static int connect(MemorySegment e, int fd, MemorySegment address, int length) {
    try {
      return (int) CONNECT.invokeExact(e, fd, address, length);
    } catch (Throwable t) {
      throw rethrow(t);
    }
  }

  static long sendmsg(MemorySegment e, int fd, MemorySegment msghdr, int flags) {
    try {
      return (long) SENDMSG.invokeExact(e, fd, msghdr, flags);
    } catch (Throwable t) {
      throw rethrow(t);
    }
  }

  static long recvmsg(MemorySegment e, int fd, MemorySegment msghdr, int flags) {
    try {
      return (long) RECVMSG.invokeExact(e, fd, msghdr, flags);
    } catch (Throwable t) {
      throw rethrow(t);
    }
  }

  static int poll(MemorySegment e, MemorySegment fds, long count, int timeoutMs) {
    try {
      return (int) POLL.invokeExact(e, fds, count, timeoutMs);
    } catch (Throwable t) {
      throw rethrow(t);
    }
  }

  static int eventfd(MemorySegment e, int initial, int flags) {
    try {
      return (int) EVENTFD.invokeExact(e, initial, flags);
    } catch (Throwable t) {
      throw rethrow(t);
    }
  }

  static long write(MemorySegment e, int fd, MemorySegment buffer, long length) {
    try {
      return (long) WRITE.invokeExact(e, fd, buffer, length);
    } catch (Throwable t) {
      throw rethrow(t);
    }
  }

  static long read(MemorySegment e, int fd, MemorySegment buffer, long length) {
    try {
      return (long) READ.invokeExact(e, fd, buffer, length);
    } catch (Throwable t) {
      throw rethrow(t);
    }
  }

  static int epollCreate1(MemorySegment e, int flags) {
    try {
      return (int) EPOLL_CREATE1.invokeExact(e, flags);
    } catch (Throwable t) {
      throw rethrow(t);
    }
  }

  static int epollCtl(MemorySegment e, int epfd, int op, int fd, MemorySegment event) {
    try {
      return (int) EPOLL_CTL.invokeExact(e, epfd, op, fd, event);
    } catch (Throwable t) {
      throw rethrow(t);
    }
  }

  static int epollWait(MemorySegment e, int epfd, MemorySegment events, int max, int timeoutMs) {
    try {
      return (int) EPOLL_WAIT.invokeExact(e, epfd, events, max, timeoutMs);
    } catch (Throwable t) {
      throw rethrow(t);
    }
  }

  private static RuntimeException rethrow(Throwable t) {
    if (t instanceof RuntimeException r) {
      throw r;
    }
    if (t instanceof Error e) {
      throw e;
    }
    throw new IllegalStateException(t);
  }
}
