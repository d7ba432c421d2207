package dev.dma.provider.local;

import dev.dma.api.Advertisement;
import dev.dma.api.DmaException;
import dev.dma.api.RemoteAccess;
import dev.dma.spi.ExposedRegion;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * The passive-target side of a {@link LocalEndpoint}: the listening socket and the servers
 * connected to it, the sealed memfds it {@linkplain #allocateExposable allocates}, their exposure
 * to every connected server and their withdrawal. The endpoint's javadoc, "As a passive target",
 * has the design.
 *
 * <p>Owned by its endpoint, which delegates to it and shares its closed flag. {@link
 * #allocateExposable}, {@link #expose}, a region's close, {@link #progress} and {@link #close} lock
 * this object (they may run on any thread; they are off the data path). {@link #awaitIncoming} and
 * {@link #incomingPending} run on the owner thread without the lock, with the owner thread's errno
 * capture (the one {@link LocalServer} uses); {@link #wakeup} may run on any thread.
 */
@SuppressWarnings("restricted") // reinterpret: mappings this side made, of known length
final class LocalTarget {
  private final Arena arena;
  private final byte[] address;
  private final AtomicBoolean closed;
  private final int listenFd;
  private final int eventFd;
  private final long keyBase;

  // Guarded by `this`.
  private long keyCounter;
  private final MemorySegment targetErrno;
  private final Control targetControl;
  private final List<Allocation> allocations = new ArrayList<>();
  private final List<Integer> connections = new ArrayList<>();
  private long served;

  // Owner thread only.
  private final MemorySegment ownerErrno;
  private final MemorySegment pollFds;
  private final MemorySegment wakeBuffer;

  /**
   * Listens at {@code address} (the endpoint's, kept, not copied) and opens the eventfd {@link
   * #wakeup} writes; throws, having opened nothing, when it cannot.
   */
  LocalTarget(Arena arena, byte[] address, MemorySegment ownerErrno, AtomicBoolean closed) {
    this.arena = arena;
    this.address = address;
    this.ownerErrno = ownerErrno;
    this.closed = closed;
    targetErrno = Libc.captureSegment(arena);
    targetControl = new Control(arena);
    wakeBuffer = arena.allocate(8);
    pollFds = arena.allocate(Libc.POLLFD_BYTES * 2L);
    keyBase = (LocalEndpoint.RANDOM.nextLong() & 0x7fff_ffffL) << 32;
    MemorySegment sockaddr = arena.allocate(Libc.SOCKADDR_UN_BYTES);
    int sockaddrLength = LocalEndpoint.abstractAddress(sockaddr, address);
    int fd = Libc.socket(targetErrno, Libc.AF_UNIX, LocalEndpoint.socketType(), 0);
    if (fd < 0) {
      throw LocalEndpoint.failure("socket(AF_UNIX)", Libc.errno(targetErrno));
    }
    if (Libc.bind(targetErrno, fd, sockaddr, sockaddrLength) < 0
        || Libc.listen(targetErrno, fd, 4096) < 0) {
      int errno = Libc.errno(targetErrno);
      Libc.close(targetErrno, fd);
      throw LocalEndpoint.failure("bind/listen " + LocalEndpoint.addressText(address), errno);
    }
    listenFd = fd;
    int event = Libc.eventfd(targetErrno, 0, Libc.EFD_NONBLOCK | Libc.EFD_CLOEXEC);
    if (event < 0) {
      int errno = Libc.errno(targetErrno);
      Libc.close(targetErrno, listenFd);
      throw LocalEndpoint.failure("eventfd", errno);
    }
    eventFd = event;
  }

  /** Closes the socket and the eventfd, when the endpoint's construction fails after this. */
  void closeDescriptors() {
    Libc.close(targetErrno, listenFd);
    Libc.close(targetErrno, eventFd);
  }

  private void checkOpen() {
    if (closed.get()) {
      throw DmaException.fabric(DmaException.Reason.CLOSED, "the local endpoint is closed");
    }
  }

  // ---------------------------------------------------------------- memory and regions

  synchronized MemorySegment allocateExposable(long lengthBytes) {
    checkOpen();
    long pages = (lengthBytes + LocalEndpoint.HEADER_BYTES - 1) / LocalEndpoint.HEADER_BYTES;
    long fileBytes = LocalEndpoint.HEADER_BYTES + pages * LocalEndpoint.HEADER_BYTES;
    MemorySegment name = arena.allocateFrom("dma-local");
    int fd = Libc.memfdCreate(targetErrno, name, Libc.MFD_CLOEXEC | Libc.MFD_ALLOW_SEALING);
    if (fd < 0) {
      throw LocalEndpoint.failure("memfd_create", Libc.errno(targetErrno));
    }
    if (Libc.ftruncate(targetErrno, fd, fileBytes) < 0
        || Libc.fcntl(
                targetErrno,
                fd,
                Libc.F_ADD_SEALS,
                Libc.F_SEAL_SHRINK | Libc.F_SEAL_GROW | Libc.F_SEAL_SEAL)
            < 0) {
      int errno = Libc.errno(targetErrno);
      Libc.close(targetErrno, fd);
      throw LocalEndpoint.failure("ftruncate/F_ADD_SEALS", errno);
    }
    long mapped =
        Libc.mmap(targetErrno, fileBytes, Libc.PROT_READ | Libc.PROT_WRITE, Libc.MAP_SHARED, fd);
    if (mapped == -1L) {
      int errno = Libc.errno(targetErrno);
      Libc.close(targetErrno, fd);
      throw LocalEndpoint.failure("mmap", errno);
    }
    Allocation allocation = new Allocation(fd, mapped, fileBytes, lengthBytes);
    allocations.add(allocation);
    return allocation.user;
  }

  synchronized ExposedRegion expose(MemorySegment segment, RemoteAccess access) {
    checkOpen();
    Allocation allocation = null;
    for (Allocation each : allocations) {
      if (each.contains(segment)) {
        allocation = each;
        break;
      }
    }
    if (allocation == null) {
      throw DmaException.fabric(
          DmaException.Reason.BAD_REQUEST,
          "provider local can expose only memory it allocated (a sealed memfd the server maps),"
              + " not this segment; allocate it with PassiveTarget.allocate(bytes) and expose that");
    }
    if (allocation.key != 0) {
      throw DmaException.fabric(
          DmaException.Reason.BAD_REQUEST,
          "this memory is exposed already; allocate another buffer with PassiveTarget.allocate");
    }
    long key = keyBase | (++keyCounter & 0xffff_ffffL);
    allocation.key = key;
    allocation.base = segment.address();
    allocation.length = segment.byteSize();
    allocation.writable = access.allowsWrite();
    LocalEndpoint.HEADER_KEY.setRelease(allocation.header, 0L, key);
    for (int i = connections.size() - 1; i >= 0; i--) {
      if (!sendRegion(connections.get(i), allocation)) {
        dropConnection(i);
      }
    }
    Advertisement ad = new Advertisement(address, key, segment.address(), segment.byteSize());
    Allocation exposed = allocation;
    return new ExposedRegion() {
      @Override
      public Advertisement advertisement() {
        return ad;
      }

      @Override
      public void close() {
        withdraw(exposed);
      }
    };
  }

  private synchronized void withdraw(Allocation allocation) {
    if (!allocations.remove(allocation)) {
      return;
    }
    long key = allocation.key;
    // First the header: a server's next copy reads it and refuses. Then the servers, so they
    // unmap; then this process's view goes, and with it the memory (see LocalEndpoint's comment).
    LocalEndpoint.HEADER_KEY.setRelease(allocation.header, 0L, 0L);
    if (key != 0) {
      for (int i = connections.size() - 1; i >= 0; i--) {
        if (!send(connections.get(i), Control.MSG_WITHDRAW, key, 0, 0, 0, 0, -1)) {
          dropConnection(i);
        }
      }
    }
    allocation.free();
  }

  // ---------------------------------------------------------------- the servers

  private boolean sendRegion(int fd, Allocation a) {
    return send(
        fd,
        Control.MSG_REGION,
        a.key,
        a.base,
        a.length,
        LocalEndpoint.HEADER_BYTES + (a.base - a.user.address()),
        a.fileBytes | (a.writable ? Long.MIN_VALUE : 0),
        a.fd);
  }

  /** Sends one message, with {@code passFd} attached unless negative. Locked. */
  private boolean send(
      int fd, int type, long key, long base, long length, long offset, long file, int passFd) {
    MemorySegment m = targetControl.message;
    m.set(ValueLayout.JAVA_INT, 0, type);
    m.set(ValueLayout.JAVA_LONG, 8, key);
    m.set(ValueLayout.JAVA_LONG, 16, base);
    m.set(ValueLayout.JAVA_LONG, 24, length);
    m.set(ValueLayout.JAVA_LONG, 32, offset);
    m.set(ValueLayout.JAVA_LONG, 40, file);
    targetControl.prepare(passFd);
    // MSG_DONTWAIT: a server that stopped reading must not stop this target; its connection is
    // dropped instead, and it sees its target gone.
    long sent =
        Libc.sendmsg(targetErrno, fd, targetControl.header, Libc.MSG_DONTWAIT | Libc.MSG_NOSIGNAL);
    return sent == Control.MSG_BYTES;
  }

  private void dropConnection(int index) {
    Libc.close(targetErrno, connections.remove(index));
  }

  synchronized void progress() {
    if (closed.get()) {
      return;
    }
    int fd;
    while ((fd = Libc.accept4(targetErrno, listenFd, Libc.SOCK_NONBLOCK | Libc.SOCK_CLOEXEC))
        >= 0) {
      boolean ok = true;
      for (Allocation allocation : allocations) {
        if (allocation.key != 0 && !(ok = sendRegion(fd, allocation))) {
          break;
        }
      }
      if (ok && send(fd, Control.MSG_READY, 0, 0, 0, 0, 0, -1)) {
        connections.add(fd);
        served++;
      } else {
        Libc.close(targetErrno, fd);
      }
    }
  }

  boolean awaitIncoming(long timeoutNanos) {
    MemorySegment fds = pollFds;
    fds.set(ValueLayout.JAVA_INT, 0, listenFd);
    fds.set(ValueLayout.JAVA_SHORT, 4, Libc.POLLIN);
    fds.set(ValueLayout.JAVA_SHORT, 6, (short) 0);
    fds.set(ValueLayout.JAVA_INT, 8, eventFd);
    fds.set(ValueLayout.JAVA_SHORT, 12, Libc.POLLIN);
    fds.set(ValueLayout.JAVA_SHORT, 14, (short) 0);
    int ms = (int) Math.max(1, Math.min(Integer.MAX_VALUE, timeoutNanos / 1_000_000));
    int ready = Libc.poll(ownerErrno, fds, 2, ms);
    if (ready > 0 && fds.get(ValueLayout.JAVA_SHORT, 14) != 0) {
      Libc.read(ownerErrno, eventFd, wakeBuffer, 8);
    }
    return ready > 0 && fds.get(ValueLayout.JAVA_SHORT, 6) != 0;
  }

  boolean incomingPending() {
    MemorySegment fds = pollFds;
    fds.set(ValueLayout.JAVA_INT, 0, listenFd);
    fds.set(ValueLayout.JAVA_SHORT, 4, Libc.POLLIN);
    fds.set(ValueLayout.JAVA_SHORT, 6, (short) 0);
    return Libc.poll(ownerErrno, fds, 1, 0) > 0;
  }

  void wakeup() {
    if (closed.get()) {
      return;
    }
    synchronized (closed) {
      if (!closed.get()) {
        try (Arena call = Arena.ofConfined()) {
          MemorySegment one = call.allocate(8);
          one.set(ValueLayout.JAVA_LONG, 0, 1);
          Libc.write(Libc.captureSegment(call), eventFd, one, 8);
        }
      }
    }
  }

  long served() {
    return served;
  }

  /**
   * Withdraws every allocation, closes every connection, the socket and the eventfd. Called once,
   * by the endpoint's close, after it set the closed flag.
   */
  synchronized void close() {
    for (Allocation allocation : List.copyOf(allocations)) {
      withdraw(allocation);
    }
    for (int fd : connections) {
      Libc.close(targetErrno, fd);
    }
    connections.clear();
    closeDescriptors();
  }

  // ---------------------------------------------------------------- parts

  /** Memory this side allocated: a sealed memfd and this process's mapping. Guarded by the side. */
  private final class Allocation {
    final int fd;
    final long mapped;
    final long fileBytes;
    final Arena userArena = Arena.ofShared();
    final MemorySegment header;
    final MemorySegment user;
    long key;
    long base;
    long length;
    boolean writable;

    Allocation(int fd, long mapped, long fileBytes, long lengthBytes) {
      this.fd = fd;
      this.mapped = mapped;
      this.fileBytes = fileBytes;
      this.header = MemorySegment.ofAddress(mapped).reinterpret(LocalEndpoint.HEADER_BYTES);
      // The caller's view lives in an arena of its own, closed on withdrawal: a use after that
      // throws instead of touching pages about to be unmapped.
      this.user =
          MemorySegment.ofAddress(mapped + LocalEndpoint.HEADER_BYTES)
              .reinterpret(lengthBytes, userArena, null);
    }

    boolean contains(MemorySegment segment) {
      long start = segment.address();
      return segment.scope().isAlive()
          && start >= user.address()
          && segment.byteSize() <= user.address() + user.byteSize() - start;
    }

    void free() {
      userArena.close();
      Libc.munmap(targetErrno, mapped, fileBytes);
      Libc.close(targetErrno, fd);
    }
  }
}
