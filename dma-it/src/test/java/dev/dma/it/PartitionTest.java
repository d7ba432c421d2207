package dev.dma.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * A real network partition between a server and its passive client (issue 12, "Nothing waits
 * forever"): two network namespaces joined by a veth, the {@link PartitionServer} in one and the
 * {@link PartitionTarget} in the other, each a child JVM, this JVM orchestrating both and the
 * network. The partition is silent: nftables drops every packet arriving over the veth, in both
 * namespaces, so TCP sees loss and no error.
 *
 * <p>It needs root, {@code ip} and {@code nft} (CI has all three; {@code .ci/run} installs iproute2
 * and nftables when missing); elsewhere it skips, printing why. No address outside the two
 * namespaces it creates is used. Every wait is bounded; the namespaces and children are removed in
 * {@code finally} and by a shutdown hook.
 *
 * <p>The partition scenario: warm-up writes and reads with checksums (and a short benchmark,
 * printed for tuning the bounds); 16 writes racing the partition (each must end once, either way);
 * the partition; 16 writes posted onto the silent link, which must fail within completion_deadline
 * plus a grace, at least one of the client's transfers with DEADLINE (the first past it; the rest
 * then fail PEER_UNREACHABLE); the worker's CPU time while they are stuck; 8 more writes after the
 * deadline passed, which must fail at once; {@code outstanding()} back to 0; healing, {@code
 * addPeer}, and writes and reads whose CRC-32C match the target's; close within its bound. The
 * close scenario: the partition, 16 writes onto it, then {@code close()} at once, which must return
 * within close_timeout plus a grace with exactly one completion per transfer.
 *
 * <p>Checks are collected and reported together (each printed as PASS or FAIL with what was
 * observed), so one run shows everything that does not hold yet; a child that stops answering fails
 * the test at once.
 */
class PartitionTest {
  /**
   * The server's completion_deadline: longer than the stuck window below, so the window measures a
   * worker waiting on stuck transfers and not the reset that ends the wait.
   */
  static final long DEADLINE_MS = 4000;

  /** The server's progress_deadline. */
  static final long PROGRESS_MS = 1000;

  /** The server's close_timeout. */
  static final long CLOSE_MS = 3000;

  /** Slack on top of the completion deadline for an in-flight transfer to fail. */
  static final long GRACE_MS = 1500;

  /** Slack on top of close_timeout for close() to return. */
  static final long CLOSE_GRACE_MS = 1000;

  /** How soon a transfer submitted to a peer known dead must fail. */
  static final long FAST_MS = 1000;

  /** The worker's CPU over the stuck window, at most this share of the window. */
  static final double CPU_LIMIT = 0.05;

  /** The stuck window, measured from the partition. */
  static final long CPU_FROM_MS = 1200;

  static final long CPU_TO_MS = 3200;
  static final int MAX_IN_FLIGHT = 64;
  static final int SLOTS = 64;
  static final long SLOT_BYTES = 64 << 10;
  static final int IN_FLIGHT = 16;
  static final int LATE = 8;
  static final Set<String> DEAD_PEER_REASONS = Set.of("PEER_UNREACHABLE", "DEADLINE");
  static final Duration ANSWER = Duration.ofSeconds(10);

  /**
   * Transfers in flight when the link goes silent fail by the deadline, later ones fail at once,
   * nothing stays outstanding, the worker parks while stuck, and after healing and {@code addPeer}
   * transfers succeed with matching checksums; close stays bounded.
   */
  @ParameterizedTest(name = "{0}")
  @ValueSource(strings = {"tcp", "libfabric:tcp;ofi_rxm"})
  @Timeout(value = 120, unit = TimeUnit.SECONDS)
  void partitionFailsInFlightTransfersAndHeals(String provider) throws Exception {
    Checks checks = new Checks(provider);
    try (NetnsPair pair = NetnsPair.create()) {
      Pair children = startChildren(pair, provider, "heal");
      LineChild server = children.server;
      LineChild target = children.target;
      warmUp(checks, server, target, 8, 100);
      System.out.println(
          "[timing] "
              + provider
              + ": "
              + server.ask("bench 32 " + SLOT_BYTES, Duration.ofSeconds(30)));

      // 16 racing the partition: submitted just before it, so they may complete or be caught.
      Map<String, String> race =
          server.askFields("burst race " + IN_FLIGHT + " " + SLOT_BYTES, ANSWER);
      pair.partition();
      server.ask("mark", ANSWER);
      long markNanos = System.nanoTime();
      // 16 surely in flight: posted onto a link that already drops everything (64 KiB writes
      // drain across the veth in milliseconds, faster than nft applies a rule).
      Map<String, String> burst =
          server.askFields("burst inflight " + IN_FLIGHT + " " + SLOT_BYTES, ANSWER);
      long burstNanos = System.nanoTime();
      checks.check(
          "16 + 16 transfers accepted around the partition",
          race.get("accepted").equals("" + IN_FLIGHT)
              && burst.get("accepted").equals("" + IN_FLIGHT),
          race + " " + burst);
      Map<String, String> stuck = server.askFields("status inflight", ANSWER);
      checks.check(
          "the partition holds: the 16 posted after it have not completed",
          stuck.get("pending").equals("" + IN_FLIGHT),
          summary(stuck));

      sleepUntil(markNanos, CPU_FROM_MS);
      Map<String, String> cpu1 = server.askFields("cpu", ANSWER);
      sleepUntil(markNanos, CPU_TO_MS);
      Map<String, String> cpu2 = server.askFields("cpu", ANSWER);
      double share = cpuShare(cpu1, cpu2);
      checks.check(
          String.format(
              "worker CPU over the stuck window (%d..%d ms after the partition) under %.0f %%",
              CPU_FROM_MS, CPU_TO_MS, CPU_LIMIT * 100),
          share < CPU_LIMIT,
          String.format(
              "%.1f %% of %d ms (worker %s)", share * 100, wallMs(cpu1, cpu2), cpu2.get("state")));

      long left = Math.max(0, DEADLINE_MS + GRACE_MS - millisSince(burstNanos));
      Map<String, String> inflight =
          server.askFields("await inflight " + left, ANSWER.plusMillis(left));
      checks.check(
          "every in-flight transfer failed within completion_deadline + grace ("
              + (DEADLINE_MS + GRACE_MS)
              + " ms)",
          inflight.get("failed").equals("" + IN_FLIGHT)
              && Long.parseLong(inflight.get("maxms")) <= DEADLINE_MS + GRACE_MS,
          summary(inflight));
      Map<String, String> raced = server.askFields("await race 0", ANSWER);
      // The client's first transfer past the deadline fails DEADLINE and marks it; every later one
      // fails PEER_UNREACHABLE. Which is first depends on whether some of the 16 posted just before
      // the partition were stuck too (rxm on 2.6 once left 13 of them so: DEADLINE:13 there,
      // PEER_UNREACHABLE:16 here), so the DEADLINE may be in either group.
      checks.check(
          "in-flight transfers failed with DEADLINE or PEER_UNREACHABLE, and the first of the"
              + " client's to pass the deadline (in flight or racing) with DEADLINE",
          reasonsWithin(inflight, DEAD_PEER_REASONS)
              && (inflight.get("reasons").contains("DEADLINE")
                  || raced.get("reasons").contains("DEADLINE")),
          inflight.get("reasons") + "; racing: " + raced.get("reasons"));
      checks.check(
          "the failure names the deadline and the client id",
          namesDeadlineAndClient(inflight.get("msg")),
          inflight.get("msg"));
      checks.check(
          "the 16 racing the partition each completed (ok, or failed with a dead-peer reason)"
              + " within the bound",
          raced.get("pending").equals("0")
              && Long.parseLong(raced.get("maxms")) <= DEADLINE_MS + GRACE_MS
              && (raced.get("failed").equals("0") || reasonsWithin(raced, DEAD_PEER_REASONS)),
          summary(raced));

      Map<String, String> late = server.askFields("burst late " + LATE + " " + SLOT_BYTES, ANSWER);
      Map<String, String> lateStatus =
          server.askFields("await late " + (FAST_MS + 500), ANSWER.plusMillis(FAST_MS));
      checks.check(
          "transfers submitted during the partition, after the deadline, fail fast (< "
              + FAST_MS
              + " ms)",
          late.get("accepted").equals("" + LATE)
              && lateStatus.get("failed").equals("" + LATE)
              && Long.parseLong(lateStatus.get("maxms")) < FAST_MS,
          summary(lateStatus));
      checks.check(
          "they fail with PEER_UNREACHABLE or DEADLINE",
          lateStatus.get("failed").equals("" + LATE)
              && reasonsWithin(lateStatus, DEAD_PEER_REASONS),
          lateStatus.get("reasons"));
      Map<String, String> outstanding = server.askFields("outstanding 1000", ANSWER);
      checks.check(
          "outstanding() returns to 0",
          outstanding.get("value").equals("0"),
          outstanding.toString());

      pair.heal();
      long healNanos = System.nanoTime();
      reinsertIfMoved(server, target, children);
      Map<String, String> added = server.askFields("addpeer", ANSWER);
      checks.check("addPeer after healing", added.containsKey("us"), added.toString());
      Map<String, String> healed = verify(checks, server, target, "healed", 8, 200, 10_000);
      System.out.println(
          "[timing] healed transfers completed "
              + millisSince(healNanos)
              + " ms after healing (ok="
              + healed.get("ok")
              + ")");
      Map<String, String> status = server.askFields("status inflight", ANSWER);
      System.out.println("[after heal] in-flight group: " + summary(status));

      Map<String, String> close =
          server.askFields(
              "close " + (CLOSE_MS + CLOSE_GRACE_MS + 2000),
              Duration.ofMillis(CLOSE_MS + CLOSE_GRACE_MS + 2000).plus(ANSWER));
      checkClose(checks, close);
      target.send("quit");
    } finally {
      checks.report();
    }
    checks.assertAllPassed();
  }

  /**
   * Closing the service while transfers are stuck behind a partition returns within its bound, and
   * every transfer still gets exactly one completion.
   */
  @ParameterizedTest(name = "{0}")
  @ValueSource(strings = {"tcp", "libfabric:tcp;ofi_rxm"})
  @Timeout(value = 90, unit = TimeUnit.SECONDS)
  void closeDuringPartitionIsBounded(String provider) throws Exception {
    Checks checks = new Checks(provider + " close");
    try (NetnsPair pair = NetnsPair.create()) {
      Pair children = startChildren(pair, provider, "close");
      LineChild server = children.server;
      warmUp(checks, server, children.target, 4, 300);
      pair.partition();
      server.ask("mark", ANSWER);
      Map<String, String> burst =
          server.askFields("burst inflight " + IN_FLIGHT + " " + SLOT_BYTES, ANSWER);
      checks.check(
          "16 transfers accepted after the partition",
          burst.get("accepted").equals("" + IN_FLIGHT),
          burst.toString());
      // A window for a wrongly completing transfer to show itself: the check below asserts that
      // none did. Nothing waits on it; a longer sleep would only make the check stronger.
      Thread.sleep(300);
      Map<String, String> stuck = server.askFields("status inflight", ANSWER);
      checks.check(
          "the partition holds: they have not completed",
          stuck.get("pending").equals("" + IN_FLIGHT),
          summary(stuck));
      long bound = CLOSE_MS + CLOSE_GRACE_MS;
      Map<String, String> close =
          server.askFields("close " + (bound + 2000), Duration.ofMillis(bound + 2000).plus(ANSWER));
      checkClose(checks, close);
    } finally {
      checks.report();
    }
    checks.assertAllPassed();
  }

  record Pair(LineChild server, LineChild target, String[] serverAddress) {}

  private static Pair startChildren(NetnsPair pair, String provider, String scenario)
      throws Exception {
    String tag = provider.replaceAll("[^A-Za-z0-9]+", "_") + "-" + scenario;
    LineChild target =
        LineChild.start(
            pair,
            "target-" + tag,
            pair.javaIn(
                pair.targetNs,
                PartitionTarget.class,
                provider,
                pair.targetAddress,
                "" + SLOTS,
                "" + SLOT_BYTES));
    LineChild server =
        LineChild.start(
            pair,
            "server-" + tag,
            pair.javaIn(
                pair.serverNs,
                PartitionServer.class,
                provider,
                pair.serverAddress,
                "" + DEADLINE_MS,
                "" + PROGRESS_MS,
                "" + CLOSE_MS,
                "" + MAX_IN_FLIGHT,
                "" + SLOTS,
                "" + SLOT_BYTES));
    String advertisement = target.expect("advertisement ", Duration.ofSeconds(30));
    String address =
        server.expect("address ", Duration.ofSeconds(30)).substring("address ".length());
    target.ask("insert " + address, ANSWER);
    String answer =
        server.ask("target " + advertisement.substring("advertisement ".length()), ANSWER);
    assertEquals("target ok", answer, "the server adds the target");
    return new Pair(server, target, new String[] {address});
  }

  /** Writes and reads back {@code count} slots, checking the CRCs against the target's own. */
  private static void warmUp(
      Checks checks, LineChild server, LineChild target, int count, long seed) throws Exception {
    Map<String, String> warm = verify(checks, server, target, "warm", count, seed, 10_000);
    System.out.println(
        "[timing] warm-up 64 KiB write "
            + warm.get("writeus")
            + " us, read "
            + warm.get("readus")
            + " us");
    assertEquals("true", warm.get("ok"), "warm-up transfers before any partition: " + warm);
  }

  private static Map<String, String> verify(
      Checks checks,
      LineChild server,
      LineChild target,
      String label,
      int count,
      long seed,
      long timeoutMs)
      throws Exception {
    Map<String, String> result =
        server.askFields(
            "verify " + label + " " + count + " " + seed + " " + timeoutMs,
            ANSWER.plusMillis(timeoutMs));
    boolean ok = result.get("ok").equals("true");
    List<String> mismatches = new ArrayList<>();
    if (ok) {
      String[] written = result.get("written").split(",");
      String[] read = result.get("read").split(",");
      for (int slot = 0; slot < count; slot++) {
        String held = LineChild.fields(target.ask("crc " + slot, ANSWER)).get("value");
        if (!written[slot].equals(held) || !read[slot].equals(held)) {
          mismatches.add(
              "slot "
                  + slot
                  + ": wrote "
                  + written[slot]
                  + ", target holds "
                  + held
                  + ", read back "
                  + read[slot]);
        }
      }
    }
    checks.check(
        label
            + ": "
            + count
            + " writes and reads of 64 KiB succeed with matching CRC-32C (server, target, read"
            + " back)",
        ok && mismatches.isEmpty(),
        ok
            ? (mismatches.isEmpty() ? "all match" : String.join("; ", mismatches))
            : result.get("msg"));
    return result;
  }

  /**
   * On a recovered endpoint the server's address may change; the target then inserts the new one.
   */
  private static void reinsertIfMoved(LineChild server, LineChild target, Pair children)
      throws Exception {
    String now = server.askFields("address", ANSWER).get("hex");
    if (!now.equals(children.serverAddress[0])) {
      System.out.println("[heal] the server's address changed; the target inserts the new one");
      target.ask("insert " + now, ANSWER);
      children.serverAddress[0] = now;
    }
  }

  private static void checkClose(Checks checks, Map<String, String> close) {
    long bound = CLOSE_MS + CLOSE_GRACE_MS;
    checks.check(
        "close() returns within close_timeout + " + CLOSE_GRACE_MS + " ms (" + bound + " ms)",
        close.get("returned").equals("true") && Long.parseLong(close.get("ms")) <= bound,
        close.toString());
    checks.check(
        "every transfer got exactly one completion",
        close.get("missing").equals("0")
            && close.get("duplicates").equals("0")
            && close.get("unknown").equals("0"),
        "submitted="
            + close.get("submitted")
            + " missing="
            + close.get("missing")
            + " duplicates="
            + close.get("duplicates")
            + " unknown="
            + close.get("unknown"));
  }

  private static boolean reasonsWithin(Map<String, String> status, Set<String> allowed) {
    String reasons = status.get("reasons");
    if (reasons.equals("-")) {
      return false;
    }
    for (String entry : reasons.split(",")) {
      if (!allowed.contains(entry.substring(0, entry.indexOf(':')))) {
        return false;
      }
    }
    return true;
  }

  /**
   * Lenient on wording: every message names the client id (1, after "client"), and at least one
   * names the deadline (4s, 4000 ms, PT4S or completion_deadline).
   */
  private static boolean namesDeadlineAndClient(String messages) {
    if (messages == null || messages.isBlank()) {
      return false;
    }
    Pattern client = Pattern.compile("client(?: id)?\\W*1\\b");
    Pattern deadline = Pattern.compile("\\b(4s|4 s|4000 ?ms|PT4S|completion_deadline)\\b");
    boolean namesDeadline = false;
    for (String message : messages.split(" \\| ")) {
      if (!client.matcher(message).find()) {
        return false;
      }
      namesDeadline |= deadline.matcher(message).find();
    }
    return namesDeadline;
  }

  private static double cpuShare(Map<String, String> first, Map<String, String> second) {
    if (!first.containsKey("ns") || !second.containsKey("ns")) {
      return Double.NaN;
    }
    long cpu = Long.parseLong(second.get("ns")) - Long.parseLong(first.get("ns"));
    long wall = Long.parseLong(second.get("wallns")) - Long.parseLong(first.get("wallns"));
    return (double) cpu / wall;
  }

  private static long wallMs(Map<String, String> first, Map<String, String> second) {
    return (Long.parseLong(second.get("wallns")) - Long.parseLong(first.get("wallns"))) / 1_000_000;
  }

  private static String summary(Map<String, String> status) {
    return "n="
        + status.get("n")
        + " ok="
        + status.get("ok")
        + " failed="
        + status.get("failed")
        + " pending="
        + status.get("pending")
        + " latency "
        + status.get("minms")
        + ".."
        + status.get("maxms")
        + " ms, last completion "
        + status.get("maxaftermarkms")
        + " ms after the partition, outstanding="
        + status.get("outstanding")
        + " reasons="
        + status.get("reasons");
  }

  private static void sleepUntil(long startNanos, long afterMs) throws InterruptedException {
    long left = startNanos + TimeUnit.MILLISECONDS.toNanos(afterMs) - System.nanoTime();
    if (left > 0) {
      TimeUnit.NANOSECONDS.sleep(left);
    }
  }

  private static long millisSince(long nanos) {
    return TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - nanos);
  }

  /** Soft checks: each printed as it is made, all failures reported together at the end. */
  static final class Checks {
    private final String name;
    private final List<String> lines = new ArrayList<>();
    private final List<String> failures = new ArrayList<>();

    Checks(String name) {
      this.name = name;
    }

    void check(String what, boolean ok, String observed) {
      String line = (ok ? "PASS " : "FAIL ") + what + ": " + observed;
      System.out.println("[check " + name + "] " + line);
      lines.add(line);
      if (!ok) {
        failures.add(line);
      }
    }

    void report() {
      if (lines.isEmpty()) {
        return;
      }
      System.out.println(
          "[summary "
              + name
              + "] "
              + (lines.size() - failures.size())
              + " of "
              + lines.size()
              + " checks passed");
      for (String line : lines) {
        System.out.println("[summary " + name + "]   " + line);
      }
    }

    void assertAllPassed() {
      assertTrue(
          failures.isEmpty(),
          name + ": " + failures.size() + " check(s) failed:\n  " + String.join("\n  ", failures));
    }
  }
}
