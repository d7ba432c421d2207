package dev.dma.provider.local;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * One sendmsg/recvmsg frame: a message, its iovec, a control buffer for one descriptor. Also the
 * home of the socket protocol between a target and its servers: every message is {@link #MSG_BYTES}
 * long, the type an int at 0, then longs at 8 (key), 16 (base), 24 (length), 32 (the region's
 * offset in the memfd) and 40 (the memfd's size, its sign bit set when the region is writable); a
 * {@link #MSG_REGION} carries the memfd as {@code SCM_RIGHTS}.
 *
 * <p>Each side owns one: {@link LocalTarget} uses its own under its lock, {@link LocalServer} its
 * own on the owner thread only. A frame is never shared between threads.
 */
final class Control {
  static final int MSG_BYTES = 48;
  static final int MSG_REGION = 1;
  static final int MSG_WITHDRAW = 2;
  static final int MSG_READY = 3;

  final MemorySegment message;
  final MemorySegment iov;
  final MemorySegment cmsg;
  final MemorySegment header;

  Control(Arena arena) {
    message = arena.allocate(MSG_BYTES, 8);
    iov = arena.allocate(16, 8);
    cmsg = arena.allocate(Libc.CMSG_ONE_FD_BYTES, 8);
    header = arena.allocate(Libc.MSGHDR_BYTES, 8);
    iov.set(ValueLayout.ADDRESS, 0, message);
    iov.set(ValueLayout.JAVA_LONG, 8, MSG_BYTES);
  }

  /** Resets the header for one message carrying {@code fd} (none when negative). */
  void prepare(int fd) {
    header.fill((byte) 0);
    header.set(ValueLayout.ADDRESS, 16, iov);
    header.set(ValueLayout.JAVA_LONG, 24, 1);
    if (fd >= 0) {
      cmsg.set(ValueLayout.JAVA_LONG, 0, 20); // CMSG_LEN(sizeof(int))
      cmsg.set(ValueLayout.JAVA_INT, 8, Libc.SOL_SOCKET);
      cmsg.set(ValueLayout.JAVA_INT, 12, Libc.SCM_RIGHTS);
      cmsg.set(ValueLayout.JAVA_INT, 16, fd);
      header.set(ValueLayout.ADDRESS, 32, cmsg);
      header.set(ValueLayout.JAVA_LONG, 40, Libc.CMSG_ONE_FD_BYTES);
    }
  }

  /** Resets the header to receive one message and perhaps a descriptor. */
  void prepareReceive() {
    header.fill((byte) 0);
    cmsg.fill((byte) 0);
    header.set(ValueLayout.ADDRESS, 16, iov);
    header.set(ValueLayout.JAVA_LONG, 24, 1);
    header.set(ValueLayout.ADDRESS, 32, cmsg);
    header.set(ValueLayout.JAVA_LONG, 40, Libc.CMSG_ONE_FD_BYTES);
  }

  /** The descriptor a received message carried, or -1. */
  int receivedFd() {
    long controlLength = header.get(ValueLayout.JAVA_LONG, 40);
    if (controlLength >= 20
        && cmsg.get(ValueLayout.JAVA_INT, 8) == Libc.SOL_SOCKET
        && cmsg.get(ValueLayout.JAVA_INT, 12) == Libc.SCM_RIGHTS) {
      return cmsg.get(ValueLayout.JAVA_INT, 16);
    }
    return -1;
  }
}
