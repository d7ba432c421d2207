package dev.dma.it;

import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Two network namespaces of this test run, the server's and the target's (named with {@link
 * NetnsPair}'s prefixes, so either class removes what a crashed run of the other left), joined by
 * {@code rails} veth pairs: rail {@code i} is its own /30. The target's address is one more, on its
 * loopback ({@link #targetAddress}), reachable over every rail: the server's namespace routes by
 * source address (one policy-routing table per rail), so a socket bound to rail {@code i}'s address
 * reaches the target over rail {@code i}'s veth only, and the target answers over the same veth
 * (the connected route back). That is what makes each device of a group a rail of its own, as on a
 * multi-NIC host. Cutting a rail drops, with nftables, everything arriving over its veth in both
 * namespaces; healing deletes those tables.
 *
 * <p>Ownership and clean-up as {@link NetnsPair}: {@link #close()} kills every adopted child and
 * deletes both namespaces (which removes the veths, routes and rules); a JVM shutdown hook does the
 * same if the test JVM dies first.
 */
final class NetnsRails implements AutoCloseable {
  private static final AtomicInteger NUMBERS = new AtomicInteger();

  final String ip;
  final String nft;
  final String serverNs;
  final String targetNs;
  final List<String> serverLinks = new ArrayList<>();
  final List<String> targetLinks = new ArrayList<>();
  final List<String> serverAddresses = new ArrayList<>();
  final List<String> targetRailAddresses = new ArrayList<>();
  final String targetAddress;
  private final List<Process> children = new CopyOnWriteArrayList<>();
  private final Thread hook;
  private boolean closed;

  private NetnsRails(String ip, String nft, long pid, int number, int rails) {
    this.ip = ip;
    this.nft = nft;
    this.serverNs = NetnsPair.SERVER_PREFIX + pid + "-r" + number;
    this.targetNs = NetnsPair.TARGET_PREFIX + pid + "-r" + number;
    int third = (int) ((pid + number) % 200) + 1;
    for (int i = 0; i < rails; i++) {
      serverLinks.add("drs" + (pid % 1_000_000) + "n" + number + "r" + i);
      targetLinks.add("drt" + (pid % 1_000_000) + "n" + number + "r" + i);
      serverAddresses.add("10." + (241 + i) + "." + third + ".1");
      targetRailAddresses.add("10." + (241 + i) + "." + third + ".2");
    }
    this.targetAddress = "10.240." + third + ".1";
    this.hook = new Thread(this::cleanUp, "netns-cleanup-" + serverNs);
  }

  /**
   * Creates the namespaces and rails, or aborts the test (a skip, with the reason printed) when
   * this host cannot: not root, no {@code ip} or {@code nft}, or {@code ip netns add} refused.
   */
  static NetnsRails create(int rails) throws IOException, InterruptedException {
    Object uid = Files.getAttribute(Path.of("/proc/self"), "unix:uid");
    skipUnless(
        Integer.valueOf(0).equals(uid), "not root (uid " + uid + "): network namespaces need root");
    Optional<String> ip = NetnsPair.tool("ip");
    skipUnless(ip.isPresent(), "`ip` (iproute2) is not installed");
    Optional<String> nft = NetnsPair.tool("nft");
    skipUnless(nft.isPresent(), "`nft` (nftables) is not installed");
    NetnsPair.removeLeftovers(ip.orElseThrow());
    NetnsRails net =
        new NetnsRails(
            ip.orElseThrow(),
            nft.orElseThrow(),
            ProcessHandle.current().pid(),
            NUMBERS.incrementAndGet(),
            rails);
    NetnsPair.Result probe = NetnsPair.run(net.ip, "netns", "add", net.serverNs);
    if (probe.code() != 0) {
      skipUnless(false, "`ip netns add` failed: " + probe.output().strip());
    }
    Runtime.getRuntime().addShutdownHook(net.hook);
    boolean built = false;
    try {
      String s = net.serverNs;
      String t = net.targetNs;
      net.must(net.ip, "netns", "add", t);
      net.must(net.ip, "-n", s, "link", "set", "lo", "up");
      net.must(net.ip, "-n", t, "link", "set", "lo", "up");
      net.must(net.ip, "-n", t, "addr", "add", net.targetAddress + "/32", "dev", "lo");
      for (int i = 0; i < rails; i++) {
        String sl = net.serverLinks.get(i);
        String tl = net.targetLinks.get(i);
        String sa = net.serverAddresses.get(i);
        String table = "" + (100 + i);
        net.must(
            net.ip, "link", "add", "name", sl, "netns", s, "type", "veth", "peer", "name", tl,
            "netns", t);
        net.must(net.ip, "-n", s, "addr", "add", sa + "/30", "dev", sl);
        net.must(net.ip, "-n", t, "addr", "add", net.targetRailAddresses.get(i) + "/30", "dev", tl);
        net.must(net.ip, "-n", s, "link", "set", sl, "up");
        net.must(net.ip, "-n", t, "link", "set", tl, "up");
        net.must(
            net.ip,
            "-n",
            s,
            "route",
            "add",
            net.targetAddress + "/32",
            "via",
            net.targetRailAddresses.get(i),
            "dev",
            sl,
            "table",
            table);
        net.must(net.ip, "-n", s, "rule", "add", "from", sa, "lookup", table);
      }
      System.out.printf(
          "[netns] %s %s <-%d veth rails-> %s (target %s)%n",
          s, net.serverAddresses, rails, t, net.targetAddress);
      built = true;
      return net;
    } finally {
      if (!built) {
        net.close();
      }
    }
  }

  /** Drops everything arriving over rail {@code rail}'s veth, in both namespaces. */
  void cut(int rail) throws IOException, InterruptedException {
    drop(serverNs, serverLinks.get(rail), rail);
    drop(targetNs, targetLinks.get(rail), rail);
  }

  /** Deletes rail {@code rail}'s drop rules in both namespaces. */
  void heal(int rail) throws IOException, InterruptedException {
    for (String ns : List.of(serverNs, targetNs)) {
      must(ip, "netns", "exec", ns, nft, "delete", "table", "inet", table(rail));
    }
  }

  /** The nft rules now in {@code ns}, for a check that healing removed them. */
  String rules(String ns) throws IOException, InterruptedException {
    return NetnsPair.run(ip, "netns", "exec", ns, nft, "list", "ruleset").output();
  }

  private static String table(int rail) {
    return "dmarail" + rail;
  }

  private void drop(String ns, String link, int rail) throws IOException, InterruptedException {
    String table = table(rail);
    must(
        ip,
        "netns",
        "exec",
        ns,
        nft,
        "add table inet "
            + table
            + "; add chain inet "
            + table
            + " in { type filter hook input priority 0; policy accept; }; add rule inet "
            + table
            + " in iifname \""
            + link
            + "\" drop");
  }

  /** The command that runs a Java main class of this class path inside a namespace. */
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
    String list = NetnsPair.run(ip, "netns", "list").output();
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
        NetnsPair.Result result = NetnsPair.run(ip, "netns", "del", ns);
        if (result.code() != 0 && !result.output().contains("No such file")) {
          System.out.println("[netns] deleting " + ns + " failed: " + result.output().strip());
        }
      } catch (IOException | InterruptedException failure) {
        System.out.println("[netns] deleting " + ns + " failed: " + failure);
      }
    }
  }

  private void must(String... command) throws IOException, InterruptedException {
    NetnsPair.Result result = NetnsPair.run(command);
    if (result.code() != 0) {
      throw new IllegalStateException(
          String.join(" ", command) + " exited " + result.code() + ": " + result.output().strip());
    }
  }

  private static void skipUnless(boolean condition, String reason) {
    if (!condition) {
      System.out.println("RailHealthTcpTest skipped: " + reason);
    }
    assumeTrue(condition, reason);
  }
}
