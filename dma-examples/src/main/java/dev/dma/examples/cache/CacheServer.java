package dev.dma.examples.cache;

import dev.dma.api.Advertisement;
import dev.dma.api.Checksum;
import dev.dma.api.Completion;
import dev.dma.api.DmaConfiguration;
import dev.dma.api.DmaException;
import dev.dma.api.Operands;
import dev.dma.api.Peer;
import dev.dma.api.TransferRequest;
import dev.dma.core.AsyncFabricService;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintWriter;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.SocketException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.ReentrantReadWriteLock;
import org.jspecify.annotations.Nullable;

/**
 * The cache's server: values in native memory, moved by RMA through an {@link AsyncFabricService}
 * (a future per transfer; over a striping group when asked), clients served over the control
 * channel the package describes.
 *
 * <p>Threads: one thread accepts connections and each connection has a virtual thread of its own,
 * which waits for its transfers' futures (bounded by {@link #TRANSFER_TIMEOUT}). Values are
 * replaced under a write lock that waits for the GETs reading the old value, so no RMA ever reads
 * memory that was freed. Ownership: the server owns its service, its values and its sockets; {@link
 * #close()} releases them all.
 */
public final class CacheServer implements AutoCloseable {
  /**
   * The longest a request waits for its transfer. Above the service's completion deadline (30 s by
   * default), which bounds every transfer: a future that waits longer means a stuck server.
   */
  public static final Duration TRANSFER_TIMEOUT = Duration.ofSeconds(60);

  private static final System.Logger LOG = System.getLogger(CacheServer.class.getName());

  private final AsyncFabricService<Operands> fabric;
  private final ServerSocket listener;
  private final Thread acceptor;
  private final Map<String, Value> values = new ConcurrentHashMap<>();
  private final Map<Socket, Boolean> connections = new ConcurrentHashMap<>();
  private final ReentrantReadWriteLock replacing = new ReentrantReadWriteLock();
  private final AtomicLong clientIds = new AtomicLong();

  /** One stored value and the arena that owns its memory. */
  private record Value(Arena arena, MemorySegment bytes) {}

  private CacheServer(AsyncFabricService<Operands> fabric, ServerSocket listener) {
    this.fabric = fabric;
    this.listener = listener;
    this.acceptor = Thread.ofPlatform().name("cache-accept").daemon(true).unstarted(this::accept);
  }

  /**
   * Starts a server on one fabric endpoint, listening for clients on {@code control}.
   *
   * @param configuration the fabric configuration (for example {@code providers=tcp,
   *     bind=127.0.0.1})
   * @param control where the control channel listens; port 0 picks a free one ({@link #port()})
   * @return the running server
   * @throws IOException when the control socket cannot listen
   * @throws DmaException when the fabric service cannot start
   */
  public static CacheServer start(DmaConfiguration configuration, InetSocketAddress control)
      throws IOException {
    return start(configuration, control, 0);
  }

  /**
   * Starts a server that, with {@code stripeThresholdBytes} above 0, runs over a group of one
   * service per device of the configuration's {@code interfaces} ({@code lo,lo} stripes over two
   * endpoints on loopback) and stripes values of at least that many bytes over them.
   *
   * @param configuration the fabric configuration
   * @param control where the control channel listens; port 0 picks a free one
   * @param stripeThresholdBytes 0 for one service, else the striping threshold of a group
   * @return the running server
   * @throws IOException when the control socket cannot listen
   * @throws DmaException when the fabric service cannot start
   */
  public static CacheServer start(
      DmaConfiguration configuration, InetSocketAddress control, long stripeThresholdBytes)
      throws IOException {
    AsyncFabricService.Builder<Operands> builder = AsyncFabricService.builder(configuration);
    if (stripeThresholdBytes > 0) {
      builder.stripeThresholdBytes(stripeThresholdBytes);
    }
    AsyncFabricService<Operands> fabric = builder.start();
    ServerSocket listener;
    try {
      listener = new ServerSocket();
      listener.bind(control);
    } catch (IOException | RuntimeException failed) {
      fabric.close();
      throw failed;
    }
    CacheServer server = new CacheServer(fabric, listener);
    server.acceptor.start();
    return server;
  }

  /**
   * The control channel's port.
   *
   * @return the port clients connect to
   */
  public int port() {
    return listener.getLocalPort();
  }

  /**
   * The fabric service the values move through (to inspect, for example its devices).
   *
   * @return the service
   */
  public AsyncFabricService<Operands> fabric() {
    return fabric;
  }

  /**
   * A copy of a stored value, for tests and tools.
   *
   * @param key the key
   * @return its bytes, or {@code null} when nothing is stored under it
   */
  public byte @Nullable [] value(String key) {
    replacing.readLock().lock();
    try {
      Value value = values.get(key);
      return value == null ? null : value.bytes().toArray(ValueLayout.JAVA_BYTE);
    } finally {
      replacing.readLock().unlock();
    }
  }

  private void accept() {
    while (!listener.isClosed()) {
      Socket socket;
      try {
        socket = listener.accept();
      } catch (IOException closed) {
        return;
      }
      connections.put(socket, Boolean.TRUE);
      Thread.ofVirtual().name("cache-client").start(() -> serve(socket));
    }
  }

  /** One connection: its client's hello, then requests until BYE or the connection ends. */
  private void serve(Socket socket) {
    Session session = new Session();
    try (socket;
        BufferedReader in =
            new BufferedReader(
                new InputStreamReader(socket.getInputStream(), StandardCharsets.UTF_8));
        PrintWriter out = new PrintWriter(socket.getOutputStream(), true, StandardCharsets.UTF_8)) {
      String line;
      while ((line = in.readLine()) != null) {
        String answer = session.handle(line);
        out.println(answer);
        if (session.done) {
          return;
        }
      }
    } catch (SocketException closed) {
      // The client went away, or close() closed the socket: nothing to answer.
    } catch (IOException | RuntimeException failed) {
      LOG.log(System.Logger.Level.WARNING, "a client connection failed", failed);
    } finally {
      connections.remove(socket);
      session.leave();
    }
  }

  /**
   * One client's state on its connection, once it said hello: its peer (its id and address, which
   * every request carries so the service posts it without a lookup) and its advertisement.
   */
  private final class Session {
    private @Nullable Peer peer;
    private @Nullable Advertisement buffer;
    private boolean done;

    String handle(String line) {
      List<String> words = Arrays.asList(line.strip().split(" +"));
      try {
        return switch (words.getFirst()) {
          case "HELLO" -> hello(words.subList(1, words.size()));
          case "PUT" -> put(words);
          case "GET" -> get(words);
          case "BYE" -> {
            leave();
            done = true;
            yield "OK";
          }
          default -> error("BAD_REQUEST", "unknown command: " + line);
        };
      } catch (DmaException failed) {
        return error(failed.reason().name(), failed.getMessage());
      } catch (IllegalArgumentException malformed) {
        return error("BAD_REQUEST", malformed.getMessage());
      }
    }

    private String hello(List<String> fields) {
      Advertisement advertised = Advertisement.fromFields(fields);
      if (!advertised.lengthKnown()) {
        return error("BAD_REQUEST", "HELLO needs the buffer's length, the fourth field");
      }
      leave();
      // A new id per hello: an id whose peer hit a deadline stays failed until addPeer, and a
      // client that comes back may have a new address; a fresh id carries no such past.
      long id = clientIds.incrementAndGet();
      peer = fabric.addPeer(id, advertised.address());
      buffer = advertised;
      return "OK " + id;
    }

    private String put(List<String> words) {
      Advertisement ad = requireHello();
      if (words.size() != 3) {
        return error("BAD_REQUEST", "expected PUT <key> <length>");
      }
      long length = Long.parseLong(words.get(2));
      if (length < 1 || length > ad.lengthBytes()) {
        return error(
            "BAD_REQUEST", "length " + length + " is not in 1.." + ad.lengthBytes() + " bytes");
      }
      Arena arena = Arena.ofShared();
      CompletableFuture<Completion<Operands>> future = null;
      try {
        MemorySegment landing = arena.allocate(length, 4096);
        future =
            fabric.transfer(
                TransferRequest.read(requirePeer(), ad, length, Operands.of(landing))
                    .withChecksum(Checksum.CRC32C));
        Completion<Operands> done = await(future);
        Value old;
        replacing.writeLock().lock();
        try {
          old = values.put(words.get(1), new Value(arena, landing));
        } finally {
          replacing.writeLock().unlock();
        }
        if (old != null) {
          old.arena().close();
        }
        return "OK " + crc(done) + " " + done.chunks();
      } catch (RuntimeException failed) {
        // A failed future means the transfer's completion came: nothing touches the landing
        // memory any more. One still pending (a wait that timed out) still owns it: leave it.
        if (future == null || future.isDone()) {
          arena.close();
        }
        throw failed;
      }
    }

    private String get(List<String> words) {
      Advertisement ad = requireHello();
      if (words.size() != 2) {
        return error("BAD_REQUEST", "expected GET <key>");
      }
      // Held while the value is written out, so a PUT cannot free it under the RMA.
      replacing.readLock().lock();
      try {
        Value value = values.get(words.get(1));
        if (value == null) {
          return "MISSING";
        }
        if (value.bytes().byteSize() > ad.lengthBytes()) {
          return error(
              "BAD_REQUEST",
              "the value is "
                  + value.bytes().byteSize()
                  + " bytes, the client's buffer "
                  + ad.lengthBytes());
        }
        Completion<Operands> done =
            await(
                fabric.transfer(
                    TransferRequest.write(requirePeer(), ad, Operands.of(value.bytes()))
                        .withChecksum(Checksum.CRC32C)));
        return "OK " + value.bytes().byteSize() + " " + crc(done) + " " + done.chunks();
      } finally {
        replacing.readLock().unlock();
      }
    }

    private Advertisement requireHello() {
      Advertisement ad = buffer;
      if (ad == null) {
        throw new IllegalArgumentException("say HELLO first");
      }
      return ad;
    }

    private Peer requirePeer() {
      Peer known = peer;
      if (known == null) {
        throw new IllegalArgumentException("say HELLO first");
      }
      return known;
    }

    /** Forgets the client's peer, on BYE, a new HELLO, or a connection that ended. */
    void leave() {
      Peer known = peer;
      if (known != null) {
        fabric.removePeer(known.clientId());
        peer = null;
        buffer = null;
      }
    }
  }

  /** Waits, bounded, for a transfer; its failure is the {@link DmaException} it carries. */
  private static Completion<Operands> await(CompletableFuture<Completion<Operands>> future) {
    try {
      return future.get(TRANSFER_TIMEOUT.toMillis(), TimeUnit.MILLISECONDS);
    } catch (ExecutionException failed) {
      if (failed.getCause() instanceof DmaException error) {
        throw error;
      }
      throw new IllegalStateException("a transfer's future failed", failed.getCause());
    } catch (TimeoutException stuck) {
      // Abandoning the future leaves the operand with the service until it completes, so a
      // PUT's landing memory is not freed (see put).
      throw DmaException.fabric(
          DmaException.Reason.DEADLINE,
          "no completion within " + TRANSFER_TIMEOUT + "; the server is stuck");
    } catch (InterruptedException interrupted) {
      Thread.currentThread().interrupt();
      throw DmaException.fabric(DmaException.Reason.CLOSED, "the server is closing");
    }
  }

  private static String crc(Completion<Operands> done) {
    return String.format("%08x", done.outcome().done().checksum().orElseThrow());
  }

  private static String error(String reason, @Nullable String message) {
    return "ERR " + reason + " " + String.valueOf(message).replace('\n', ' ');
  }

  /**
   * Stops accepting, ends every connection, closes the fabric service (which completes what is in
   * flight) and frees every value.
   */
  @Override
  public void close() {
    try {
      listener.close();
    } catch (IOException ignored) {
      // Closing a listening socket fails only if it is already closed.
    }
    for (Socket socket : connections.keySet()) {
      try {
        socket.close();
      } catch (IOException ignored) {
        // Already closed by its client.
      }
    }
    fabric.close();
    replacing.writeLock().lock();
    try {
      for (Value value : values.values()) {
        value.arena().close();
      }
      values.clear();
    } finally {
      replacing.writeLock().unlock();
    }
  }

  /**
   * Runs a server over tcp until the process is stopped, closing it on the way out.
   *
   * @param args the address to listen and bind the fabric on (default {@code 127.0.0.1}), the
   *     control port (default 7000), and optionally a provider name (default {@code tcp})
   * @throws Exception when the server cannot start
   */
  public static void main(String[] args) throws Exception {
    String host = args.length > 0 ? args[0] : "127.0.0.1";
    int port = args.length > 1 ? Integer.parseInt(args[1]) : 7000;
    String provider = args.length > 2 ? args[2] : "tcp";
    DmaConfiguration configuration =
        DmaConfiguration.builder().providers(provider).bind(host).build();
    CacheServer server =
        start(configuration, new InetSocketAddress(InetAddress.getByName(host), port));
    Runtime.getRuntime().addShutdownHook(new Thread(server::close, "cache-shutdown"));
    System.out.println("listening on " + host + ":" + server.port());
    Thread.currentThread().join();
  }
}
