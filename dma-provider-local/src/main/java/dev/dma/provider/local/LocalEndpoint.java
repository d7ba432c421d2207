package dev.dma.provider.local;

import dev.dma.api.Advertisement;
import dev.dma.api.DmaException;
import dev.dma.api.Errno;
import dev.dma.api.MemoryKind;
import dev.dma.api.RemoteAccess;
import dev.dma.spi.CompletionMessages;
import dev.dma.spi.CompletionSink;
import dev.dma.spi.EndpointInfo;
import dev.dma.spi.ExposedRegion;
import dev.dma.spi.FabricEndpoint;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.VarHandle;
import java.nio.charset.StandardCharsets;
import java.security.SecureRandom;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.EnumSet;
import java.util.HexFormat;
import java.util.List;
import java.util.Set;
import java.util.concurrent.atomic.AtomicBoolean;
import org.jspecify.annotations.Nullable;

/**
 * One {@code local} endpoint: both roles at once, as every endpoint has them.
 *
 * <h2>As a passive target</h2>
 *
 * It listens on an abstract Unix socket named by its {@linkplain #localAddress() address}. Memory
 * it {@linkplain #allocateExposable allocates} is a sealed memfd (it cannot shrink or grow) laid
 * out as one header page, whose first word is the key of the region exposing it (0 while none is
 * live), then the caller's bytes. {@link #expose} writes the key into the header, then sends the
 * descriptor with the region's key, bounds and access to every connected server (SCM_RIGHTS); a
 * server that connects later gets every live region, then a ready message. A region's close writes
 * 0 into the header, tells the servers, then unmaps this process's view and closes the memfd, so
 * the caller's memory is gone with it: the next allocation is a new memfd, and no server can ever
 * write memory the client reused.
 *
 * <h2>As a server</h2>
 *
 * {@link #insertPeer} connects to the target's socket; the first posts to it answer {@link #AGAIN}
 * until its live regions and ready message arrived. A post finds the region by key (a miss reads
 * the socket once more: a region announced before its advertisement left the target is there),
 * reads the header word (acquire) to see that the region is still live, checks bounds and access,
 * and copies with {@link MemorySegment#copy} right there on the worker thread: when the post
 * returns the bytes are in the target's pages, and a completion is queued for {@link #reap}. A
 * region found withdrawn, or whose target closed its socket, is unmapped and its transfers fail.
 *
 * <p>A copy that read the header as live may still land after the target withdrew the region: then
 * it lands in pages the target no longer maps (the memfd lives while the server maps it), as if it
 * had landed just before the withdrawal, and never in memory the target uses again.
 *
 * <h2>Threads</h2>
 *
 * The owner thread posts, reaps and progresses. {@link #allocateExposable}, {@link #expose} and a
 * region's close lock the endpoint's target side (they are off the data path); {@link #wakeup} and
 * {@link #deregister} may run on any thread.
 */
@SuppressWarnings("restricted") // reinterpret: mappings this endpoint made, of known length
final class LocalEndpoint implements FabricEndpoint {
  /** Every address: this magic, then 24 lowercase hex digits. */
  static final byte[] MAGIC = "dmaLOCAL".getBytes(StandardCharsets.US_ASCII);

  static final int ADDRESS_BYTES = 32;
  static final long HEADER_BYTES = 4096;

  private static final int MSG_BYTES = 48;
  private static final int MSG_REGION = 1;
  private static final int MSG_WITHDRAW = 2;
  private static final int MSG_READY = 3;

  private static final VarHandle HEADER_KEY = ValueLayout.JAVA_LONG.varHandle();

  /** Every address the process can reach, so a copy to or from a raw address needs no segment. */
  private static final MemorySegment ALL = MemorySegment.NULL.reinterpret(Long.MAX_VALUE);

  private static final SecureRandom RANDOM = new SecureRandom();

  /** How often a peer's socket is read at least: withdrawals and a closed target show there. */
  private static final long CHECK_EVERY_NS = 1_000_000;

  /** Targets sleep in poll() on the listening socket and an eventfd until a server connects. */
  private static final Set<Capability> CAPABILITIES =
      Set.copyOf(EnumSet.of(Capability.AWAITS_INCOMING));

  private final Arena arena = Arena.ofShared();
  private final byte[] address;
  private final MemorySegment sockaddr;
  private final int sockaddrLength;
  private final int listenFd;
  private final int eventFd;
  private final AtomicBoolean closed = new AtomicBoolean();
  private final long keyBase;
  private long keyCounter;

  // Target side, guarded by `this`.
  private final MemorySegment targetErrno;
  private final Control targetControl;
  private final List<Allocation> allocations = new ArrayList<>();
  private final List<Integer> connections = new ArrayList<>();
  private long served;

  // Server side, owner thread only.
  private final MemorySegment serverErrno;
  private final Control serverControl;
  private Peer[] peers = new Peer[16];
  private int[] doneSlots = new int[0];
  private int[] doneErrno = new int[0];
  private String[] doneText = new String[0];
  private int doneHead;
  private int doneTail;
  private long nextPumpNs;
  private final MemorySegment pollFds;
  private final int epollFd;
  private final MemorySegment epollEvents;
  private static final int EPOLL_BATCH = 256;
  private final MemorySegment wakeBuffer;

  LocalEndpoint() {
    targetErrno = Libc.captureSegment(arena);
    serverErrno = Libc.captureSegment(arena);
    targetControl = new Control(arena);
    serverControl = new Control(arena);
    wakeBuffer = arena.allocate(8);
    pollFds = arena.allocate(Libc.POLLFD_BYTES * 2L);
    byte[] name = new byte[12];
    RANDOM.nextBytes(name);
    address = new byte[ADDRESS_BYTES];
    System.arraycopy(MAGIC, 0, address, 0, MAGIC.length);
    byte[] hex = HexFormat.of().formatHex(name).getBytes(StandardCharsets.US_ASCII);
    System.arraycopy(hex, 0, address, MAGIC.length, hex.length);
    keyBase = (RANDOM.nextLong() & 0x7fff_ffffL) << 32;
    sockaddr = arena.allocate(Libc.SOCKADDR_UN_BYTES);
    sockaddrLength = abstractAddress(sockaddr, address);
    int fd = Libc.socket(targetErrno, Libc.AF_UNIX, socketType(), 0);
    if (fd < 0) {
      throw failure("socket(AF_UNIX)", Libc.errno(targetErrno));
    }
    if (Libc.bind(targetErrno, fd, sockaddr, sockaddrLength) < 0
        || Libc.listen(targetErrno, fd, 4096) < 0) {
      int errno = Libc.errno(targetErrno);
      Libc.close(targetErrno, fd);
      throw failure("bind/listen " + peerText(address), errno);
    }
    listenFd = fd;
    int event = Libc.eventfd(targetErrno, 0, Libc.EFD_NONBLOCK | Libc.EFD_CLOEXEC);
    if (event < 0) {
      int errno = Libc.errno(targetErrno);
      Libc.close(targetErrno, listenFd);
      throw failure("eventfd", errno);
    }
    eventFd = event;
    int epoll = Libc.epollCreate1(serverErrno, Libc.EPOLL_CLOEXEC);
    if (epoll < 0) {
      int errno = Libc.errno(serverErrno);
      Libc.close(targetErrno, listenFd);
      Libc.close(targetErrno, eventFd);
      throw failure("epoll_create1", errno);
    }
    epollFd = epoll;
    epollEvents = arena.allocate((long) Libc.EPOLL_EVENT_BYTES * EPOLL_BATCH, 8);
  }

  private static int socketType() {
    return Libc.SOCK_SEQPACKET | Libc.SOCK_NONBLOCK | Libc.SOCK_CLOEXEC;
  }

  /** Writes the abstract {@code sockaddr_un} for {@code address}; returns its length. */
  private static int abstractAddress(MemorySegment into, byte[] address) {
    into.fill((byte) 0);
    into.set(ValueLayout.JAVA_SHORT, 0, (short) Libc.AF_UNIX);
    // sun_path[0] stays 0: the abstract namespace, no file to clean up after a crash.
    MemorySegment.copy(address, 0, into, ValueLayout.JAVA_BYTE, 3, address.length);
    return 3 + address.length;
  }

  private static DmaException failure(String call, int errno) {
    return new DmaException(
        DmaException.Kind.FABRIC,
        DmaException.Reason.PROVIDER,
        "local: " + call + " failed: errno " + errno,
        errno,
        errno,
        null);
  }

  // ---------------------------------------------------------------- addresses and peers

  @Override
  public byte[] localAddress() {
    return address.clone();
  }

  @Override
  public byte[] peerIdentity(byte[] peer) {
    if (peer.length != ADDRESS_BYTES
        || !Arrays.equals(peer, 0, MAGIC.length, MAGIC, 0, MAGIC.length)) {
      throw DmaException.fabric(
          DmaException.Reason.BAD_REQUEST,
          "not a local address: "
              + peer.length
              + " bytes, expected "
              + ADDRESS_BYTES
              + " starting with dmaLOCAL");
    }
    for (int i = MAGIC.length; i < ADDRESS_BYTES; i++) {
      byte b = peer[i];
      if (!((b >= '0' && b <= '9') || (b >= 'a' && b <= 'f'))) {
        throw DmaException.fabric(
            DmaException.Reason.BAD_REQUEST, "not a local address: byte " + i + " is not hex");
      }
    }
    return peer.clone();
  }

  @Override
  public String peerText(byte[] peer) {
    if (peer.length == ADDRESS_BYTES) {
      return "local:"
          + new String(peer, MAGIC.length, ADDRESS_BYTES - MAGIC.length, StandardCharsets.US_ASCII);
    }
    return HexFormat.of().formatHex(peer);
  }

  @Override
  public long insertPeer(byte[] peerAddress) {
    int handle = 0;
    while (handle < peers.length && peers[handle] != null) {
      handle++;
    }
    if (handle == peers.length) {
      peers = Arrays.copyOf(peers, peers.length * 2);
    }
    Peer peer = new Peer(peerAddress.clone(), handle);
    peers[handle] = peer;
    peer.connect();
    return handle;
  }

  @Override
  public int removePeer(long handle) {
    Peer peer = peers[(int) handle];
    if (peer != null) {
      peer.drop();
      peers[(int) handle] = null;
    }
    return 0;
  }

  @Override
  public @Nullable String peerGone(byte[] peerAddress) {
    for (Peer peer : peers) {
      if (peer != null && Arrays.equals(peer.address, peerAddress)) {
        peer.pump();
        if (peer.state == Peer.GONE) {
          return "its target closed its socket at " + peerText(peerAddress);
        }
        if (peer.state == Peer.READY || peer.state == Peer.CONNECTING) {
          return null;
        }
      }
    }
    // No connection to look at: try one.
    try (Arena probe = Arena.ofConfined()) {
      MemorySegment at = probe.allocate(Libc.SOCKADDR_UN_BYTES);
      int length = abstractAddress(at, peerAddress);
      int fd = Libc.socket(serverErrno, Libc.AF_UNIX, socketType(), 0);
      if (fd < 0) {
        return null;
      }
      return probe(fd, at, length, peerAddress);
    }
  }

  private @Nullable String probe(int fd, MemorySegment at, int length, byte[] peerAddress) {
    try {
      if (Libc.connect(serverErrno, fd, at, length) < 0) {
        int errno = Libc.errno(serverErrno);
        if (errno == Libc.ECONNREFUSED || errno == Libc.ENOENT) {
          return "nothing listens at " + peerText(peerAddress) + " any more";
        }
      }
      return null;
    } finally {
      Libc.close(serverErrno, fd);
    }
  }

  // ---------------------------------------------------------------- local registration

  @Override
  public int maxTx() {
    return 0;
  }

  @Override
  public boolean requiresLocalRegistration() {
    return false;
  }

  @Override
  public long register(long addressOfFirstByte, long lengthBytes, MemoryKind kind) {
    if (!kind.systemMemory()) {
      throw DmaException.fabric(
          DmaException.Reason.BAD_REQUEST,
          "provider local copies with the CPU and cannot use " + kind + " memory");
    }
    return 1;
  }

  @Override
  public long descriptor(long registration) {
    return 0;
  }

  @Override
  public void deregister(long registration) {}

  @Override
  public void openSlots(int count) {
    // One completion per slot at most is ever queued: a slot is reused only after its reap.
    doneSlots = new int[count + 1];
    doneErrno = new int[count + 1];
    doneText = new String[count + 1];
    doneHead = 0;
    doneTail = 0;
  }

  // ---------------------------------------------------------------- the data path

  @Override
  public int postWrite(
      int slot,
      long peer,
      long localAddress,
      long lengthBytes,
      long descriptor,
      long remoteAddress,
      long remoteKey) {
    return post(slot, peer, localAddress, lengthBytes, remoteAddress, remoteKey, true);
  }

  @Override
  public int postRead(
      int slot,
      long peer,
      long localAddress,
      long lengthBytes,
      long descriptor,
      long remoteAddress,
      long remoteKey) {
    return post(slot, peer, localAddress, lengthBytes, remoteAddress, remoteKey, false);
  }

  private int post(
      int slot,
      long handle,
      long localAddress,
      long lengthBytes,
      long remoteAddress,
      long remoteKey,
      boolean write) {
    Peer peer = peers[(int) handle];
    long now = System.nanoTime();
    if (now - nextPumpNs >= 0) {
      // A target that died shows only on its socket: look at the sockets at least once a
      // millisecond of posting, so a transfer posted longer than that after the death fails
      // instead of landing in memory no process maps any more.
      sweep(now);
    }
    if (peer.state != Peer.READY) {
      int code = peer.notReady();
      if (code != POSTED) {
        return code;
      }
    }
    Region region = peer.find(remoteKey);
    if (region == null || (long) HEADER_KEY.getAcquire(region.header, 0L) != remoteKey) {
      // A miss or a withdrawn region: read what the target said since, then decide.
      peer.pump();
      if (peer.state == Peer.GONE) {
        return -Errno.FI_ENOTCONN;
      }
      region = peer.find(remoteKey);
      if (region != null && (long) HEADER_KEY.getAcquire(region.header, 0L) != remoteKey) {
        peer.forget(region);
        region = null;
      }
      if (region == null) {
        return refuse(
            slot,
            "no live region with key "
                + remoteKey
                + " at "
                + peerText(peer.address)
                + " (never exposed, or withdrawn)");
      }
    }
    long offset = remoteAddress - region.base;
    if (offset < 0 || lengthBytes > region.length - offset) {
      return refuse(slot, "range outside the region with key " + remoteKey);
    }
    if (write && !region.writable) {
      return refuse(slot, "the region with key " + remoteKey + " is not exposed for writing");
    }
    if (write) {
      MemorySegment.copy(ALL, localAddress, region.data, offset, lengthBytes);
    } else {
      MemorySegment.copy(region.data, offset, ALL, localAddress, lengthBytes);
    }
    doneSlots[doneTail] = slot;
    doneErrno[doneTail] = 0;
    doneTail = doneTail + 1 == doneSlots.length ? 0 : doneTail + 1;
    return POSTED;
  }

  /** Queues a refused access for {@code slot}: it fails at reap, nothing copied. */
  private int refuse(int slot, String why) {
    doneSlots[doneTail] = slot;
    doneErrno[doneTail] = Errno.FI_EACCES;
    doneText[doneTail] = why;
    doneTail = doneTail + 1 == doneSlots.length ? 0 : doneTail + 1;
    return POSTED;
  }

  @Override
  public String errorText(int code) {
    return switch (Math.abs(code)) {
      case Errno.FI_ENOTCONN -> "its target is gone (socket closed)";
      case Errno.FI_ECONNREFUSED -> "nothing listens at its address";
      case Errno.FI_EACCES -> "Permission denied";
      case Errno.FI_EAGAIN -> "Resource temporarily unavailable";
      default -> "error " + code;
    };
  }

  @Override
  public int reap(CompletionSink sink, int max) {
    long now = System.nanoTime();
    if (now - nextPumpNs >= 0) {
      // Now and then, not per pass: frees withdrawn regions' mappings and notices closed targets.
      sweep(now);
    }
    int delivered = 0;
    while (delivered < max && doneHead != doneTail) {
      int slot = doneSlots[doneHead];
      int errno = doneErrno[doneHead];
      String text = doneText[doneHead];
      doneText[doneHead] = null;
      doneHead = doneHead + 1 == doneSlots.length ? 0 : doneHead + 1;
      if (errno == 0) {
        sink.completed(slot);
      } else {
        sink.failed(
            slot,
            DmaException.Reason.ACCESS_DENIED,
            errno,
            errno,
            CompletionMessages.of(errno, "Permission denied", errno, String.valueOf(text)));
      }
      delivered++;
    }
    return delivered;
  }

  /**
   * Reads the sockets that have something to say (one {@code epoll_wait}, however many peers), so
   * the cost of watching a thousand targets is one system call a millisecond.
   */
  private void sweep(long now) {
    nextPumpNs = now + CHECK_EVERY_NS;
    int ready = Libc.epollWait(serverErrno, epollFd, epollEvents, EPOLL_BATCH, 0);
    for (int i = 0; i < ready; i++) {
      long data =
          epollEvents.get(ValueLayout.JAVA_LONG_UNALIGNED, i * (long) Libc.EPOLL_EVENT_BYTES + 4);
      int handle = (int) data;
      int fd = (int) (data >>> 32);
      if (handle >= 0 && handle < peers.length) {
        Peer peer = peers[handle];
        if (peer != null && peer.fd == fd) {
          peer.pump();
        }
      }
    }
  }

  @Override
  public DmaException.Reason postFailureReason(int code) {
    return DmaException.Reason.ofErrno(code);
  }

  // ---------------------------------------------------------------- the target side

  @Override
  public synchronized MemorySegment allocateExposable(long lengthBytes) {
    checkOpen();
    long pages = (lengthBytes + HEADER_BYTES - 1) / HEADER_BYTES;
    long fileBytes = HEADER_BYTES + pages * HEADER_BYTES;
    MemorySegment name = arena.allocateFrom("dma-local");
    int fd = Libc.memfdCreate(targetErrno, name, Libc.MFD_CLOEXEC | Libc.MFD_ALLOW_SEALING);
    if (fd < 0) {
      throw failure("memfd_create", Libc.errno(targetErrno));
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
      throw failure("ftruncate/F_ADD_SEALS", errno);
    }
    long mapped =
        Libc.mmap(targetErrno, fileBytes, Libc.PROT_READ | Libc.PROT_WRITE, Libc.MAP_SHARED, fd);
    if (mapped == -1L) {
      int errno = Libc.errno(targetErrno);
      Libc.close(targetErrno, fd);
      throw failure("mmap", errno);
    }
    Allocation allocation = new Allocation(fd, mapped, fileBytes, lengthBytes);
    allocations.add(allocation);
    return allocation.user;
  }

  @Override
  public synchronized ExposedRegion expose(MemorySegment segment, RemoteAccess access) {
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
    HEADER_KEY.setRelease(allocation.header, 0L, key);
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
    // unmap; then this process's view goes, and with it the memory (see the class comment).
    HEADER_KEY.setRelease(allocation.header, 0L, 0L);
    if (key != 0) {
      for (int i = connections.size() - 1; i >= 0; i--) {
        if (!send(connections.get(i), MSG_WITHDRAW, key, 0, 0, 0, 0, -1)) {
          dropConnection(i);
        }
      }
    }
    allocation.free();
  }

  private boolean sendRegion(int fd, Allocation a) {
    return send(
        fd,
        MSG_REGION,
        a.key,
        a.base,
        a.length,
        HEADER_BYTES + (a.base - a.user.address()),
        a.fileBytes | (a.writable ? Long.MIN_VALUE : 0),
        a.fd);
  }

  /** Sends one message, with {@code passFd} attached unless negative. Target side, locked. */
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
    return sent == MSG_BYTES;
  }

  private void dropConnection(int index) {
    Libc.close(targetErrno, connections.remove(index));
  }

  @Override
  public synchronized void progress() {
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
      if (ok && send(fd, MSG_READY, 0, 0, 0, 0, 0, -1)) {
        connections.add(fd);
        served++;
      } else {
        Libc.close(targetErrno, fd);
      }
    }
  }

  @Override
  public boolean awaitIncoming(long timeoutNanos) {
    MemorySegment fds = pollFds;
    fds.set(ValueLayout.JAVA_INT, 0, listenFd);
    fds.set(ValueLayout.JAVA_SHORT, 4, Libc.POLLIN);
    fds.set(ValueLayout.JAVA_SHORT, 6, (short) 0);
    fds.set(ValueLayout.JAVA_INT, 8, eventFd);
    fds.set(ValueLayout.JAVA_SHORT, 12, Libc.POLLIN);
    fds.set(ValueLayout.JAVA_SHORT, 14, (short) 0);
    int ms = (int) Math.max(1, Math.min(Integer.MAX_VALUE, timeoutNanos / 1_000_000));
    int ready = Libc.poll(serverErrno, fds, 2, ms);
    if (ready > 0 && fds.get(ValueLayout.JAVA_SHORT, 14) != 0) {
      Libc.read(serverErrno, eventFd, wakeBuffer, 8);
    }
    return ready > 0 && fds.get(ValueLayout.JAVA_SHORT, 6) != 0;
  }

  @Override
  public boolean incomingPending() {
    MemorySegment fds = pollFds;
    fds.set(ValueLayout.JAVA_INT, 0, listenFd);
    fds.set(ValueLayout.JAVA_SHORT, 4, Libc.POLLIN);
    fds.set(ValueLayout.JAVA_SHORT, 6, (short) 0);
    return Libc.poll(serverErrno, fds, 1, 0) > 0;
  }

  @Override
  public void wakeup() {
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

  @Override
  public long incomingServed() {
    return served;
  }

  @Override
  public Set<Capability> capabilities() {
    return CAPABILITIES;
  }

  @Override
  public void reset() {
    for (int i = 0; i < peers.length; i++) {
      if (peers[i] != null) {
        peers[i].drop();
        peers[i] = null;
      }
    }
    doneHead = 0;
    doneTail = 0;
    Arrays.fill(doneText, null);
  }

  @Override
  public EndpointInfo describe() {
    return new EndpointInfo(
        "local",
        0,
        1 << 4,
        (1L << 2) | (1L << 8) | (1L << 9) | (1L << 12) | (1L << 13),
        false,
        true);
  }

  private void checkOpen() {
    if (closed.get()) {
      throw DmaException.fabric(DmaException.Reason.CLOSED, "the local endpoint is closed");
    }
  }

  @Override
  public void close() {
    synchronized (closed) {
      if (!closed.compareAndSet(false, true)) {
        return;
      }
    }
    synchronized (this) {
      for (Allocation allocation : List.copyOf(allocations)) {
        withdraw(allocation);
      }
      for (int fd : connections) {
        Libc.close(targetErrno, fd);
      }
      connections.clear();
      Libc.close(targetErrno, listenFd);
      Libc.close(targetErrno, eventFd);
    }
    for (int i = 0; i < peers.length; i++) {
      if (peers[i] != null) {
        peers[i].drop();
        peers[i] = null;
      }
    }
    Libc.close(serverErrno, epollFd);
    arena.close();
  }

  // ---------------------------------------------------------------- parts

  /** One sendmsg/recvmsg frame: a message, its iovec, a control buffer for one descriptor. */
  private static final class Control {
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

  /** Memory this endpoint allocated for a target: a sealed memfd and this process's mapping. */
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
      this.header = MemorySegment.ofAddress(mapped).reinterpret(HEADER_BYTES);
      // The caller's view lives in an arena of its own, closed on withdrawal: a use after that
      // throws instead of touching pages about to be unmapped.
      this.user =
          MemorySegment.ofAddress(mapped + HEADER_BYTES).reinterpret(lengthBytes, userArena, null);
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

  /** A region of a peer, as this server maps it. */
  static final class Region {
    final long key;
    final long base;
    final long length;
    final boolean writable;
    final long mapped;
    final long fileBytes;
    final MemorySegment header;
    final MemorySegment data;

    Region(
        long key,
        long base,
        long length,
        boolean writable,
        long mapped,
        long fileBytes,
        long offset) {
      this.key = key;
      this.base = base;
      this.length = length;
      this.writable = writable;
      this.mapped = mapped;
      this.fileBytes = fileBytes;
      this.header = MemorySegment.ofAddress(mapped).reinterpret(HEADER_BYTES);
      this.data = MemorySegment.ofAddress(mapped + offset).reinterpret(length);
    }
  }

  /** A target this server talks to: its socket and the regions it announced, by key. */
  private final class Peer {
    static final int NEED_CONNECT = 0;
    static final int CONNECTING = 1;
    static final int READY = 2;
    static final int GONE = 3;

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

    Peer(byte[] address, int handle) {
      this.handle = handle;
      this.address = address;
      this.at = arena.allocate(Libc.SOCKADDR_UN_BYTES);
      this.atLength = abstractAddress(at, address);
    }

    void connect() {
      int socket = Libc.socket(serverErrno, Libc.AF_UNIX, socketType(), 0);
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
        Libc.epollCtl(serverErrno, epollFd, Libc.EPOLL_CTL_ADD, socket, event);
      }
    }

    /** A post to a peer not ready yet: {@link #POSTED} when it became ready, else the code. */
    int notReady() {
      if (state == NEED_CONNECT) {
        connect();
      }
      if (state == CONNECTING) {
        pump();
      }
      return switch (state) {
        case READY -> POSTED;
        case GONE -> -Errno.FI_ECONNREFUSED;
        default -> AGAIN;
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
      Libc.munmap(serverErrno, region.mapped, region.fileBytes);
    }

    /** Reads every message the target sent so far, without blocking. */
    void pump() {
      if (fd < 0) {
        return;
      }
      Control c = serverControl;
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
        if (type == MSG_REGION && passed >= 0) {
          adopt(passed, key, m);
        } else if (passed >= 0) {
          Libc.close(serverErrno, passed);
        }
        if (type == MSG_WITHDRAW) {
          Region region = find(key);
          if (region != null) {
            forget(region);
          }
        } else if (type == MSG_READY) {
          state = READY;
        }
      }
    }

    /** Maps a region the target announced, after checking the memfd's seals and size. */
    private void adopt(int passed, long key, MemorySegment m) {
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
            || offset < HEADER_BYTES
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
      Libc.close(serverErrno, fd);
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
        Libc.close(serverErrno, fd);
        fd = -1;
      }
      state = GONE;
    }
  }
}
