package dev.dma.it;

import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Two network namespaces of this test run, {@code dma-pa-<pid>-<n>} (the server's) and {@code
 * dma-pb-<pid>-<n>} (the target's), joined by one veth pair with an address from a /30 at each end
 * and nothing else: no route out, no address outside them. A partition drops, with nftables, every
 * packet arriving over the veth in both namespaces (silent loss, as a dead switch or a pulled cable
 * behind it looks to TCP); healing deletes those tables.
 *
 * <p>Children run inside a namespace with {@code ip netns exec}. {@link #close()} kills every child
 * and deletes both namespaces (which removes the veth and the rules); a JVM shutdown hook does the
 * same if the test JVM dies first, and {@link #create} removes what a crashed earlier run (its pid
 * no longer alive) left behind.
 */
final class NetnsPair implements AutoCloseable {
  static final String SERVER_PREFIX = "dma-pa-";
  static final String TARGET_PREFIX = "dma-pb-";
  private static final AtomicInteger NUMBERS = new AtomicInteger();
  private static final String TABLE = "dmapart";

  final String ip;
  final String nft;
  final String serverNs;
  final String targetNs;
  final String serverLink;
  final String targetLink;
  final String serverAddress;
  final String targetAddress;
  private final List<Process> children = new CopyOnWriteArrayList<>();
  private final Thread hook;
  private boolean closed;

  private NetnsPair(String ip, String nft, long pid, int number) {
    this.ip = ip;
    this.nft = nft;
    this.serverNs = SERVER_PREFIX + pid + "-" + number;
    this.targetNs = TARGET_PREFIX + pid + "-" + number;
    this.serverLink = "dpa" + (pid % 10_000_000) + "n" + number;
    this.targetLink = "dpb" + (pid % 10_000_000) + "n" + number;
    int third = (int) ((pid + number) % 250) + 1;
    this.serverAddress = "10.250." + third + ".1";
    this.targetAddress = "10.250." + third + ".2";
    this.hook = new Thread(this::cleanUp, "netns-cleanup-" + serverNs);
  }

  /**
   * Creates the pair, or aborts the test (a skip, with the reason printed) when this host cannot:
   * not root, no {@code ip} or {@code nft}, or {@code ip netns add} refused.
   */
  static NetnsPair create() throws IOException, InterruptedException {
    Object uid = Files.getAttribute(Path.of("/proc/self"), "unix:uid");
    skipUnless(
        Integer.valueOf(0).equals(uid), "not root (uid " + uid + "): network namespaces need root");
    Optional<String> ip = tool("ip");
    skipUnless(ip.isPresent(), "`ip` (iproute2) is not installed");
    Optional<String> nft = tool("nft");
    skipUnless(nft.isPresent(), "`nft` (nftables) is not installed");
    removeLeftovers(ip.orElseThrow());
    long pid = ProcessHandle.current().pid();
    NetnsPair pair =
        new NetnsPair(ip.orElseThrow(), nft.orElseThrow(), pid, NUMBERS.incrementAndGet());
    Result probe = run(pair.ip, "netns", "add", pair.serverNs);
    if (probe.code != 0) {
      skipUnless(false, "`ip netns add` failed: " + probe.output.strip());
    }
    Runtime.getRuntime().addShutdownHook(pair.hook);
    boolean built = false;
    try {
      pair.must(pair.ip, "netns", "add", pair.targetNs);
      pair.must(
          pair.ip,
          "link",
          "add",
          "name",
          pair.serverLink,
          "netns",
          pair.serverNs,
          "type",
          "veth",
          "peer",
          "name",
          pair.targetLink,
          "netns",
          pair.targetNs);
      pair.must(
          pair.ip,
          "-n",
          pair.serverNs,
          "addr",
          "add",
          pair.serverAddress + "/30",
          "dev",
          pair.serverLink);
      pair.must(
          pair.ip,
          "-n",
          pair.targetNs,
          "addr",
          "add",
          pair.targetAddress + "/30",
          "dev",
          pair.targetLink);
      for (String[] nsLink :
          new String[][] {{pair.serverNs, pair.serverLink}, {pair.targetNs, pair.targetLink}}) {
        pair.must(pair.ip, "-n", nsLink[0], "link", "set", "lo", "up");
        pair.must(pair.ip, "-n", nsLink[0], "link", "set", nsLink[1], "up");
      }
      System.out.printf(
          "[netns] %s (%s %s) <-veth-> %s (%s %s)%n",
          pair.serverNs,
          pair.serverLink,
          pair.serverAddress,
          pair.targetNs,
          pair.targetLink,
          pair.targetAddress);
      built = true;
      return pair;
    } finally {
      if (!built) {
        pair.close();
      }
    }
  }

  /** Drops everything arriving over the veth, in both namespaces. */
  void partition() throws IOException, InterruptedException {
    dropInput(serverNs, serverLink);
    dropInput(targetNs, targetLink);
  }

  /** Deletes the drop rules in both namespaces. */
  void heal() throws IOException, InterruptedException {
    must(ip, "netns", "exec", serverNs, nft, "delete", "table", "inet", TABLE);
    must(ip, "netns", "exec", targetNs, nft, "delete", "table", "inet", TABLE);
  }

  private void dropInput(String ns, String link) throws IOException, InterruptedException {
    must(
        ip,
        "netns",
        "exec",
        ns,
        nft,
        "add table inet "
            + TABLE
            + "; "
            + "add chain inet "
            + TABLE
            + " in { type filter hook input priority 0; policy accept; }; "
            + "add rule inet "
            + TABLE
            + " in iifname \""
            + link
            + "\" drop");
  }

  /**
   * The command that runs a Java main class of this test class path inside a namespace, with the
   * test JVM's {@code dma.*} system properties.
   */
  List<String> javaIn(String ns, Class<?> main, String... args) {
    List<String> command = new ArrayList<>();
    command.addAll(List.of(ip, "netns", "exec", ns));
    command.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
    command.add("--enable-native-access=ALL-UNNAMED");
    command.add("-XX:+UseSerialGC");
    command.add("-Xmx256m");
    for (String name : System.getProperties().stringPropertyNames()) {
      if (name.startsWith("dma.")) {
        command.add("-D" + name + "=" + System.getProperty(name));
      }
    }
    command.add("-cp");
    command.add(System.getProperty("java.class.path"));
    command.add(main.getName());
    command.addAll(List.of(args));
    return command;
  }

  /** Remembers a child so {@link #close()} (or the shutdown hook) kills it. */
  void adopt(Process child) {
    children.add(child);
  }

  @Override
  public void close() {
    cleanUp();
    try {
      Runtime.getRuntime().removeShutdownHook(hook);
    } catch (IllegalStateException | IllegalArgumentException shuttingDownOrNeverAdded) {
      // The hook runs or ran, or create failed before adding it.
    }
  }

  private synchronized void cleanUp() {
    if (closed) {
      return;
    }
    closed = true;
    for (Process child : children) {
      child.destroyForcibly();
    }
    for (Process child : children) {
      try {
        child.waitFor(5, TimeUnit.SECONDS);
      } catch (InterruptedException interrupted) {
        Thread.currentThread().interrupt();
      }
    }
    for (String ns : List.of(serverNs, targetNs)) {
      try {
        Result result = run(ip, "netns", "del", ns);
        if (result.code != 0 && !result.output.contains("No such file")) {
          System.out.println("[netns] deleting " + ns + " failed: " + result.output.strip());
        }
      } catch (IOException | InterruptedException failure) {
        System.out.println("[netns] deleting " + ns + " failed: " + failure);
      }
    }
  }

  private void must(String... command) throws IOException, InterruptedException {
    Result result = run(command);
    if (result.code != 0) {
      throw new IllegalStateException(
          String.join(" ", command) + " exited " + result.code + ": " + result.output.strip());
    }
  }

  /** Deletes namespaces with this test's prefixes whose creating JVM is no longer alive. */
  static void removeLeftovers(String ip) throws IOException, InterruptedException {
    Result list = run(ip, "netns", "list");
    for (String line : list.output.split("\n")) {
      String name = line.strip().split(" ")[0];
      String rest =
          name.startsWith(SERVER_PREFIX)
              ? name.substring(SERVER_PREFIX.length())
              : name.startsWith(TARGET_PREFIX) ? name.substring(TARGET_PREFIX.length()) : null;
      if (rest == null) {
        continue;
      }
      long pid;
      try {
        pid = Long.parseLong(rest.split("-")[0]);
      } catch (NumberFormatException notOurs) {
        continue;
      }
      if (ProcessHandle.of(pid).map(ProcessHandle::isAlive).orElse(false)) {
        continue;
      }
      Result deleted = run(ip, "netns", "del", name);
      System.out.println(
          "[netns] removed leftover "
              + name
              + " of a dead run"
              + (deleted.code == 0 ? "" : ": " + deleted.output.strip()));
    }
  }

  static Optional<String> tool(String name) {
    List<String> dirs =
        new ArrayList<>(List.of(System.getenv().getOrDefault("PATH", "").split(":")));
    dirs.addAll(List.of("/usr/sbin", "/sbin", "/usr/bin", "/bin"));
    for (String dir : dirs) {
      if (!dir.isEmpty()) {
        Path candidate = Path.of(dir, name);
        if (Files.isExecutable(candidate)) {
          return Optional.of(candidate.toString());
        }
      }
    }
    return Optional.empty();
  }

  private static void skipUnless(boolean condition, String reason) {
    if (!condition) {
      System.out.println("PartitionTest skipped: " + reason);
    }
    assumeTrue(condition, reason);
  }

  record Result(int code, String output) {}

  /** Runs a command, bounded at 15 s, with its output and error merged. */
  static Result run(String... command) throws IOException, InterruptedException {
    Path output = Files.createTempFile("dma-netns", ".out");
    try {
      Process process =
          new ProcessBuilder(command)
              .redirectErrorStream(true)
              .redirectOutput(output.toFile())
              .redirectInput(ProcessBuilder.Redirect.from(new java.io.File("/dev/null")))
              .start();
      if (!process.waitFor(15, TimeUnit.SECONDS)) {
        process.destroyForcibly();
        return new Result(-1, String.join(" ", command) + " did not finish in 15 s");
      }
      return new Result(process.exitValue(), Files.readString(output, StandardCharsets.UTF_8));
    } finally {
      Files.deleteIfExists(output);
    }
  }
}
