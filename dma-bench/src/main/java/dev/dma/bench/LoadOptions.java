package dev.dma.bench;

import dev.dma.api.DmaConfiguration;
import java.io.IOException;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.Spec;

/**
 * The options {@code run} and {@code serve} share: what to transfer, how hard, and where the
 * results go. A picocli mixin; parsed values are validated by {@link #plan}.
 */
public final class LoadOptions {
  @Spec(Spec.Target.MIXEE)
  CommandSpec spec;

  @Option(
      names = {"-p", "--provider"},
      paramLabel = "NAME",
      description = "dma provider: tcp (default), fake, libfabric:<prov> (libfabric:shm, ...), efa")
  String provider = DmaConfiguration.DEFAULT_PROVIDER;

  @Option(
      names = {"-o", "--op"},
      paramLabel = "OP",
      description = "write, read or both (default: ${DEFAULT-VALUE})")
  String op = "both";

  @Option(
      names = {"-s", "--sizes"},
      paramLabel = "LIST",
      description = "comma-separated sizes with k/m/g suffixes (default: ${DEFAULT-VALUE})")
  String sizes = "64,4k,64k,1m";

  @Option(
      names = {"-w", "--window"},
      paramLabel = "N",
      description = "transfers kept outstanding (default: ${DEFAULT-VALUE})")
  int window = 64;

  @Option(
      names = {"-t", "--duration"},
      paramLabel = "TIME",
      description = "measured time per point: 500ms, 2s (default: 1s)")
  String duration;

  @Option(
      names = {"-n", "--iterations"},
      paramLabel = "N",
      description = "measured transfers per point, instead of --duration")
  Long iterations;

  @Option(
      names = "--target-idle",
      paramLabel = "TIME",
      description =
          "the passive targets' longest sleep when idle (target_idle); 0 spins"
              + " (default: the configuration's, 100ms)")
  String targetIdle;

  @Option(
      names = "--warmup",
      paramLabel = "TIME",
      description = "unmeasured time before each point (default: ${DEFAULT-VALUE})")
  String warmup = "500ms";

  @Option(
      names = {"-c", "--clients"},
      paramLabel = "N",
      description = "passive targets to spread the window over (default: ${DEFAULT-VALUE})")
  int clients = 1;

  @Option(names = "--checksum", description = "ask for CRC-32C of every transfer")
  boolean checksum;

  @Option(
      names = "--json",
      arity = "0..1",
      fallbackValue = "-",
      paramLabel = "FILE",
      description = "write JSON to FILE, or instead of the table when no FILE is given")
  String json;

  @Option(
      names = "--csv",
      arity = "0..1",
      fallbackValue = "-",
      paramLabel = "FILE",
      description = "write CSV (the C anchor's columns first) to FILE, or instead of the table")
  String csv;

  @Option(
      names = "--chart",
      paramLabel = "FILE",
      description = "write a chart of MB/s against size: FILE.svg or FILE.png")
  Path chart;

  @Option(names = "--no-progress", description = "no progress lines on standard error")
  boolean noProgress;

  /** Created by picocli. */
  public LoadOptions() {}

  /** Validates the options into a plan, or throws a {@link ParameterException} saying why. */
  Plan plan(
      Optional<String> bind,
      int processes,
      Optional<String> connect,
      List<Control.TargetAd> pasted) {
    List<String> ops =
        switch (op) {
          case "write" -> List.of("write");
          case "read" -> List.of("read");
          case "both" -> List.of("write", "read");
          default -> throw bad("--op must be write, read or both, not \"" + op + "\"");
        };
    List<Long> sizeList;
    try {
      sizeList = Sizes.parseList(sizes);
    } catch (IllegalArgumentException e) {
      throw bad("--sizes: " + e.getMessage());
    }
    if (window < 1) {
      throw bad("--window must be at least 1, not " + window);
    }
    if (clients < 1) {
      throw bad("--clients must be at least 1, not " + clients);
    }
    if (duration != null && iterations != null) {
      throw bad("give --duration or --iterations, not both");
    }
    if (iterations != null && iterations < 1) {
      throw bad("--iterations must be at least 1, not " + iterations);
    }
    Duration measured = duration("--duration", duration == null ? "1s" : duration);
    if (measured.isZero()) {
      throw bad("--duration must be positive");
    }
    Duration warm = duration("--warmup", warmup);
    if (chart != null) {
      String name = chart.getFileName().toString().toLowerCase(java.util.Locale.ROOT);
      if (!name.endsWith(".svg") && !name.endsWith(".png")) {
        throw bad("--chart must name a .svg or .png file, not \"" + chart + "\"");
      }
    }
    if ("-".equals(json) && "-".equals(csv)) {
      throw bad("--json and --csv cannot both go to standard output; give one a FILE");
    }
    return new Plan(
        provider,
        bind,
        ops,
        sizeList,
        window,
        measured,
        iterations == null ? 0 : iterations,
        warm,
        clients,
        checksum,
        processes,
        connect,
        pasted,
        targetIdle == null
            ? Optional.empty()
            : Optional.of(
                targetIdle.strip().equals("0")
                    ? Duration.ZERO
                    : duration("--target-idle", targetIdle)));
  }

  private Duration duration(String option, String text) {
    try {
      Duration value = DmaConfiguration.parseDuration(option, text);
      if (value.isNegative()) {
        throw bad(option + " must not be negative");
      }
      return value;
    } catch (IllegalArgumentException e) {
      throw bad(e.getMessage());
    }
  }

  private ParameterException bad(String message) {
    return new ParameterException(spec.commandLine(), message);
  }

  /** Prints the results as asked: table (default), CSV, JSON, chart. */
  void report(List<Result> results, PrintWriter out) throws IOException {
    boolean tableToStdout = !"-".equals(json) && !"-".equals(csv);
    if (tableToStdout) {
      out.print(Report.table(results));
    }
    if (csv != null) {
      write(csv, Report.csv(results, true), out);
    }
    if (json != null) {
      write(json, Report.json(results), out);
    }
    if (chart != null) {
      if (chart.getFileName().toString().toLowerCase(java.util.Locale.ROOT).endsWith(".png")) {
        Files.write(chart, PngChart.render(results));
      } else {
        Files.writeString(chart, Report.svg(results), StandardCharsets.UTF_8);
      }
    }
    out.flush();
  }

  private static void write(String target, String text, PrintWriter out) throws IOException {
    if (target.equals("-")) {
      out.print(text);
    } else {
      Files.writeString(Path.of(target), text, StandardCharsets.UTF_8);
    }
  }
}
