package dev.dma.provider.local;

import dev.dma.api.DmaException;
import dev.dma.api.Errno;
import dev.dma.api.MemoryKind;
import dev.dma.api.RemoteAccess;
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
import java.util.Arrays;
import java.util.EnumSet;
import java.util.HexFormat;
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
 * <h2>Parts</h2>
 *
 * This class is the {@link FabricEndpoint}: the address, local registration (there is none to
 * make), the endpoint's description and close; it delegates each role. {@link LocalTarget} is the
 * passive target (socket, memfds, exposure and withdrawal); {@link LocalServer} the server (its
 * {@link Peer}s and their {@link Region}s, the copy, the completion queue). {@link Control} is a
 * socket message and its frame. What both roles share, the address format and the memfd's header
 * page, is here.
 *
 * <h2>Threads</h2>
 *
 * The owner thread posts, reaps and progresses. {@link #allocateExposable}, {@link #expose} and a
 * region's close lock the endpoint's target side, the {@link LocalTarget} (they are off the data
 * path); {@link #wakeup} and {@link #deregister} may run on any thread. The server side never
 * locks: the owner thread alone calls it.
 */
final class LocalEndpoint implements FabricEndpoint {
  /** Every address: this magic, then 24 lowercase hex digits. */
  static final byte[] MAGIC = "dmaLOCAL".getBytes(StandardCharsets.US_ASCII);

  static final int ADDRESS_BYTES = 32;

  /** A memfd's header page, before the caller's bytes; its first word is {@link #HEADER_KEY}. */
  static final long HEADER_BYTES = 4096;

  /** The key of the region exposing a memfd, 0 while none is live: set release, read acquire. */
  static final VarHandle HEADER_KEY = ValueLayout.JAVA_LONG.varHandle();

  static final SecureRandom RANDOM = new SecureRandom();

  /** Targets sleep in poll() on the listening socket and an eventfd until a server connects. */
  private static final Set<Capability> CAPABILITIES =
      Set.copyOf(EnumSet.of(Capability.AWAITS_INCOMING));

  private final Arena arena = Arena.ofShared();
  private final byte[] address;
  private final AtomicBoolean closed = new AtomicBoolean();
  private final LocalTarget target;
  private final LocalServer server;

  LocalEndpoint() {
    MemorySegment ownerErrno = Libc.captureSegment(arena);
    byte[] name = new byte[12];
    RANDOM.nextBytes(name);
    address = new byte[ADDRESS_BYTES];
    System.arraycopy(MAGIC, 0, address, 0, MAGIC.length);
    byte[] hex = HexFormat.of().formatHex(name).getBytes(StandardCharsets.US_ASCII);
    System.arraycopy(hex, 0, address, MAGIC.length, hex.length);
    target = new LocalTarget(arena, address, ownerErrno, closed);
    try {
      server = new LocalServer(arena, ownerErrno);
    } catch (DmaException e) {
      target.closeDescriptors();
      throw e;
    }
  }

  static int socketType() {
    return Libc.SOCK_SEQPACKET | Libc.SOCK_NONBLOCK | Libc.SOCK_CLOEXEC;
  }

  /** Writes the abstract {@code sockaddr_un} for {@code address}; returns its length. */
  static int abstractAddress(MemorySegment into, byte[] address) {
    into.fill((byte) 0);
    into.set(ValueLayout.JAVA_SHORT, 0, (short) Libc.AF_UNIX);
    // sun_path[0] stays 0: the abstract namespace, no file to clean up after a crash.
    MemorySegment.copy(address, 0, into, ValueLayout.JAVA_BYTE, 3, address.length);
    return 3 + address.length;
  }

  static DmaException failure(String call, int errno) {
    return new DmaException(
        DmaException.Kind.FABRIC,
        DmaException.Reason.PROVIDER,
        "local: " + call + " failed: errno " + errno,
        errno,
        errno,
        null);
  }

  /** {@link #peerText}, for the parts: {@code local:} and the hex digits. */
  static String addressText(byte[] peer) {
    if (peer.length == ADDRESS_BYTES) {
      return "local:"
          + new String(peer, MAGIC.length, ADDRESS_BYTES - MAGIC.length, StandardCharsets.US_ASCII);
    }
    return HexFormat.of().formatHex(peer);
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
    return addressText(peer);
  }

  @Override
  public long insertPeer(byte[] peerAddress) {
    return server.insertPeer(peerAddress);
  }

  @Override
  public int removePeer(long handle) {
    return server.removePeer(handle);
  }

  @Override
  public @Nullable String peerGone(byte[] peerAddress) {
    return server.peerGone(peerAddress);
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
    server.openSlots(count);
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
    return server.post(slot, peer, localAddress, lengthBytes, remoteAddress, remoteKey, true);
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
    return server.post(slot, peer, localAddress, lengthBytes, remoteAddress, remoteKey, false);
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
    return server.reap(sink, max);
  }

  @Override
  public DmaException.Reason postFailureReason(int code) {
    return DmaException.Reason.ofErrno(code);
  }

  // ---------------------------------------------------------------- the target side

  @Override
  public MemorySegment allocateExposable(long lengthBytes) {
    return target.allocateExposable(lengthBytes);
  }

  @Override
  public ExposedRegion expose(MemorySegment segment, RemoteAccess access) {
    return target.expose(segment, access);
  }

  @Override
  public void progress() {
    target.progress();
  }

  @Override
  public boolean awaitIncoming(long timeoutNanos) {
    return target.awaitIncoming(timeoutNanos);
  }

  @Override
  public boolean incomingPending() {
    return target.incomingPending();
  }

  @Override
  public void wakeup() {
    target.wakeup();
  }

  @Override
  public long incomingServed() {
    return target.served();
  }

  @Override
  public Set<Capability> capabilities() {
    return CAPABILITIES;
  }

  @Override
  public void reset() {
    server.reset();
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

  @Override
  public void close() {
    synchronized (closed) {
      if (!closed.compareAndSet(false, true)) {
        return;
      }
    }
    target.close();
    server.close();
    arena.close();
  }
}
