package dev.dma.bench;

import dev.dma.api.Advertisement;
import dev.dma.libfabric.Libfabric;
import java.io.IOException;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * {@code dma-bench scale --anchor}: the same phases driven by a native server ({@code
 * dma-bench/native/scale_anchor.c}) against the same client endpoints, after dma's phases for each
 * N, so a dip in dma's all/subset ratio can be told apart from one that libfabric, the kernel or
 * the client processes cause (the C server shows it too).
 *
 * <p>The exchange: the clients' advertisements go to a temporary file, one a line ({@code <address
 * hex> <remote key> <remote address>}, the first three of {@link Advertisement#toFields()}); the
 * binary is run with the libfabric provider the clients use and the benchmark's size, window,
 * phase, warmup, rounds and subset, and prints one line, {@code ANCHOR all <transfers/s> subset
 * <transfers/s> errors <n>}. It must load the libfabric this JVM loaded: when that is not the
 * system's ({@code -Ddma.libfabric.library} or {@code DMA_LIBFABRIC}), the child gets {@code
 * LD_LIBRARY_PATH} set to that file's directory.
 *
 * <p>Threads: the benchmark's controller only; dma's service is idle meanwhile (both servers at
 * once would share the clients' progress thread and measure neither).
 */
final class ScaleAnchor {
  /** What the native server measured, or why it did not. */
  record Result(double allRate, double subsetRate, long errors, String error) {
    double ratio() {
      return subsetRate <= 0 ? 0 : allRate / subsetRate;
    }

    static Result failed(String why) {
      return new Result(0, 0, 0, why);
    }
  }

  private static final Pattern LINE =
      Pattern.compile("^ANCHOR all ([0-9.]+) subset ([0-9.]+) errors (\\d+)$", Pattern.MULTILINE);

  /** Past the phases' own time, what the child may take (set-up, touching every client, close). */
  static final long SLACK_SECONDS = 60;

  private ScaleAnchor() {}

  /**
   * The targets file's text.
   *
   * @param ads the clients, in order
   * @return one line per client
   */
  static String targets(List<Advertisement> ads) {
    StringBuilder text = new StringBuilder();
    for (Advertisement ad : ads) {
      text.append(String.join(" ", ad.toFields().subList(0, Advertisement.FIELD_COUNT)))
          .append('\n');
    }
    return text.toString();
  }

  /**
   * The command line.
   *
   * @param binary the compiled anchor
   * @param fabric the libfabric provider the clients run on ({@code net}, {@code tcp}, ...)
   * @param options the benchmark's options
   * @param targets the targets file
   * @return the command
   */
  static List<String> command(
      String binary, String fabric, ScaleBench.Options options, Path targets) {
    List<String> command = new ArrayList<>();
    command.add(binary);
    command.add("-p");
    command.add(fabric);
    command.add("-f");
    command.add(targets.toString());
    if (options.bind() != null) {
      command.add("-b");
      command.add(options.bind());
    }
    command.add("-s");
    command.add(Long.toString(options.size()));
    command.add("-w");
    command.add(Integer.toString(options.window()));
    command.add("-t");
    command.add(options.phase().toMillis() + "ms");
    command.add("--warmup");
    command.add(options.warmup().toMillis() + "ms");
    command.add("--rounds");
    command.add(Integer.toString(options.rounds()));
    command.add("--subset");
    command.add(Integer.toString(options.subset()));
    return command;
  }

  /**
   * The directory to put first on the child's {@code LD_LIBRARY_PATH}, or null for the system's
   * libfabric.
   *
   * @param property {@code dma.libfabric.library}, or null
   * @param environment {@code DMA_LIBFABRIC}, or null
   * @return the directory of the library this JVM loads, or null
   */
  static String libraryDirectory(String property, String environment) {
    String library =
        property != null && !property.isEmpty()
            ? property
            : environment != null && !environment.isEmpty() ? environment : null;
    if (library == null) {
      return null;
    }
    Path parent = Path.of(library).toAbsolutePath().getParent();
    return parent == null ? null : parent.toString();
  }

  /**
   * How long the child may run: both phases of every round, with their warmups, plus {@link
   * #SLACK_SECONDS}.
   *
   * @param options the benchmark's options
   * @return the bound
   */
  static Duration bound(ScaleBench.Options options) {
    return options
        .phase()
        .plus(options.warmup())
        .multipliedBy(2L * options.rounds())
        .plus(Duration.ofSeconds(SLACK_SECONDS));
  }

  /**
   * Reads the child's result line out of its standard output.
   *
   * @param out everything it printed
   * @return the result, or a failed one naming what was missing
   */
  static Result parse(String out) {
    Matcher m = LINE.matcher(out);
    if (!m.find()) {
      String text = out.strip();
      return Result.failed(
          "no ANCHOR line in its output"
              + (text.isEmpty() ? "" : ": " + text.lines().findFirst().orElse("")));
    }
    return new Result(
        Double.parseDouble(m.group(1)),
        Double.parseDouble(m.group(2)),
        Long.parseLong(m.group(3)),
        "");
  }

  /**
   * Runs the native server against the clients, bounded by {@link #bound}.
   *
   * @param options the benchmark's options ({@code anchor} set)
   * @param fabric the clients' libfabric provider
   * @param ads the clients' advertisements, in order
   * @param err where progress and the child's standard error go
   * @return what it measured, or why it did not
   */
  static Result run(
      ScaleBench.Options options, String fabric, List<Advertisement> ads, PrintWriter err)
      throws InterruptedException {
    return run(options, fabric, ads, err, bound(options));
  }

  /** {@link #run(ScaleBench.Options, String, List, PrintWriter)} with another bound (tests). */
  static Result run(
      ScaleBench.Options options,
      String fabric,
      List<Advertisement> ads,
      PrintWriter err,
      Duration bound)
      throws InterruptedException {
    Path targets = null;
    Path output = null;
    Process process = null;
    try {
      targets = Files.createTempFile("dma-scale-anchor-", ".targets");
      output = Files.createTempFile("dma-scale-anchor-", ".out");
      Files.writeString(targets, targets(ads), StandardCharsets.UTF_8);
      ProcessBuilder builder =
          new ProcessBuilder(command(options.anchor(), fabric, options, targets))
              .redirectOutput(output.toFile())
              .redirectError(ProcessBuilder.Redirect.INHERIT);
      String directory =
          libraryDirectory(
              System.getProperty(Libfabric.LIBRARY_PROPERTY), System.getenv("DMA_LIBFABRIC"));
      if (directory != null) {
        String old = builder.environment().get("LD_LIBRARY_PATH");
        builder
            .environment()
            .put(
                "LD_LIBRARY_PATH",
                old == null || old.isEmpty() ? directory : directory + ":" + old);
      }
      err.printf(
          Locale.ROOT,
          "dma-bench scale: %,d clients: the native anchor (%s)%n",
          ads.size(),
          String.join(" ", builder.command()));
      err.flush();
      process = builder.start();
      if (!process.waitFor(bound.toMillis(), TimeUnit.MILLISECONDS)) {
        return Result.failed(
            String.format(
                Locale.ROOT, "the anchor did not finish within %.1f s", bound.toMillis() / 1e3));
      }
      Result result = parse(Files.readString(output, StandardCharsets.UTF_8));
      int code = process.exitValue();
      if (code > 1) {
        // 2: usage or set-up, 3: a phase stalled; its message went to standard error.
        return Result.failed("the anchor exited with " + code + " (its message is above)");
      }
      return result;
    } catch (IOException e) {
      return Result.failed("the anchor could not run: " + e.getMessage());
    } finally {
      if (process != null && process.isAlive()) {
        process.destroyForcibly();
        process.waitFor(5, TimeUnit.SECONDS);
      }
      deleteQuietly(targets);
      deleteQuietly(output);
    }
  }

  private static void deleteQuietly(Path path) {
    if (path == null) {
      return;
    }
    try {
      Files.deleteIfExists(path);
    } catch (IOException ignored) {
      // a temporary file; nothing else reads it
    }
  }
}
