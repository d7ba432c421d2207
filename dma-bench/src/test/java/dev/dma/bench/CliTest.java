package dev.dma.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The command line, end to end on the fake provider (never tcp: these tests run anywhere). */
class CliTest {
  record Run(int code, String out, String err) {}

  static Run run(String... args) {
    StringWriter out = new StringWriter();
    StringWriter err = new StringWriter();
    int code = Main.execute(args, new PrintWriter(out, true), new PrintWriter(err, true), false);
    return new Run(code, out.toString(), err.toString());
  }

  @Test
  void badOptionsAreRejectedWithOneClearLine() {
    Run r = run("--sizes", "4x");
    assertEquals(Main.USAGE, r.code());
    assertTrue(r.err().contains("--sizes: invalid size \"4x\""), r.err());
    assertTrue(r.err().contains("dma-bench run --help"), r.err());

    r = run("run", "--op", "copy");
    assertEquals(Main.USAGE, r.code());
    assertTrue(r.err().contains("--op must be write, read or both, not \"copy\""), r.err());

    r = run("--window", "0", "--provider", "fake");
    assertEquals(Main.USAGE, r.code());
    assertTrue(r.err().contains("--window must be at least 1"), r.err());

    r = run("--duration", "1s", "--iterations", "10", "--provider", "fake");
    assertEquals(Main.USAGE, r.code());
    assertTrue(r.err().contains("not both"), r.err());

    r = run("--duration", "soon");
    assertEquals(Main.USAGE, r.code());
    assertTrue(r.err().contains("--duration must be a duration"), r.err());

    r = run("--provider", "fake", "--processes", "2");
    assertEquals(Main.USAGE, r.code());
    assertTrue(r.err().contains("--processes 2 needs a real provider"), r.err());

    r = run("--frobnicate");
    assertEquals(Main.USAGE, r.code());
    assertTrue(r.err().contains("Unknown option: '--frobnicate'"), r.err());

    r = run("--chart", "out.gif", "--provider", "fake");
    assertEquals(Main.USAGE, r.code());
    assertTrue(r.err().contains(".svg or .png"), r.err());

    r = run("serve", "--provider", "fake");
    assertEquals(Main.USAGE, r.code());
    assertTrue(r.err().contains("--connect"), r.err());
  }

  @Test
  void unknownProviderFailsNamingTheArtifact() {
    Run r = run("--provider", "nosuch", "--duration", "10ms", "--warmup", "0ms");
    assertEquals(Main.FAILED, r.code());
    assertTrue(r.err().contains("no provider named \"nosuch\""), r.err());
  }

  @Test
  void helpAndVersion() {
    Run r = run("--help");
    assertEquals(0, r.code());
    assertTrue(r.out().contains("run") && r.out().contains("info") && r.out().contains("serve"));
    r = run("run", "--help");
    assertTrue(r.out().contains("--window") && r.out().contains("--processes"), r.out());
    r = run("--version");
    assertTrue(r.out().contains("Java 25") || r.out().contains("Java "), r.out());
  }

  @Test
  void runOnTheFakeProviderPrintsATableWithoutErrors(@TempDir Path dir) throws Exception {
    Path chart = dir.resolve("chart.svg");
    Path csv = dir.resolve("out.csv");
    Run r =
        run(
            "--provider",
            "fake",
            "--sizes",
            "64,4k",
            "--op",
            "both",
            "--window",
            "8",
            "--duration",
            "150ms",
            "--warmup",
            "50ms",
            "--checksum",
            "--clients",
            "2",
            "--chart",
            chart.toString(),
            "--csv",
            csv.toString());
    assertEquals(0, r.code(), r.err());
    String[] lines = r.out().split("\\R");
    assertTrue(lines[0].startsWith("write, provider fake (fake), window 8, 1 process"), r.out());
    int rows = 0;
    for (String line : lines) {
      String trimmed = line.strip();
      if (trimmed.startsWith("64 B") || trimmed.startsWith("4 KiB")) {
        rows++;
        String[] cells = trimmed.split("\\s{2,}");
        assertEquals("0", cells[cells.length - 1], "errors column: " + line);
        long transfers = Long.parseLong(cells[1].replace(",", ""));
        assertTrue(transfers > 0, line);
      }
    }
    assertEquals(4, rows, r.out());
    // Not a terminal: one plain progress line per point on stderr.
    assertTrue(
        r.err().contains("[1/4] write 64 B") && r.err().contains("[4/4] read  4 KiB"), r.err());
    assertTrue(Files.readString(chart).contains("<polyline"));
    assertEquals(5, Files.readAllLines(csv).size());
  }

  @Test
  void countedRunWithJsonOnStdout() {
    Run r =
        run(
            "--provider",
            "fake",
            "--sizes",
            "1k",
            "--op",
            "read",
            "--window",
            "1",
            "--iterations",
            "2000",
            "--warmup",
            "0ms",
            "--json",
            "--no-progress");
    assertEquals(0, r.code(), r.err());
    assertTrue(r.out().startsWith("{\"results\":["), r.out());
    assertTrue(r.out().contains("\"op\":\"read\",\"size_bytes\":1024,\"window\":1"), r.out());
    assertTrue(r.out().contains("\"transfers\":2000,\"errors\":0"), r.out());
    assertEquals("", r.err());
  }

  @Test
  void otelPrintsWhatDmaRecorded() {
    Run r =
        run(
            "--provider",
            "fake",
            "--sizes",
            "1k",
            "--op",
            "write",
            "--window",
            "4",
            "--iterations",
            "3000",
            "--warmup",
            "0ms",
            "--no-progress",
            "--otel");
    assertEquals(0, r.code(), r.err());
    assertTrue(r.out().contains("OpenTelemetry metrics recorded by dma:"), r.out());
    // Warm-up is 0 and the count is exact, so the counter equals the table's transfers.
    assertTrue(
        r.out()
            .matches(
                "(?s).*dma\\.transfers\\s+dma\\.device=fake,dma\\.direction=write,"
                    + "dma\\.outcome=done,dma\\.provider=fake\\s+3000\\n.*"),
        r.out());
    assertTrue(r.out().contains("dma.transfer.duration"), r.out());
  }

  @Test
  void infoListsProvidersAndTheChosenEndpoint() {
    Run r = run("info", "--provider", "fake");
    assertEquals(0, r.code(), r.out() + r.err());
    assertTrue(r.out().contains("libfabric: "), r.out());
    if (dev.dma.libfabric.Libfabric.availability().available()) {
      // The tcp choice follows what fi_getinfo offers: tcp serves RDM from 1.18 on, net before.
      String expected = dev.dma.libfabric.Libfabric.version() >= (1 << 16 | 18) ? "tcp (" : "net (";
      assertTrue(r.out().contains("\ntcp provider: " + expected), r.out());
      assertTrue(r.out().contains(" from /"), "the library's path: " + r.out());
      // Which defence against shm's refused operations is active on the loaded version.
      int version = dev.dma.libfabric.Libfabric.version();
      assertTrue(
          r.out()
              .contains(
                  "\nshm refusals: " + dev.dma.libfabric.Libfabric.shmRefusalDefence(version)),
          r.out());
      assertEquals(
          version >= (2 << 16 | 5),
          r.out().contains("every write is checked before its success is delivered"),
          r.out());
    }
    assertTrue(r.out().contains("providers on the class path"), r.out());
    assertTrue(r.out().matches("(?s).*\\n  fake\\s+priority\\s+-?\\d+\\s+available.*"), r.out());
    assertTrue(r.out().contains("endpoint of fake"), r.out());
    assertTrue(r.out().contains("  provider: "), r.out());
  }
}
