package dev.dma.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.dma.libfabric.Libfabric;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * {@code dma-bench scale} end to end at small N: the table's rows and their numbers, the churn's
 * counters, the limits it reports, and its options. The fake runs anywhere; tcp needs libfabric
 * (and, on a shared machine, the native lock around the test run).
 */
class ScaleCommandTest {
  private static final String[] SHORT = {
    "-t", "150ms", "--warmup", "50ms", "--rounds", "1", "--first-sample", "4"
  };

  private static CliTest.Run scale(String... args) {
    List<String> all = new ArrayList<>(List.of("scale"));
    all.addAll(List.of(args));
    all.addAll(List.of(SHORT));
    return CliTest.run(all.toArray(String[]::new));
  }

  /** The table's rows: clients, all rate, subset rate, per-client min, per-client max, errors. */
  private static List<long[]> rows(String out) {
    Pattern row =
        Pattern.compile(
            "^\\| ([0-9,]+) \\| [^|]+\\| [^|]+\\| ([0-9,]+) \\| ([0-9,]+) \\| [^|]+\\| [^|]+\\|"
                + " (\\d+) / (\\d+) \\|.*\\| (\\d+) \\|$",
            Pattern.MULTILINE);
    List<long[]> rows = new ArrayList<>();
    Matcher m = row.matcher(out);
    while (m.find()) {
      long[] r = new long[6];
      for (int i = 0; i < 6; i++) {
        r[i] = Long.parseLong(m.group(i + 1).replace(",", ""));
      }
      rows.add(r);
    }
    return rows;
  }

  private static void assertTable(CliTest.Run r, long... clients) {
    assertEquals(0, r.code(), r.out() + r.err());
    List<long[]> rows = rows(r.out());
    assertEquals(clients.length, rows.size(), r.out());
    for (int i = 0; i < clients.length; i++) {
      long[] row = rows.get(i);
      assertEquals(clients[i], row[0], r.out());
      assertTrue(row[1] > 0 && row[2] > 0, "both rates measured: " + r.out());
      // Round robin over every client: each got transfers, and none more than a few more than
      // another (window slots pick clients in turn).
      assertTrue(row[3] > 0, "every client got transfers: " + r.out());
      assertTrue(row[4] - row[3] <= 2 * 64, "even spread: " + r.out());
      assertEquals(0, row[5], "no errors: " + r.out());
    }
  }

  @Test
  @Timeout(120)
  void fakeTableHasOneRowPerClientCount() {
    CliTest.Run r = scale("-p", "fake", "-c", "8,64");
    assertTable(r, 8, 64);
    assertTrue(r.out().contains("scale: provider fake (fake), write 4 KiB, window 64"), r.out());
  }

  @Test
  @Timeout(120)
  void fakeChurnCountsEveryCompletionOnceAndNoLiveFailure() {
    CliTest.Run r =
        CliTest.run(
            "scale",
            "-p",
            "fake",
            "-c",
            "16",
            "--churn",
            "1s",
            "--churn-interval",
            "20ms",
            "--reuse-ids");
    assertEquals(0, r.code(), r.out() + r.err());
    Matcher left = Pattern.compile("(\\d+) left and rejoined").matcher(r.out());
    assertTrue(left.find() && Long.parseLong(left.group(1)) > 10, r.out());
    Matcher counts =
        Pattern.compile("transfers: ([0-9,]+) submitted, ([0-9,]+) completions").matcher(r.out());
    assertTrue(counts.find(), r.out());
    assertEquals(counts.group(1), counts.group(2), "one completion per transfer: " + r.out());
    assertTrue(Long.parseLong(counts.group(1).replace(",", "")) > 1000, r.out());
    assertTrue(r.out().contains("0 duplicate, 0 missing, 0 bytes wrong"), r.out());
    assertTrue(r.out().contains("failures on live clients: 0\n"), r.out());
  }

  @Test
  @Timeout(180)
  void tcpTableWithClientsInAChildProcess() {
    assumeTrue(Libfabric.availability().available(), "libfabric is not installed");
    CliTest.Run r = scale("-c", "8,64");
    assertTable(r, 8, 64);
    // The child's cost is reported: its resident megabytes and descriptors (an endpoint on tcp
    // holds at least one).
    Matcher clients =
        Pattern.compile("\\| (\\d+) / (\\d+) \\| 0 \\|$", Pattern.MULTILINE).matcher(r.out());
    assertTrue(clients.find(), r.out());
    assertTrue(clients.find() && Long.parseLong(clients.group(2)) >= 64, r.out());
    // The close with every peer connected is timed, and counts them all.
    Matcher close =
        Pattern.compile("^close: 64 peers in ([\\d,]+) ms \\(", Pattern.MULTILINE).matcher(r.out());
    assertTrue(close.find(), r.out());
  }

  @Test
  @Timeout(180)
  void tcpChurnHasNoFailureOnLiveClients() {
    assumeTrue(Libfabric.availability().available(), "libfabric is not installed");
    CliTest.Run r = CliTest.run("scale", "-c", "8", "--churn", "2s", "--churn-interval", "100ms");
    assertEquals(0, r.code(), r.out() + r.err());
    assertTrue(r.out().contains("0 duplicate, 0 missing, 0 bytes wrong"), r.out());
    assertTrue(r.out().contains("failures on live clients: 0\n"), r.out());
  }

  @Test
  void badClientListsAndTheFakeInAChildAreRefused() {
    CliTest.Run r = CliTest.run("scale", "-p", "fake", "-c", "64,8");
    assertEquals(Main.USAGE, r.code());
    assertTrue(r.err().contains("--clients must be positive and ascending: 64,8"), r.err());
    r = CliTest.run("scale", "-p", "fake", "--processes", "1");
    assertEquals(Main.USAGE, r.code());
    assertTrue(r.err().contains("its clients need --processes 0"), r.err());
    r = CliTest.run("scale", "-c", "ten");
    assertEquals(Main.USAGE, r.code());
    assertTrue(r.err().contains("--clients wants numbers"), r.err());
  }
}
