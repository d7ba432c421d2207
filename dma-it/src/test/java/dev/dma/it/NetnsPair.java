package dev.dma.it;

import java.io.IOException;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Two network namespaces of this test run, {@code dma-pa-<pid>-<n>} (the server's) and {@code
 * dma-pb-<pid>-<n>} (the target's), joined by one veth pair with an address from a /30 at each end
 * and nothing else: no route out, no address outside them. A partition drops, with nftables, every
 * packet arriving over the veth in both namespaces (silent loss, as a dead switch or a pulled cable
 * behind it looks to TCP); healing deletes those tables.
 *
 * <p>Children run inside a namespace with {@code ip netns exec}. As for every {@link NetnsHosts},
 * {@link #close()} kills every child and deletes both namespaces (which removes the veth and the
 * rules); a JVM shutdown hook does the same if the test JVM dies first, and {@link #create} removes
 * what a crashed earlier run (its pid no longer alive) left behind.
 */
final class NetnsPair extends NetnsHosts {
  private static final AtomicInteger NUMBERS = new AtomicInteger();
  private static final String TABLE = "dmapart";

  final String serverLink;
  final String targetLink;
  final String serverAddress;
  final String targetAddress;

  private NetnsPair(Tools tools, long pid, int number) {
    super(
        tools, SERVER_PREFIX + pid + "-" + number, TARGET_PREFIX + pid + "-" + number, "partition");
    this.serverLink = "dpa" + (pid % 10_000_000) + "n" + number;
    this.targetLink = "dpb" + (pid % 10_000_000) + "n" + number;
    int third = (int) ((pid + number) % 250) + 1;
    this.serverAddress = "10.250." + third + ".1";
    this.targetAddress = "10.250." + third + ".2";
  }

  /**
   * Creates the pair, or aborts the test (a skip, with the reason printed) when this host cannot:
   * not root, no {@code ip} or {@code nft}, or {@code ip netns add} refused.
   */
  static NetnsPair create() throws IOException, InterruptedException {
    long pid = ProcessHandle.current().pid();
    return create("PartitionTest", tools -> new NetnsPair(tools, pid, NUMBERS.incrementAndGet()));
  }

  @Override
  void build() throws IOException, InterruptedException {
    must(ip, "netns", "add", targetNs);
    must(
        ip,
        "link",
        "add",
        "name",
        serverLink,
        "netns",
        serverNs,
        "type",
        "veth",
        "peer",
        "name",
        targetLink,
        "netns",
        targetNs);
    must(ip, "-n", serverNs, "addr", "add", serverAddress + "/30", "dev", serverLink);
    must(ip, "-n", targetNs, "addr", "add", targetAddress + "/30", "dev", targetLink);
    for (String[] nsLink : new String[][] {{serverNs, serverLink}, {targetNs, targetLink}}) {
      must(ip, "-n", nsLink[0], "link", "set", "lo", "up");
      must(ip, "-n", nsLink[0], "link", "set", nsLink[1], "up");
    }
    System.out.printf(
        "[netns] %s (%s %s) <-veth-> %s (%s %s)%n",
        serverNs, serverLink, serverAddress, targetNs, targetLink, targetAddress);
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
}
