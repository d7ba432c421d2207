package dev.dma.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.dma.api.Advertisement;
import dev.dma.libfabric.Libfabric;
import java.io.File;
import java.io.IOException;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code dma-bench scale --anchor}: the exchange with the native server (targets file, command
 * line, result line, bounds, library path) in pure Java with stand-in scripts, and, where cc and
 * libfabric's headers are installed, the real binary built from {@code native/scale_anchor.c}
 * against two clients on tcp (needs the native lock on a shared machine).
 */
@Timeout(60) // the default for the tests that run nothing; those that run a child say their own
class ScaleAnchorTest {
  private static final Advertisement FIRST =
      new Advertisement(new byte[] {0x02, 0x00, (byte) 0xab, 0x7f}, 17, 0x7f0000001000L, 4096);
  private static final Advertisement SECOND =
      new Advertisement(new byte[] {0x0a}, -1L, 0, Advertisement.UNKNOWN_LENGTH);

  private static ScaleBench.Options options(String anchor) {
    return new ScaleBench.Options(
        "tcp",
        "127.0.0.1",
        List.of(2, 8),
        4096,
        32,
        true,
        Duration.ofMillis(1500),
        Duration.ofMillis(200),
        3,
        16,
        1,
        4,
        Duration.ZERO,
        Duration.ofMillis(50),
        false,
        false,
        1,
        anchor);
  }

  @Test
  void targetsAreTheFirstThreeAdvertisementFieldsOneALine() {
    assertEquals(
        "0200ab7f 17 139637976731648\n0a 18446744073709551615 0\n",
        ScaleAnchor.targets(List.of(FIRST, SECOND)));
  }

  @Test
  void commandCarriesTheProviderAndEveryPhaseOption() {
    List<String> command =
        ScaleAnchor.command("/bin/anchor", "tcp;ofi_rxm", options("/bin/anchor"), Path.of("/t"));
    assertEquals(
        List.of(
            "/bin/anchor",
            "-p",
            "tcp;ofi_rxm",
            "-f",
            "/t",
            "-b",
            "127.0.0.1",
            "-s",
            "4096",
            "-w",
            "32",
            "-t",
            "1500ms",
            "--warmup",
            "200ms",
            "--rounds",
            "3",
            "--subset",
            "16"),
        command);
  }

  @Test
  void boundIsBothPhasesOfEveryRoundPlusTheSlack() {
    // 3 rounds x 2 phases x (1.5 s + 0.2 s warmup) + 60 s
    assertEquals(Duration.ofMillis(70_200), ScaleAnchor.bound(options("/bin/anchor")));
  }

  @Test
  void libraryDirectoryFollowsThePropertyThenTheEnvironment() {
    assertNull(ScaleAnchor.libraryDirectory(null, null));
    assertNull(ScaleAnchor.libraryDirectory("", ""));
    assertEquals("/opt/lf/lib", ScaleAnchor.libraryDirectory(null, "/opt/lf/lib/libfabric.so.1"));
    assertEquals(
        "/p/lib", ScaleAnchor.libraryDirectory("/p/lib/libfabric.so.1", "/e/lib/libfabric.so.1"));
  }

  @Test
  void parseReadsTheResultLineAmongOthers() {
    ScaleAnchor.Result r =
        ScaleAnchor.parse("noise\nANCHOR all 91049.5 subset 97654.0 errors 2\nmore\n");
    assertEquals(91049.5, r.allRate());
    assertEquals(97654.0, r.subsetRate());
    assertEquals(2, r.errors());
    assertEquals("", r.error());
    assertEquals(91049.5 / 97654.0, r.ratio(), 1e-12);

    ScaleAnchor.Result none = ScaleAnchor.parse("scale_anchor: something\n");
    assertEquals("no ANCHOR line in its output: scale_anchor: something", none.error());
    assertEquals(0, none.ratio());
    assertEquals("no ANCHOR line in its output", ScaleAnchor.parse("").error());
  }

  private static String script(Path dir, String body) throws IOException {
    Path script = dir.resolve("anchor.sh");
    Files.writeString(script, "#!/bin/sh\n" + body + "\n", StandardCharsets.UTF_8);
    Files.setPosixFilePermissions(script, PosixFilePermissions.fromString("rwx------"));
    return script.toString();
  }

  private static ScaleAnchor.Result runScript(String binary, Duration bound)
      throws InterruptedException {
    return ScaleAnchor.run(
        options(binary),
        "net",
        List.of(FIRST, SECOND),
        new PrintWriter(new StringWriter(), true),
        bound);
  }

  @Test
  @Timeout(30)
  void runPassesTheTargetsFileAndReadsTheLine(@TempDir Path dir) throws Exception {
    // The stand-in echoes what it got: the targets file's lines and its own arguments.
    Path seen = dir.resolve("seen");
    String binary =
        script(
            dir,
            "file=\"\"; while [ $# -gt 0 ]; do [ \"$1\" = -f ] && file=\"$2\"; shift; done\n"
                + "cp \"$file\" "
                + seen
                + "\necho 'ANCHOR all 10.0 subset 20.0 errors 0'");
    ScaleAnchor.Result r = runScript(binary, Duration.ofSeconds(20));
    assertEquals("", r.error());
    assertEquals(0.5, r.ratio(), 1e-12);
    assertEquals(ScaleAnchor.targets(List.of(FIRST, SECOND)), Files.readString(seen));
  }

  @Test
  @Timeout(30)
  void aStuckOrFailingAnchorIsReportedNotWaitedFor(@TempDir Path dir) throws Exception {
    long start = System.nanoTime();
    ScaleAnchor.Result stuck = runScript(script(dir, "exec sleep 60"), Duration.ofMillis(500));
    assertEquals("the anchor did not finish within 0.5 s", stuck.error());
    assertTrue(System.nanoTime() - start < TimeUnit.SECONDS.toNanos(15), "bounded");

    ScaleAnchor.Result stalled =
        runScript(script(dir, "echo stalled >&2; exit 3"), Duration.ofSeconds(20));
    assertEquals("the anchor exited with 3 (its message is above)", stalled.error());

    // 1: some writes failed; the line still counts them.
    ScaleAnchor.Result failed =
        runScript(
            script(dir, "echo 'ANCHOR all 5.0 subset 5.0 errors 7'; exit 1"),
            Duration.ofSeconds(20));
    assertEquals("", failed.error());
    assertEquals(7, failed.errors());

    ScaleAnchor.Result missing =
        runScript(dir.resolve("no-such-binary").toString(), Duration.ofSeconds(20));
    assertTrue(missing.error().startsWith("the anchor could not run: "), missing.error());
  }

  @Test
  void anchorOptionIsCheckedUpFront(@TempDir Path dir) throws Exception {
    CliTest.Run r = CliTest.run("scale", "-p", "tcp", "--anchor", dir.resolve("nope").toString());
    assertEquals(Main.USAGE, r.code());
    assertTrue(r.err().contains("is not an executable file"), r.err());

    String binary = script(dir, "exit 0");
    r = CliTest.run("scale", "-p", "fake", "--processes", "0", "--anchor", binary);
    assertEquals(Main.USAGE, r.code());
    assertTrue(r.err().contains("--anchor needs a libfabric provider"), r.err());

    r = CliTest.run("scale", "-p", "tcp", "--churn", "1s", "--anchor", binary);
    assertEquals(Main.USAGE, r.code());
    assertTrue(r.err().contains("--anchor measures the table, not the churn"), r.err());
  }

  @Test
  @Timeout(60)
  void withoutAnchorTheTableHasNoAnchorColumns() {
    CliTest.Run r =
        CliTest.run(
            "scale", "-p", "fake", "-c", "4", "-t", "100ms", "--warmup", "20ms", "--rounds", "1");
    assertEquals(0, r.code(), r.err());
    assertFalse(r.out().contains("anchor"), r.out());
  }

  /** Builds the binary, or skips the test with the reason. */
  private static Path build(Path dir) throws Exception {
    Path source = Path.of("native", "scale_anchor.c").toAbsolutePath();
    assumeTrue(Files.isRegularFile(source), "no " + source);
    assumeTrue(onPath("cc"), "cc is not installed");
    assumeTrue(
        Files.isRegularFile(Path.of("/usr/include/rdma/fabric.h")),
        "libfabric's headers are not installed (libfabric-dev)");
    assumeTrue(Libfabric.availability().available(), "libfabric is not installed");
    Path binary = dir.resolve("scale_anchor");
    Process cc =
        new ProcessBuilder(
                "cc", "-O2", "-Wall", "-o", binary.toString(), source.toString(), "-lfabric")
            .redirectErrorStream(true)
            .start();
    String output = new String(cc.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    assertTrue(cc.waitFor(60, TimeUnit.SECONDS), "cc finished");
    assertEquals(0, cc.exitValue(), output);
    assertEquals("", output.strip(), "no warnings with -Wall");
    return binary;
  }

  private static boolean onPath(String command) {
    for (String dir : System.getenv().getOrDefault("PATH", "").split(File.pathSeparator)) {
      if (Files.isExecutable(Path.of(dir, command))) {
        return true;
      }
    }
    return false;
  }

  @Test
  @Timeout(60)
  void nativeAnchorRejectsABadTargetsFile(@TempDir Path dir) throws Exception {
    Path binary = build(dir);
    Path targets = dir.resolve("targets");
    Files.writeString(targets, "0a0b 1\n");
    Process p =
        new ProcessBuilder(binary.toString(), "-p", "tcp", "-f", targets.toString())
            .redirectErrorStream(true)
            .start();
    String output = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    assertTrue(p.waitFor(30, TimeUnit.SECONDS));
    // Set-up (it may fail first where tcp does not serve RDM) or the file's line 1: exit 2.
    assertEquals(2, p.exitValue(), output);
    assertTrue(
        output.contains("line 1: want <hex> <key> <address>") || output.contains("fi_getinfo"),
        output);
  }

  @Test
  @Timeout(240)
  void nativeAnchorMeasuresTheSameTwoClients(@TempDir Path dir) throws Exception {
    Path binary = build(dir);
    CliTest.Run r =
        CliTest.run(
            "scale",
            "-p",
            "tcp",
            "-c",
            "2",
            "-t",
            "150ms",
            "--warmup",
            "50ms",
            "--rounds",
            "1",
            "--first-sample",
            "1",
            "--anchor",
            binary.toString());
    assertEquals(0, r.code(), r.out() + r.err());
    assertTrue(r.out().contains("| anchor transfers/s all | anchor first 64 | anchor all/64 |"));
    // The row's last three cells: the anchor's two rates (both measured) and their ratio.
    Matcher m =
        Pattern.compile(
                "^\\| 2 \\|.*\\| ([0-9,]+) \\| ([0-9,]+) \\| ([0-9.]+) \\|$", Pattern.MULTILINE)
            .matcher(r.out());
    assertTrue(m.find(), r.out());
    double all = Double.parseDouble(m.group(1).replace(",", ""));
    double subset = Double.parseDouble(m.group(2).replace(",", ""));
    assertTrue(all > 0 && subset > 0, r.out());
    assertEquals(all / subset, Double.parseDouble(m.group(3)), 0.01, r.out());
    assertFalse(r.out().contains("native anchor:"), "no anchor failure: " + r.out());
  }
}
