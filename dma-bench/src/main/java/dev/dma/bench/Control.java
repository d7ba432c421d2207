package dev.dma.bench;

import dev.dma.api.Advertisement;
import dev.dma.api.AdvertisementException;
import java.io.BufferedReader;
import java.io.Closeable;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.io.PrintWriter;
import java.io.UncheckedIOException;
import java.io.Writer;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.function.Consumer;

/**
 * The control socket between {@code dma-bench serve} (the server, which submits transfers) and
 * {@code dma-bench target} (the passive side, which exposes memory): a few UTF-8 lines over plain
 * TCP, the way the C anchor exchanges addresses out of band, readable with {@code nc}.
 *
 * <pre>
 * server → target   HELLO dma-bench 1 &lt;server fabric address, hex&gt; [&lt;another, hex&gt; ...]
 * target → server   TARGET &lt;dma provider&gt; &lt;libfabric provider&gt; &lt;count&gt;
 * target → server   AD &lt;address hex&gt; &lt;key&gt; &lt;remote address&gt; &lt;length&gt;   (count times)
 * server → target   DONE                  (after the run)
 * target → server   BYE
 * </pre>
 *
 * A server of several devices (a striping group) sends every device's address; the target inserts
 * each. A target that cannot serve answers {@code ERROR <text>} instead of {@code TARGET}. An
 * {@code AD} line's first three fields are exactly {@link Advertisement#toFields()}, so a printed
 * one can be pasted into {@code serve --advertisement}.
 */
public final class Control {
  /** The protocol's greeting and version. */
  static final String HELLO = "HELLO dma-bench 1";

  /** How long either side waits for the other's next line during the handshake. */
  static final int HANDSHAKE_TIMEOUT_MS = 30_000;

  private Control() {}

  /**
   * One exposed buffer as the target advertises it.
   *
   * @param advertisement address, key and remote address
   * @param lengthBytes the bytes exposed
   */
  public record TargetAd(Advertisement advertisement, long lengthBytes) {
    /**
     * The {@code AD} line's fields after the keyword.
     *
     * @return four space-separated fields
     */
    public String fields() {
      // The first three fields only: an advertisement that knows its length writes it as a fourth,
      // and the AD line carries the length itself.
      return String.join(" ", advertisement.toFields().subList(0, Advertisement.FIELD_COUNT))
          + " "
          + lengthBytes;
    }

    /**
     * Parses {@code <hex> <key> <remote address> [<length>]}; a missing length is taken as
     * unlimited (the user vouches for it).
     *
     * @param text the fields
     * @return the advertisement
     * @throws IllegalArgumentException naming what is wrong
     */
    public static TargetAd parse(String text) {
      List<String> fields = Arrays.asList(text.strip().split("\\s+"));
      if (fields.size() != 3 && fields.size() != 4) {
        throw new IllegalArgumentException(
            "an advertisement is \"<address hex> <key> <remote address> [<length>]\", not \""
                + text
                + "\"");
      }
      try {
        Advertisement ad = Advertisement.fromFields(fields.subList(0, 3));
        long length = fields.size() == 4 ? Long.parseLong(fields.get(3)) : Long.MAX_VALUE;
        return new TargetAd(ad, length);
      } catch (AdvertisementException | NumberFormatException e) {
        throw new IllegalArgumentException(
            "invalid advertisement \"" + text + "\": " + e.getMessage(), e);
      }
    }
  }

  /**
   * What a target said in reply to HELLO.
   *
   * @param provider the target's dma provider
   * @param fabric the target's libfabric provider
   * @param targets its buffers
   */
  public record Offer(String provider, String fabric, List<TargetAd> targets) {}

  /** The server's end of one session: open until {@link #close()} says DONE. */
  public static final class Session implements Closeable {
    private final Socket socket;
    private final BufferedReader in;
    private final PrintWriter out;
    private final Offer offer;

    private Session(Socket socket, BufferedReader in, PrintWriter out, Offer offer) {
      this.socket = socket;
      this.in = in;
      this.out = out;
      this.offer = offer;
    }

    /**
     * What the target offered.
     *
     * @return the offer
     */
    public Offer offer() {
      return offer;
    }

    /** Says DONE, waits briefly for BYE, and closes the socket. */
    @Override
    public void close() {
      try (socket) {
        out.println("DONE");
        out.flush();
        socket.setSoTimeout(5_000);
        in.readLine();
      } catch (IOException ignored) {
        // The target may be gone already; the session is over either way.
      }
    }
  }

  /**
   * Connects to a target and asks for its buffers.
   *
   * @param host the target's control host
   * @param port its control port
   * @param serverAddresses this server's fabric addresses, one per device, which the target inserts
   *     into its address vector (efa-direct needs that before the server can reach it)
   * @return the open session
   * @throws UncheckedIOException when the target cannot be reached or answers nonsense
   */
  public static Session connect(String host, int port, List<byte[]> serverAddresses) {
    Socket socket = new Socket();
    try {
      socket.connect(new InetSocketAddress(host, port), HANDSHAKE_TIMEOUT_MS);
      socket.setSoTimeout(HANDSHAKE_TIMEOUT_MS);
      socket.setTcpNoDelay(true);
      BufferedReader in =
          new BufferedReader(
              new InputStreamReader(socket.getInputStream(), StandardCharsets.UTF_8));
      PrintWriter out = writer(socket);
      StringBuilder hello = new StringBuilder(HELLO);
      for (byte[] address : serverAddresses) {
        hello.append(' ').append(Advertisement.encodeHex(address));
      }
      out.println(hello);
      out.flush();
      String line = in.readLine();
      if (line == null) {
        throw new IOException("the target closed the control connection");
      }
      if (line.startsWith("ERROR ")) {
        throw new IOException("the target refused: " + line.substring(6));
      }
      String[] head = line.split(" ");
      if (head.length != 4 || !head[0].equals("TARGET")) {
        throw new IOException("unexpected reply from the target: \"" + line + "\"");
      }
      int count = Integer.parseInt(head[3]);
      List<TargetAd> ads = new ArrayList<>();
      for (int i = 0; i < count; i++) {
        String ad = in.readLine();
        if (ad == null || !ad.startsWith("AD ")) {
          throw new IOException("expected an AD line from the target, got \"" + ad + "\"");
        }
        ads.add(TargetAd.parse(ad.substring(3)));
      }
      socket.setSoTimeout(0);
      return new Session(socket, in, out, new Offer(head[1], head[2], List.copyOf(ads)));
    } catch (IOException | RuntimeException e) {
      try {
        socket.close();
      } catch (IOException ignored) {
        // Reporting the first failure matters more.
      }
      throw new UncheckedIOException(
          new IOException("control connection to " + host + ":" + port + ": " + e.getMessage(), e));
    }
  }

  /**
   * Serves sessions on a listening socket, one at a time, until {@code once} is done or the socket
   * is closed.
   *
   * @param server the listening socket
   * @param offer what to offer every server
   * @param insertPeer inserts one of a server's fabric addresses on the target's endpoint
   * @param once whether to return after the first session
   * @param log where to say who connected
   */
  public static void serve(
      ServerSocket server,
      Offer offer,
      Consumer<byte[]> insertPeer,
      boolean once,
      Consumer<String> log) {
    while (!server.isClosed()) {
      try (Socket socket = server.accept()) {
        socket.setTcpNoDelay(true);
        socket.setSoTimeout(HANDSHAKE_TIMEOUT_MS);
        BufferedReader in =
            new BufferedReader(
                new InputStreamReader(socket.getInputStream(), StandardCharsets.UTF_8));
        PrintWriter out = writer(socket);
        String hello = in.readLine();
        if (hello == null || !hello.startsWith(HELLO + " ")) {
          out.println("ERROR expected \"" + HELLO + " <address hex> ...\"");
          out.flush();
          continue;
        }
        try {
          for (String address : hello.substring(HELLO.length() + 1).strip().split(" +")) {
            insertPeer.accept(Advertisement.decodeHex(address));
          }
        } catch (RuntimeException e) {
          out.println("ERROR cannot insert the server's address: " + e.getMessage());
          out.flush();
          continue;
        }
        log.accept("server " + socket.getRemoteSocketAddress() + " connected");
        out.println(
            "TARGET "
                + offer.provider()
                + " "
                + offer.fabric().replace(' ', '_')
                + " "
                + offer.targets().size());
        for (TargetAd ad : offer.targets()) {
          out.println("AD " + ad.fields());
        }
        out.flush();
        // The run takes as long as it takes: no timeout while the server works.
        socket.setSoTimeout(0);
        String line;
        while ((line = in.readLine()) != null && !line.equals("DONE")) {
          // Ignore anything else; later versions may say more.
        }
        out.println("BYE");
        out.flush();
        log.accept("server " + socket.getRemoteSocketAddress() + " done");
      } catch (IOException e) {
        if (server.isClosed()) {
          return;
        }
        log.accept("control connection failed: " + e.getMessage());
      }
      if (once) {
        return;
      }
    }
  }

  private static PrintWriter writer(Socket socket) throws IOException {
    Writer writer = new OutputStreamWriter(socket.getOutputStream(), StandardCharsets.UTF_8);
    return new PrintWriter(writer, false);
  }
}
