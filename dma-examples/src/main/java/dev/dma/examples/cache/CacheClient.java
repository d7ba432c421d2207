package dev.dma.examples.cache;

import dev.dma.api.Advertisement;
import dev.dma.api.Checksums;
import dev.dma.api.DmaConfiguration;
import dev.dma.api.RemoteAccess;
import dev.dma.core.PassiveTarget;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintWriter;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import org.jspecify.annotations.Nullable;

/**
 * The cache's client: passive on the fabric (a {@link PassiveTarget} exposing one buffer, which the
 * server reads a PUT's value from and writes a GET's value into), active on the control channel.
 *
 * <p>Threads: one caller at a time (the buffer holds one value at a time); the target's own thread
 * progresses the endpoint. Every wait for the server is bounded by {@link #ANSWER_TIMEOUT}.
 * Ownership: the client owns its target, buffer and socket; {@link #close()} says BYE and releases
 * them.
 */
public final class CacheClient implements AutoCloseable {
  /** The longest the client waits for one answer; above the server's own transfer bound. */
  public static final Duration ANSWER_TIMEOUT = CacheServer.TRANSFER_TIMEOUT.plusSeconds(10);

  private final Arena arena;
  private final PassiveTarget target;
  private final MemorySegment buffer;
  private final Socket socket;
  private final BufferedReader in;
  private final PrintWriter out;
  private final long clientId;
  private int lastChunks;

  private CacheClient(
      Arena arena,
      PassiveTarget target,
      MemorySegment buffer,
      Socket socket,
      BufferedReader in,
      PrintWriter out,
      long clientId) {
    this.arena = arena;
    this.target = target;
    this.buffer = buffer;
    this.socket = socket;
    this.in = in;
    this.out = out;
    this.clientId = clientId;
  }

  /**
   * Exposes a buffer, connects to the server and says hello with the buffer's advertisement.
   *
   * @param configuration the fabric configuration of the client's target (the same provider as the
   *     server's)
   * @param server the server's control channel
   * @param bufferBytes the buffer's size: the largest value this client can put or get
   * @return the connected client
   * @throws IOException when the control channel fails, or the server refuses the hello
   */
  public static CacheClient connect(
      DmaConfiguration configuration, InetSocketAddress server, long bufferBytes)
      throws IOException {
    Arena arena = Arena.ofShared();
    PassiveTarget target = null;
    Socket socket = null;
    try {
      target = PassiveTarget.start(configuration);
      MemorySegment buffer = arena.allocate(bufferBytes, 4096);
      Advertisement ad = target.expose(buffer, RemoteAccess.READ_WRITE).advertisement();
      socket = new Socket();
      socket.connect(server, (int) ANSWER_TIMEOUT.toMillis());
      socket.setSoTimeout((int) ANSWER_TIMEOUT.toMillis());
      BufferedReader in =
          new BufferedReader(
              new InputStreamReader(socket.getInputStream(), StandardCharsets.UTF_8));
      PrintWriter out = new PrintWriter(socket.getOutputStream(), true, StandardCharsets.UTF_8);
      out.println("HELLO " + String.join(" ", ad.toFields()));
      List<String> ok = expectOk(in.readLine(), "HELLO");
      return new CacheClient(arena, target, buffer, socket, in, out, Long.parseLong(ok.get(1)));
    } catch (IOException | RuntimeException failed) {
      if (socket != null) {
        socket.close();
      }
      if (target != null) {
        target.close();
      }
      arena.close();
      throw failed;
    }
  }

  /**
   * The id the server gave this connection's hello.
   *
   * @return the client id
   */
  public long clientId() {
    return clientId;
  }

  /**
   * How many chunks the server split the last PUT's or GET's transfer into (1 unless it striped).
   *
   * @return the chunk count
   */
  public int lastChunks() {
    return lastChunks;
  }

  /**
   * Stores a value: copies it into the buffer, and the server reads it from there by RMA.
   *
   * @param key a key without spaces
   * @param value the value, at most the buffer's size
   * @return the CRC-32C the server computed over what it read (equal to the value's)
   * @throws IOException when the server answers an error (its reason and message) or the channel
   *     fails
   */
  public int put(String key, MemorySegment value) throws IOException {
    buffer.copyFrom(value);
    List<String> ok = ask("PUT " + key + " " + value.byteSize());
    lastChunks = Integer.parseInt(ok.get(2));
    return Integer.parseUnsignedInt(ok.get(1), 16);
  }

  /**
   * Fetches a value: the server writes it into the buffer by RMA.
   *
   * @param key the key
   * @return a copy of the value, or {@code null} when the server has none under that key
   * @throws IOException when the server answers an error or the channel fails, or the bytes that
   *     landed do not match the server's checksum
   */
  public byte @Nullable [] get(String key) throws IOException {
    out.println("GET " + key);
    String line = in.readLine();
    if ("MISSING".equals(line)) {
      return null;
    }
    List<String> ok = expectOk(line, "GET");
    long length = Long.parseLong(ok.get(1));
    int crc = Integer.parseUnsignedInt(ok.get(2), 16);
    lastChunks = Integer.parseInt(ok.get(3));
    MemorySegment landed = buffer.asSlice(0, length);
    if (Checksums.crc32c(landed) != crc) {
      throw new IOException("GET " + key + ": the bytes that landed do not match the checksum");
    }
    return landed.toArray(ValueLayout.JAVA_BYTE);
  }

  private List<String> ask(String request) throws IOException {
    out.println(request);
    return expectOk(in.readLine(), request.split(" ")[0]);
  }

  /** The answer's words when it is {@code OK ...}; otherwise the server's error as an exception. */
  private static List<String> expectOk(@Nullable String line, String request) throws IOException {
    if (line == null) {
      throw new IOException(request + ": the server closed the connection");
    }
    if (!line.startsWith("OK")) {
      throw new IOException(request + " failed: " + line);
    }
    return List.of(line.split(" "));
  }

  /** Says BYE (best effort), then closes the socket, the target and the buffer. */
  @Override
  public void close() throws IOException {
    try {
      if (!socket.isClosed()) {
        out.println("BYE");
        in.readLine();
      }
    } catch (IOException gone) {
      // The server is gone already: nothing to say goodbye to.
    } finally {
      socket.close();
      // The target first: once it is closed nothing can land in the buffer any more.
      target.close();
      arena.close();
    }
  }

  /**
   * Connects over tcp, puts a patterned value, gets it back and prints {@code crc <hex> chunks
   * <put>/<get>}; exits 0 when the bytes came back equal, 1 otherwise.
   *
   * @param args the server's host (default {@code 127.0.0.1}), its control port (default 7000), the
   *     value's size in bytes (default 1 MiB) and optionally a provider (default {@code tcp})
   * @throws Exception when the client cannot connect
   */
  public static void main(String[] args) throws Exception {
    String host = args.length > 0 ? args[0] : "127.0.0.1";
    int port = args.length > 1 ? Integer.parseInt(args[1]) : 7000;
    long size = args.length > 2 ? Long.parseLong(args[2]) : 1 << 20;
    String provider = args.length > 3 ? args[3] : "tcp";
    DmaConfiguration configuration =
        DmaConfiguration.builder().providers(provider).bind(host).build();
    boolean same;
    try (Arena values = Arena.ofConfined();
        CacheClient client = connect(configuration, new InetSocketAddress(host, port), size)) {
      MemorySegment value = values.allocate(size);
      for (long i = 0; i < size; i++) {
        value.set(ValueLayout.JAVA_BYTE, i, (byte) (i * 31 + 7));
      }
      int stored = client.put("example", value);
      int putChunks = client.lastChunks();
      byte[] back = client.get("example");
      same =
          back != null
              && stored == Checksums.crc32c(value)
              && MemorySegment.ofArray(back).mismatch(value) == -1;
      System.out.printf(
          "crc %08x chunks %d/%d %s%n",
          stored, putChunks, client.lastChunks(), same ? "same" : "DIFFERENT");
    }
    System.exit(same ? 0 : 1);
  }
}
