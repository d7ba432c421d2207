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
import java.util.function.Function;

/**
 * Two network namespaces of this test run, {@code dma-pa-<pid>-…} (the server's) and {@code
 * dma-pb-<pid>-…} (the target's), and the children run inside them with {@code ip netns exec}: what
 * {@link NetnsPair} and {@link NetnsRails} share. A subclass {@link #build}s what joins the two.
 *
 * <p>{@link #close()} kills every adopted child (waiting at most 5 s for each) and deletes both
 * namespaces, which removes their veths, routes, rules and nft tables; a JVM shutdown hook does the
 * same if the test JVM dies first, and {@link #create} removes what a crashed earlier run (its pid
 * no longer alive) of either subclass left behind.
 */
abstract class NetnsHosts implements AutoCloseable {
  static final String SERVER_PREFIX = "dma-pa-";
  static final String TARGET_PREFIX = "dma-pb-";

  final String ip;
  final String nft;
  final String serverNs;
  final String targetNs;

  /** The folder under {@code target/} that children's standard error goes to. */
  final String logFolder;

  private final List<Process> children = new CopyOnWriteArrayList<>();
  private final Thread hook;
  private boolean closed;

  /** The host's {@code ip} and {@code nft}. */
  record Tools(String ip, String nft) {}

  NetnsHosts(Tools tools, String serverNs, String targetNs, String logFolder) {
    this.ip = tools.ip();
    this.nft = tools.nft();
    this.serverNs = serverNs;
    this.targetNs = targetNs;
    this.logFolder = logFolder;
    this.hook = new Thread(this::cleanUp, "netns-cleanup-" + serverNs);
  }

  /**
   * Makes the hosts with {@code make}, adds the server's namespace and {@link #build}s the rest, or
   * aborts the test (a skip, with the reason printed under {@code test}'s name) when this host
   * cannot: not root, no {@code ip} or {@code nft}, or {@code ip netns add} refused. A failing
   * build closes what it made.
   */
  static <H extends NetnsHosts> H create(String test, Function<Tools, H> make)
      throws IOException, InterruptedException {
    Object uid = Files.getAttribute(Path.of("/proc/self"), "unix:uid");
    skipUnless(
        test,
        Integer.valueOf(0).equals(uid),
        "not root (uid " + uid + "): network namespaces need root");
    Optional<String> ip = tool("ip");
    skipUnless(test, ip.isPresent(), "`ip` (iproute2) is not installed");
    Optional<String> nft = tool("nft");
    skipUnless(test, nft.isPresent(), "`nft` (nftables) is not installed");
    removeLeftovers(ip.orElseThrow());
    H hosts = make.apply(new Tools(ip.orElseThrow(), nft.orElseThrow()));
    open(test, hosts);
    return hosts;
  }

  /** Adds the server's namespace (or aborts the test), then the shutdown hook, then the rest. */
  private static void open(String test, NetnsHosts hosts) throws IOException, InterruptedException {
    Result probe = run(hosts.ip, "netns", "add", hosts.serverNs);
    if (probe.code() != 0) {
      skipUnless(test, false, "`ip netns add` failed: " + probe.output().strip());
    }
    Runtime.getRuntime().addShutdownHook(hosts.hook);
    boolean built = false;
    try {
      hosts.build();
      built = true;
    } finally {
      if (!built) {
        hosts.close();
      }
    }
  }

  /** Adds the target's namespace and what joins it to the server's, which exists already. */
  abstract void build() throws IOException, InterruptedException;

  /**
   * The command that runs a Java main class of this test class path inside a namespace, with the
   * test JVM's {@code dma.*} system properties.
   */
  List<String> javaIn(String ns, Class<?> main, String... args) {
    List<String> command = new ArrayList<>(List.of(ip, "netns", "exec", ns));
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

  /** Whether a namespace of this run still exists (for a check that close removed them). */
  boolean anyLeft() throws IOException, InterruptedException {
    String list = run(ip, "netns", "list").output();
    return list.contains(serverNs) || list.contains(targetNs);
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
    // Deleting a namespace removes its veth ends (so the peers too), routes, rules and nft tables.
    for (String ns : List.of(serverNs, targetNs)) {
      try {
        Result result = run(ip, "netns", "del", ns);
        if (result.code() != 0 && !result.output().contains("No such file")) {
          System.out.println("[netns] deleting " + ns + " failed: " + result.output().strip());
        }
      } catch (IOException | InterruptedException failure) {
        System.out.println("[netns] deleting " + ns + " failed: " + failure);
      }
    }
  }

  /** Runs a command and fails (an {@link IllegalStateException}) unless it exits 0. */
  void must(String... command) throws IOException, InterruptedException {
    Result result = run(command);
    if (result.code() != 0) {
      throw new IllegalStateException(
          String.join(" ", command) + " exited " + result.code() + ": " + result.output().strip());
    }
  }

  /** Deletes namespaces with this test's prefixes whose creating JVM is no longer alive. */
  static void removeLeftovers(String ip) throws IOException, InterruptedException {
    Result list = run(ip, "netns", "list");
    for (String line : list.output().split("\n")) {
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
              + (deleted.code() == 0 ? "" : ": " + deleted.output().strip()));
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

  private static void skipUnless(String test, boolean condition, String reason) {
    if (!condition) {
      System.out.println(test + " skipped: " + reason);
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
