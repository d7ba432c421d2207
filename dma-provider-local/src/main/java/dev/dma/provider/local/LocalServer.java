package dev.dma.provider.local;

import dev.dma.api.DmaException;
import dev.dma.api.Errno;
import dev.dma.spi.CompletionMessages;
import dev.dma.spi.CompletionSink;
import dev.dma.spi.FabricEndpoint;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Arrays;
import org.jspecify.annotations.Nullable;

/**
 * The server side of a {@link LocalEndpoint}: its {@link Peer}s (the targets it connected to and
 * the regions they announced), the copy inside the post, the completions queued for {@link #reap},
 * and the once-a-millisecond {@code epoll_wait} over the peers' sockets that notices withdrawals
 * and closed targets. The endpoint's javadoc, "As a server", has the design.
 *
 * <p>Owned by its endpoint, which delegates to it. Every method runs on the owner thread only, so
 * nothing here locks; the endpoint calls {@link #close} once, after the target side closed.
 */
@SuppressWarnings("restricted") // reinterpret: every address the process can reach, see ALL
final class LocalServer {
  /** Every address the process can reach, so a copy to or from a raw address needs no segment. */
  private static final MemorySegment ALL = MemorySegment.NULL.reinterpret(Long.MAX_VALUE);

  /** How often a peer's socket is read at least: withdrawals and a closed target show there. */
  private static final long CHECK_EVERY_NS = 1_000_000;

  private static final int EPOLL_BATCH = 256;

  /** The endpoint's arena: its peers' socket addresses live there. */
  final Arena arena;

  /** The owner thread's errno capture; {@link LocalTarget#awaitIncoming} uses it too. */
  final MemorySegment serverErrno;

  /** The frame a {@link Peer} receives into. */
  final Control serverControl;

  final int epollFd;
  private final MemorySegment epollEvents;
  private Peer[] peers = new Peer[16];
  private int[] doneSlots = new int[0];
  private int[] doneErrno = new int[0];
  private String[] doneText = new String[0];
  private int doneHead;
  private int doneTail;
  private long nextPumpNs;

  /** Opens the epoll set; throws, having opened nothing, when it cannot. */
  LocalServer(Arena arena, MemorySegment serverErrno) {
    this.arena = arena;
    this.serverErrno = serverErrno;
    serverControl = new Control(arena);
    int epoll = Libc.epollCreate1(serverErrno, Libc.EPOLL_CLOEXEC);
    if (epoll < 0) {
      throw LocalEndpoint.failure("epoll_create1", Libc.errno(serverErrno));
    }
    epollFd = epoll;
    epollEvents = arena.allocate((long) Libc.EPOLL_EVENT_BYTES * EPOLL_BATCH, 8);
  }

  // ---------------------------------------------------------------- peers

  long insertPeer(byte[] peerAddress) {
    int handle = 0;
    while (handle < peers.length && peers[handle] != null) {
      handle++;
    }
    if (handle == peers.length) {
      peers = Arrays.copyOf(peers, peers.length * 2);
    }
    Peer peer = new Peer(this, peerAddress.clone(), handle);
    peers[handle] = peer;
    peer.connect();
    return handle;
  }

  int removePeer(long handle) {
    Peer peer = peers[(int) handle];
    if (peer != null) {
      peer.drop();
      peers[(int) handle] = null;
    }
    return 0;
  }

  @Nullable String peerGone(byte[] peerAddress) {
    for (Peer peer : peers) {
      if (peer != null && Arrays.equals(peer.address, peerAddress)) {
        peer.pump();
        if (peer.state == Peer.GONE) {
          return "its target closed its socket at " + LocalEndpoint.addressText(peerAddress);
        }
        if (peer.state == Peer.READY || peer.state == Peer.CONNECTING) {
          return null;
        }
      }
    }
    // No connection to look at: try one.
    try (Arena probe = Arena.ofConfined()) {
      MemorySegment at = probe.allocate(Libc.SOCKADDR_UN_BYTES);
      int length = LocalEndpoint.abstractAddress(at, peerAddress);
      int fd = Libc.socket(serverErrno, Libc.AF_UNIX, LocalEndpoint.socketType(), 0);
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
          return "nothing listens at " + LocalEndpoint.addressText(peerAddress) + " any more";
        }
      }
      return null;
    } finally {
      Libc.close(serverErrno, fd);
    }
  }

  // ---------------------------------------------------------------- the data path

  void openSlots(int count) {
    // One completion per slot at most is ever queued: a slot is reused only after its reap.
    doneSlots = new int[count + 1];
    doneErrno = new int[count + 1];
    doneText = new String[count + 1];
    doneHead = 0;
    doneTail = 0;
  }

  int post(
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
      if (code != FabricEndpoint.POSTED) {
        return code;
      }
    }
    Region region = peer.find(remoteKey);
    if (region == null
        || (long) LocalEndpoint.HEADER_KEY.getAcquire(region.header, 0L) != remoteKey) {
      // A miss or a withdrawn region: read what the target said since, then decide.
      peer.pump();
      if (peer.state == Peer.GONE) {
        return -Errno.FI_ENOTCONN;
      }
      region = peer.find(remoteKey);
      if (region != null
          && (long) LocalEndpoint.HEADER_KEY.getAcquire(region.header, 0L) != remoteKey) {
        peer.forget(region);
        region = null;
      }
      if (region == null) {
        return refuse(
            slot,
            "no live region with key "
                + remoteKey
                + " at "
                + LocalEndpoint.addressText(peer.address)
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
    return FabricEndpoint.POSTED;
  }

  /** Queues a refused access for {@code slot}: it fails at reap, nothing copied. */
  private int refuse(int slot, String why) {
    doneSlots[doneTail] = slot;
    doneErrno[doneTail] = Errno.FI_EACCES;
    doneText[doneTail] = why;
    doneTail = doneTail + 1 == doneSlots.length ? 0 : doneTail + 1;
    return FabricEndpoint.POSTED;
  }

  int reap(CompletionSink sink, int max) {
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

  // ---------------------------------------------------------------- reset and close

  void reset() {
    dropPeers();
    doneHead = 0;
    doneTail = 0;
    Arrays.fill(doneText, null);
  }

  private void dropPeers() {
    for (int i = 0; i < peers.length; i++) {
      if (peers[i] != null) {
        peers[i].drop();
        peers[i] = null;
      }
    }
  }

  /** Drops every peer (unmapping its regions) and closes the epoll set. */
  void close() {
    dropPeers();
    Libc.close(serverErrno, epollFd);
  }
}
