package dev.dma.provider.local;

import dev.dma.api.Errno;
import dev.dma.spi.FabricEndpoint;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import org.jspecify.annotations.Nullable;

/**
 * A target this server talks to: its socket and the regions it announced, by key. Its state runs
 * {@link #NEED_CONNECT}, {@link #CONNECTING} (connected, waiting for the ready message), {@link
 * #READY}, and ends in {@link #GONE} (refused, its socket closed, or dropped).
 *
 * <p>Owned by its {@link LocalServer}, which inserts and removes it; every method runs on the owner
 * thread only, with the server's errno capture and receive frame.
 */
final class Peer {
  static final int NEED_CONNECT = 0;
  static final int CONNECTING = 1;
  static final int READY = 2;
  static final int GONE = 3;

  private final LocalServer server;
  final byte[] address;
  final MemorySegment at;
  final int atLength;
  int fd = -1;
  int state = NEED_CONNECT;
  // Open addressing by key; few regions per target, so a small table.
  long[] keys = new long[8];
  Region[] regions = new Region[8];
  int count;

  final int handle;

  Peer(LocalServer server, byte[] address, int handle) {
    this.server = server;
    this.handle = handle;
    this.address = address;
    this.at = server.arena.allocate(Libc.SOCKADDR_UN_BYTES);
    this.atLength = LocalEndpoint.abstractAddress(at, address);
  }

  void connect() {
    MemorySegment serverErrno = server.serverErrno;
    int socket = Libc.socket(serverErrno, Libc.AF_UNIX, LocalEndpoint.socketType(), 0);
    if (socket < 0) {
      return; // NEED_CONNECT stays: the next post tries again
    }
    if (Libc.connect(serverErrno, socket, at, atLength) < 0) {
      int errno = Libc.errno(serverErrno);
      Libc.close(serverErrno, socket);
      if (errno == Libc.ECONNREFUSED || errno == Libc.ENOENT) {
        state = GONE;
      }
      return;
    }
    fd = socket;
    state = CONNECTING;
    try (Arena call = Arena.ofConfined()) {
      MemorySegment event = call.allocate(Libc.EPOLL_EVENT_BYTES);
      event.set(ValueLayout.JAVA_INT_UNALIGNED, 0, Libc.EPOLLIN | Libc.EPOLLRDHUP);
      event.set(ValueLayout.JAVA_LONG_UNALIGNED, 4, ((long) socket << 32) | handle);
      // Closing the socket removes it from the epoll set again.
      Libc.epollCtl(serverErrno, server.epollFd, Libc.EPOLL_CTL_ADD, socket, event);
    }
  }

  /**
   * A post to a peer not ready yet: {@link FabricEndpoint#POSTED} when it became ready, else the
   * code.
   */
  int notReady() {
    if (state == NEED_CONNECT) {
      connect();
    }
    if (state == CONNECTING) {
      pump();
    }
    return switch (state) {
      case READY -> FabricEndpoint.POSTED;
      case GONE -> -Errno.FI_ECONNREFUSED;
      default -> FabricEndpoint.AGAIN;
    };
  }

  @Nullable Region find(long key) {
    long[] k = keys;
    int mask = k.length - 1;
    for (int i = (int) mix(key) & mask; ; i = (i + 1) & mask) {
      long at = k[i];
      if (at == key) {
        return regions[i];
      }
      if (at == 0) {
        return null;
      }
    }
  }

  private static long mix(long key) {
    long h = key * 0x9E3779B97F4A7C15L;
    return h ^ (h >>> 29);
  }

  void put(Region region) {
    if ((count + 1) * 2 > keys.length) {
      long[] oldKeys = keys;
      Region[] oldRegions = regions;
      keys = new long[oldKeys.length * 2];
      regions = new Region[oldKeys.length * 2];
      count = 0;
      for (int i = 0; i < oldKeys.length; i++) {
        if (oldKeys[i] != 0) {
          put(oldRegions[i]);
        }
      }
    }
    int mask = keys.length - 1;
    int i = (int) mix(region.key) & mask;
    while (keys[i] != 0) {
      i = (i + 1) & mask;
    }
    keys[i] = region.key;
    regions[i] = region;
    count++;
  }

  void forget(Region region) {
    unmap(region);
    // Rebuild without it: rare (withdrawals), and keeps probing simple.
    long[] oldKeys = keys;
    Region[] oldRegions = regions;
    keys = new long[oldKeys.length];
    regions = new Region[oldKeys.length];
    count = 0;
    for (int i = 0; i < oldKeys.length; i++) {
      if (oldKeys[i] != 0 && oldRegions[i] != region) {
        put(oldRegions[i]);
      }
    }
  }

  private void unmap(Region region) {
    Libc.munmap(server.serverErrno, region.mapped, region.fileBytes);
  }

  /** Reads every message the target sent so far, without blocking. */
  void pump() {
    if (fd < 0) {
      return;
    }
    MemorySegment serverErrno = server.serverErrno;
    Control c = server.serverControl;
    while (true) {
      c.prepareReceive();
      long n = Libc.recvmsg(serverErrno, fd, c.header, Libc.MSG_DONTWAIT | Libc.MSG_CMSG_CLOEXEC);
      if (n < 0) {
        int errno = Libc.errno(serverErrno);
        if (errno == Libc.EAGAIN || errno == Libc.EINTR) {
          return;
        }
        gone();
        return;
      }
      if (n == 0) {
        gone();
        return;
      }
      int passed = c.receivedFd();
      MemorySegment m = c.message;
      int type = m.get(ValueLayout.JAVA_INT, 0);
      long key = m.get(ValueLayout.JAVA_LONG, 8);
      if (type == Control.MSG_REGION && passed >= 0) {
        adopt(passed, key, m);
      } else if (passed >= 0) {
        Libc.close(serverErrno, passed);
      }
      if (type == Control.MSG_WITHDRAW) {
        Region region = find(key);
        if (region != null) {
          forget(region);
        }
      } else if (type == Control.MSG_READY) {
        state = READY;
      }
    }
  }

  /** Maps a region the target announced, after checking the memfd's seals and size. */
  private void adopt(int passed, long key, MemorySegment m) {
    MemorySegment serverErrno = server.serverErrno;
    try {
      long base = m.get(ValueLayout.JAVA_LONG, 16);
      long length = m.get(ValueLayout.JAVA_LONG, 24);
      long offset = m.get(ValueLayout.JAVA_LONG, 32);
      long fileWord = m.get(ValueLayout.JAVA_LONG, 40);
      boolean writable = fileWord < 0;
      long fileBytes = fileWord & Long.MAX_VALUE;
      int seals = Libc.fcntl(serverErrno, passed, Libc.F_GET_SEALS, 0);
      long size = Libc.lseek(serverErrno, passed, 0, Libc.SEEK_END);
      // Only a file that cannot shrink is safe to map: a truncation would fault the server's
      // copy with SIGBUS. And the region must lie inside it.
      if (key == 0
          || seals < 0
          || (seals & Libc.F_SEAL_SHRINK) == 0
          || size < fileBytes
          || offset < LocalEndpoint.HEADER_BYTES
          || length < 0
          || offset + length > fileBytes
          || find(key) != null) {
        return;
      }
      long mapped =
          Libc.mmap(
              serverErrno, fileBytes, Libc.PROT_READ | Libc.PROT_WRITE, Libc.MAP_SHARED, passed);
      if (mapped == -1L) {
        return;
      }
      put(new Region(key, base, length, writable, mapped, fileBytes, offset));
    } finally {
      Libc.close(serverErrno, passed);
    }
  }

  private void gone() {
    state = GONE;
    unmapAll();
    Libc.close(server.serverErrno, fd);
    fd = -1;
  }

  private void unmapAll() {
    for (int i = 0; i < keys.length; i++) {
      if (keys[i] != 0) {
        unmap(regions[i]);
      }
    }
    keys = new long[8];
    regions = new Region[8];
    count = 0;
  }

  void drop() {
    unmapAll();
    if (fd >= 0) {
      Libc.close(server.serverErrno, fd);
      fd = -1;
    }
    state = GONE;
  }
}
