package dev.dma.libfabric;

import java.io.IOException;
import java.net.ConnectException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.SocketException;
import java.net.UnknownHostException;
import java.nio.ByteBuffer;
import java.nio.channels.SocketChannel;
import java.util.HashMap;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.locks.LockSupport;
import org.jspecify.annotations.Nullable;

/**
 * Whether a peer's endpoint is gone, for {@link LibfabricEndpoint#peerGone}: the evidence a
 * provider does not give by itself. Only positive evidence counts; whatever cannot be told is "not
 * gone".
 *
 * <ul>
 *   <li><b>tcp</b> (net, tcp, their rxm variants, sockets): every such endpoint listens for
 *       connections at the address it advertises. A connection attempt to it that is refused means
 *       nothing listens there any more: the endpoint closed or its process exited (the kernel
 *       answers with a reset at once, on loopback and across a network alike). So is an attempt
 *       that connects and is then reset within {@link #SETTLE_NANOS}: the kernel of a process in
 *       the middle of exiting still completes connections to its listener, and resets them when it
 *       closes the listener, which on a loaded host came milliseconds after the connection whose
 *       loss the worker asks about. An attempt that connects and stays quiet means something
 *       listens (the peer, or a new endpoint that took its port); one still unanswered after {@link
 *       #CONNECT_WAIT_NANOS} (a partition, a far peer) is kept and its answer read at a later call.
 *       A connection that does connect is then closed; the peer's provider sees a connection that
 *       closes before its handshake and drops it. What the attempts cost is bounded here, whoever
 *       asks: an address found listening is not tried again for {@link #REPROBE_NANOS}, and at most
 *       {@link #ATTEMPTS_PER_SECOND} attempts start per second, so a connection storm of live peers
 *       slow to connect gets few extra connections; and the owner thread waits for answers (a live
 *       peer's quiet settle included) at most {@link #WAIT_BUDGET_NANOS} a second in all. The wait
 *       per call, up to {@link #CONNECT_WAIT_NANOS}, is for a loaded host: the kernel answers a
 *       refused loopback connection in its network softirq, which a busy machine ran more than 0.5
 *       ms late (one CI run: a probe right after a peer quit went unanswered, and its refused
 *       transfer was reported {@code ACCESS_DENIED}). Past any bound the answer is "not gone", and
 *       the worker's deadlines end the transfer as before.
 *   <li><b>shm</b>: an endpoint of this process that was closed; a name {@code fi_shm://<pid>:...}
 *       whose process no longer runs (a peer in another pid namespace would look exited; dma's shm
 *       peers share the host's); or a region file that no longer exists (shm unlinks it when the
 *       endpoint closes).
 *   <li>Other providers (udp;ofi_rxd, efa): no way to look; never gone.
 * </ul>
 *
 * <p>Threads: the endpoint's owner only, like the endpoint; {@link #close()} at the endpoint's
 * close.
 */
final class PeerLiveness implements AutoCloseable {
  /** How long one call waits for a connection attempt's answer before keeping it for later. */
  static final long CONNECT_WAIT_NANOS = 20_000_000L;

  /**
   * How long a connected attempt is watched for a reset before the address counts as listening
   * ({@link #resetWhileSettling}).
   */
  static final long SETTLE_NANOS = 50_000_000L;

  /** How long the owner thread may wait for answers per second, over all calls. */
  static final long WAIT_BUDGET_NANOS = 100_000_000L;

  /** How long an address found listening is not tried again. */
  static final long REPROBE_NANOS = 1_000_000_000L;

  /** Connection attempts started per second at most, over all addresses. */
  static final int ATTEMPTS_PER_SECOND = 100;

  /** Addresses remembered as listening at most; the oldest is forgotten first. */
  private static final int MAX_REMEMBERED = 1024;

  /** How long an unanswered attempt is kept for a later call before it is given up. */
  private static final long PENDING_LIFETIME_NANOS = 10_000_000_000L;

  /** Attempts kept at most; past it, a new address gets no probe until one is answered. */
  private static final int MAX_PENDING = 64;

  private enum Kind {
    TCP,
    SHM,
    NONE
  }

  private record Pending(SocketChannel channel, long startedNanos) {}

  private final Kind kind;
  private final Map<String, Pending> pending = new HashMap<>();
  // When each address was last found listening, oldest first.
  private final LinkedHashMap<String, Long> listening =
      new LinkedHashMap<>(16, 0.75f, false) {
        @Override
        protected boolean removeEldestEntry(Map.Entry<String, Long> eldest) {
          return size() > MAX_REMEMBERED;
        }
      };
  // The attempts started in the current one-second window, and when it began.
  private int attemptsInWindow;
  private long waitedInWindowNanos;
  private long windowStartNanos = System.nanoTime();

  /**
   * The check for one provider.
   *
   * @param provider the provider name, for example {@code net} or {@code tcp;ofi_rxm}
   */
  PeerLiveness(String provider) {
    if (Quirks.shm(provider)) {
      kind = Kind.SHM;
    } else if (Quirks.listensAtItsAddress(provider)) {
      kind = Kind.TCP;
    } else {
      kind = Kind.NONE;
    }
  }

  /**
   * The evidence that the endpoint at {@code address} is gone, or null.
   *
   * @param address the peer's address bytes, possibly malformed
   * @return the evidence in words, or null when the endpoint is there or nothing can be told
   */
  @Nullable String gone(byte[] address) {
    return switch (kind) {
      case SHM -> shmGone(address);
      case TCP -> tcpGone(address);
      case NONE -> null;
    };
  }

  /** The evidence that an shm peer is gone, or null; also the check before inserting one. */
  static @Nullable String shmGone(byte[] address) {
    String name = ShmNames.nameOf(address);
    if (name == null) {
      return null;
    }
    ShmNames.Local local = ShmNames.local(name);
    if (local != null) {
      return local.open ? null : "the shm endpoint " + name + " of this process was closed";
    }
    long pid = ShmNames.pidOf(name);
    if (pid > 0 && ProcessHandle.of(pid).isEmpty()) {
      return "the process " + pid + " that opened the shm endpoint " + name + " has exited";
    }
    if (!ShmNames.regionExists(name)) {
      return "the shm region of " + name + " no longer exists (the endpoint closed)";
    }
    return null;
  }

  private @Nullable String tcpGone(byte[] address) {
    InetSocketAddress socket = socketAddressOf(address);
    if (socket == null) {
      return null;
    }
    long nowNanos = System.nanoTime();
    dropStale(nowNanos);
    String key = socket.toString();
    Pending earlier = pending.remove(key);
    SocketChannel channel;
    long startedNanos = nowNanos;
    if (earlier != null) {
      channel = earlier.channel();
      startedNanos = earlier.startedNanos();
    } else {
      Long listened = listening.get(key);
      if ((listened != null && nowNanos - listened < REPROBE_NANOS)
          || pending.size() >= MAX_PENDING
          || !mayStartAttempt(nowNanos)) {
        return null;
      }
      try {
        channel = SocketChannel.open();
        channel.configureBlocking(false);
      } catch (IOException noSocket) {
        return null;
      }
    }
    long waitStart = System.nanoTime();
    long until = waitStart + Math.min(CONNECT_WAIT_NANOS, waitBudgetLeft(waitStart));
    boolean first = earlier == null;
    while (true) {
      boolean connected;
      try {
        connected = first ? channel.connect(socket) : channel.finishConnect();
      } catch (ConnectException refused) {
        waitedInWindowNanos += System.nanoTime() - waitStart;
        closeQuietly(channel);
        return refusedText(refused, address);
      } catch (IOException | RuntimeException other) {
        waitedInWindowNanos += System.nanoTime() - waitStart;
        closeQuietly(channel);
        // Reset once connected: the listener closed with this attempt in its queue. Anything else
        // (unreachable network, no route) is not evidence that the endpoint is gone.
        return isReset(other) ? listenerClosedText(address) : null;
      }
      first = false;
      if (connected) {
        boolean reset = resetWhileSettling(channel, waitStart);
        waitedInWindowNanos += System.nanoTime() - waitStart;
        closeQuietly(channel);
        if (reset) {
          return listenerClosedText(address);
        }
        listening.put(key, nowNanos);
        return null;
      }
      long now = System.nanoTime();
      if (now - until >= 0) {
        waitedInWindowNanos += now - waitStart;
        pending.put(key, new Pending(channel, startedNanos));
        return null;
      }
      LockSupport.parkNanos(20_000L);
    }
  }

  /**
   * Whether a connected attempt is reset within {@link #SETTLE_NANOS} (and what is left of this
   * second's {@link #WAIT_BUDGET_NANOS}): the sign of a listener that closed with the attempt still
   * in its queue, unaccepted. A peer process in the middle of exiting accepts connections in its
   * kernel until its listening socket is closed, and on a loaded host that came 2 to 18 ms after
   * the connection whose loss the worker is asking about (three busy loops beside the test). A live
   * provider takes the connection and waits for a handshake that never comes, so the attempt stays
   * quiet; an end of stream (an accepted connection closed) is not counted either.
   */
  private boolean resetWhileSettling(SocketChannel channel, long waitStart) {
    long until = waitStart + Math.min(SETTLE_NANOS, waitBudgetLeft(waitStart));
    ByteBuffer scratch = ByteBuffer.allocate(1);
    while (true) {
      try {
        if (channel.read(scratch) != 0) {
          return false; // an end of stream, or bytes: something accepted it
        }
      } catch (IOException reset) {
        return isReset(reset);
      }
      if (System.nanoTime() - until >= 0) {
        return false;
      }
      scratch.clear();
      LockSupport.parkNanos(20_000L);
    }
  }

  private static boolean isReset(Exception failure) {
    return failure instanceof SocketException && says(failure, "reset");
  }

  /**
   * Whether the failure's message names {@code word}, in any case (the JDK words a refusal or a
   * reset only in the message).
   */
  private static boolean says(Exception failure, String word) {
    String why = failure.getMessage();
    return why != null && why.toLowerCase(Locale.ROOT).contains(word);
  }

  private static String listenerClosedText(byte[] address) {
    return "the listener at "
        + PeerAddressText.of(address)
        + " closed with a connection attempt in its queue";
  }

  /** Counts an attempt against {@link #ATTEMPTS_PER_SECOND}; false when the second's are spent. */
  private boolean mayStartAttempt(long nowNanos) {
    newWindowIfDue(nowNanos);
    if (attemptsInWindow >= ATTEMPTS_PER_SECOND) {
      return false;
    }
    attemptsInWindow++;
    return true;
  }

  /** What is left of this second's {@link #WAIT_BUDGET_NANOS}. */
  private long waitBudgetLeft(long nowNanos) {
    newWindowIfDue(nowNanos);
    return Math.max(0, WAIT_BUDGET_NANOS - waitedInWindowNanos);
  }

  private void newWindowIfDue(long nowNanos) {
    if (nowNanos - windowStartNanos >= 1_000_000_000L) {
      windowStartNanos = nowNanos;
      attemptsInWindow = 0;
      waitedInWindowNanos = 0;
    }
  }

  /**
   * The evidence of a refused attempt, or null for a {@link ConnectException} that is not a refusal
   * (a timeout is one too, and says nothing about the peer).
   */
  private static @Nullable String refusedText(ConnectException failure, byte[] address) {
    if (!says(failure, "refused")) {
      return null;
    }
    return "nothing accepts connections at " + PeerAddressText.of(address) + " any more";
  }

  /** Gives up attempts unanswered for {@link #PENDING_LIFETIME_NANOS}. */
  private void dropStale(long nowNanos) {
    if (pending.isEmpty()) {
      return;
    }
    for (Iterator<Pending> each = pending.values().iterator(); each.hasNext(); ) {
      Pending attempt = each.next();
      if (nowNanos - attempt.startedNanos() >= PENDING_LIFETIME_NANOS) {
        closeQuietly(attempt.channel());
        each.remove();
      }
    }
  }

  /**
   * The socket address of a {@code sockaddr_in} or {@code sockaddr_in6} as libfabric holds it
   * (family in host order, port in network order), or null for anything else.
   */
  static @Nullable InetSocketAddress socketAddressOf(byte[] address) {
    if (address.length < 4) {
      return null;
    }
    int family = (address[0] & 0xff) | (address[1] & 0xff) << 8;
    int port = (address[2] & 0xff) << 8 | (address[3] & 0xff);
    byte[] ip;
    if (family == 2 && address.length == 16) {
      ip = java.util.Arrays.copyOfRange(address, 4, 8);
    } else if (family == 10 && address.length == 28) {
      ip = java.util.Arrays.copyOfRange(address, 8, 24);
    } else {
      return null;
    }
    if (port == 0) {
      return null;
    }
    try {
      return new InetSocketAddress(InetAddress.getByAddress(ip), port);
    } catch (UnknownHostException | IllegalArgumentException malformed) {
      return null;
    }
  }

  private static void closeQuietly(SocketChannel channel) {
    try {
      channel.close();
    } catch (IOException ignored) {
      // Nothing to do: it is a probe's socket, and it is gone either way.
    }
  }

  /** Closes the attempts still unanswered. */
  @Override
  public void close() {
    for (Pending attempt : pending.values()) {
      closeQuietly(attempt.channel());
    }
    pending.clear();
  }
}
