package dev.dma.it;

import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Two network namespaces of this test run, the server's and the target's (named with {@link
 * NetnsHosts}' prefixes, so either subclass removes what a crashed run of the other left), joined
 * by {@code rails} veth pairs: rail {@code i} is its own /30. The target's address is one more, on
 * its loopback ({@link #targetAddress}), reachable over every rail: the server's namespace routes
 * by source address (one policy-routing table per rail), so a socket bound to rail {@code i}'s
 * address reaches the target over rail {@code i}'s veth only, and the target answers over the same
 * veth (the connected route back). That is what makes each device of a group a rail of its own, as
 * on a multi-NIC host. Cutting a rail drops, with nftables, everything arriving over its veth in
 * both namespaces; healing deletes those tables.
 *
 * <p>Ownership and clean-up as for every {@link NetnsHosts}: {@link #close()} kills every adopted
 * child and deletes both namespaces (which removes the veths, routes and rules); a JVM shutdown
 * hook does the same if the test JVM dies first.
 */
final class NetnsRails extends NetnsHosts {
  private static final AtomicInteger NUMBERS = new AtomicInteger();

  final List<String> serverLinks = new ArrayList<>();
  final List<String> targetLinks = new ArrayList<>();
  final List<String> serverAddresses = new ArrayList<>();
  final List<String> targetRailAddresses = new ArrayList<>();
  final String targetAddress;

  private NetnsRails(Tools tools, long pid, int number, int rails) {
    super(tools, SERVER_PREFIX + pid + "-r" + number, TARGET_PREFIX + pid + "-r" + number, "rails");
    int third = (int) ((pid + number) % 200) + 1;
    for (int i = 0; i < rails; i++) {
      serverLinks.add("drs" + (pid % 1_000_000) + "n" + number + "r" + i);
      targetLinks.add("drt" + (pid % 1_000_000) + "n" + number + "r" + i);
      serverAddresses.add("10." + (241 + i) + "." + third + ".1");
      targetRailAddresses.add("10." + (241 + i) + "." + third + ".2");
    }
    this.targetAddress = "10.240." + third + ".1";
  }

  /**
   * Creates the namespaces and rails, or aborts the test (a skip, with the reason printed) when
   * this host cannot: not root, no {@code ip} or {@code nft}, or {@code ip netns add} refused.
   */
  static NetnsRails create(int rails) throws IOException, InterruptedException {
    long pid = ProcessHandle.current().pid();
    return create(
        "RailHealthTcpTest", tools -> new NetnsRails(tools, pid, NUMBERS.incrementAndGet(), rails));
  }

  @Override
  void build() throws IOException, InterruptedException {
    int rails = serverLinks.size();
    String s = serverNs;
    String t = targetNs;
    must(ip, "netns", "add", t);
    must(ip, "-n", s, "link", "set", "lo", "up");
    must(ip, "-n", t, "link", "set", "lo", "up");
    must(ip, "-n", t, "addr", "add", targetAddress + "/32", "dev", "lo");
    for (int i = 0; i < rails; i++) {
      String sl = serverLinks.get(i);
      String tl = targetLinks.get(i);
      String sa = serverAddresses.get(i);
      String table = "" + (100 + i);
      must(
          ip, "link", "add", "name", sl, "netns", s, "type", "veth", "peer", "name", tl, "netns",
          t);
      must(ip, "-n", s, "addr", "add", sa + "/30", "dev", sl);
      must(ip, "-n", t, "addr", "add", targetRailAddresses.get(i) + "/30", "dev", tl);
      must(ip, "-n", s, "link", "set", sl, "up");
      must(ip, "-n", t, "link", "set", tl, "up");
      must(
          ip,
          "-n",
          s,
          "route",
          "add",
          targetAddress + "/32",
          "via",
          targetRailAddresses.get(i),
          "dev",
          sl,
          "table",
          table);
      must(ip, "-n", s, "rule", "add", "from", sa, "lookup", table);
    }
    System.out.printf(
        "[netns] %s %s <-%d veth rails-> %s (target %s)%n",
        s, serverAddresses, rails, t, targetAddress);
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
    return run(ip, "netns", "exec", ns, nft, "list", "ruleset").output();
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
}
