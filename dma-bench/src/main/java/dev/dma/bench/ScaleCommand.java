package dev.dma.bench;

import dev.dma.api.DmaConfiguration;
import java.io.PrintWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.Spec;

/**
 * {@code dma-bench scale}: one server and N clients, for several N, or churn. See {@link
 * ScaleBench}.
 */
@Command(
    name = "scale",
    mixinStandardHelpOptions = true,
    description =
        "One server (a FabricService in this JVM) and N clients, each a passive endpoint of its"
            + " own, held by child processes on one domain each and progressed by one thread per"
            + " process. Per N: addPeer time, first-transfer latency, transfers/s over all N"
            + " against the first 64 measured alternately, p50/p99, server heap and RSS per peer,"
            + " fds. With --churn: clients leave and rejoin under load; failures on live and on"
            + " leaving clients are counted apart, and every transfer is checked for exactly one"
            + " completion and the right bytes (written, then read back).")
public final class ScaleCommand implements Callable<Integer> {
  /** Endpoints per client process when --processes is not given. */
  static final int DEFAULT_PER_PROCESS = 4096;

  @Spec CommandSpec spec;

  @Option(
      names = {"-p", "--provider"},
      paramLabel = "NAME",
      description = "tcp (default), libfabric:tcp;ofi_rxm, libfabric:shm, fake")
  String provider = DmaConfiguration.DEFAULT_PROVIDER;

  @Option(
      names = {"-c", "--clients"},
      paramLabel = "LIST",
      description = "client counts, ascending (default: ${DEFAULT-VALUE}); churn uses the first")
  String clients = "64,256,1024";

  @Option(
      names = {"-s", "--size"},
      paramLabel = "SIZE",
      description = "bytes per transfer (default: ${DEFAULT-VALUE})")
  String size = "4k";

  @Option(
      names = {"-w", "--window"},
      paramLabel = "N",
      description = "transfers in flight (default: ${DEFAULT-VALUE})")
  int window = 64;

  @Option(
      names = {"-o", "--op"},
      paramLabel = "OP",
      description = "write or read (default: ${DEFAULT-VALUE}; churn writes and reads back)")
  String op = "write";

  @Option(
      names = {"-t", "--duration"},
      paramLabel = "TIME",
      description = "measured time of each phase (default: ${DEFAULT-VALUE})")
  String duration = "1s";

  @Option(
      names = "--warmup",
      paramLabel = "TIME",
      description = "unmeasured time before each phase (default: ${DEFAULT-VALUE})")
  String warmup = "200ms";

  @Option(
      names = "--rounds",
      paramLabel = "N",
      description = "alternations of the all-N and the subset phase (default: ${DEFAULT-VALUE})")
  int rounds = 3;

  @Option(
      names = "--subset",
      paramLabel = "N",
      description = "the fixed subset measured against all N (default: ${DEFAULT-VALUE})")
  int subset = 64;

  @Option(
      names = {"-P", "--processes"},
      paramLabel = "N",
      description =
          "client processes (default: one per 4096 clients; 0 keeps them in this JVM, the only"
              + " choice for the fake)")
  Integer processes;

  @Option(
      names = "--first-sample",
      paramLabel = "N",
      description =
          "new clients per N whose first transfer is timed alone (default: ${DEFAULT-VALUE})")
  int firstSample = 16;

  @Option(
      names = "--bind",
      paramLabel = "ADDRESS",
      description = "source address of every endpoint (default: ${DEFAULT-VALUE})")
  String bind = "127.0.0.1";

  @Option(
      names = "--churn",
      paramLabel = "TIME",
      description = "churn for TIME instead of the table: clients leave and rejoin under load")
  String churn;

  @Option(
      names = "--churn-interval",
      paramLabel = "TIME",
      description = "time between departures (default: ${DEFAULT-VALUE})")
  String churnInterval = "50ms";

  @Option(
      names = "--reuse-ids",
      description = "a rejoining client keeps its id (default: a new id)")
  boolean reuseIds;

  @Option(
      names = "--graceful-leave",
      description =
          "a leaving client says goodbye first: the server stops submitting for it, calls"
              + " removePeer and waits for its transfers, then the client closes (default: it"
              + " closes with transfers in flight, as a crash does)")
  boolean gracefulLeave;

  @Option(names = "--seed", paramLabel = "N", description = "the churn's random seed")
  long seed = 1;

  @Option(
      names = "--anchor",
      paramLabel = "PATH",
      description =
          "after dma's phases for each N, run the native server at PATH (built from"
              + " dma-bench/native/scale_anchor.c) through the same phases against the same clients,"
              + " and add its transfers/s and ratio to the table")
  String anchor;

  /** Created by picocli. */
  public ScaleCommand() {}

  @Override
  public Integer call() throws Exception {
    ScaleBench.Options options = options();
    PrintWriter out = spec.commandLine().getOut();
    PrintWriter err = spec.commandLine().getErr();
    ScaleBench.Outcome outcome = ScaleBench.run(options, err);
    ScaleBench.print(options, outcome, out);
    if (outcome.failed()) {
      err.println("dma-bench scale: failures on live clients, or a completion check failed");
      err.flush();
      return Main.FAILED;
    }
    return 0;
  }

  ScaleBench.Options options() {
    List<Integer> counts = new ArrayList<>();
    try {
      for (String part : clients.split(",")) {
        counts.add(Integer.parseInt(part.strip().replace("_", "")));
      }
    } catch (NumberFormatException e) {
      throw usage("--clients wants numbers separated by commas, not \"" + clients + "\"");
    }
    for (int i = 0; i < counts.size(); i++) {
      if (counts.get(i) < 1 || (i > 0 && counts.get(i) <= counts.get(i - 1))) {
        throw usage("--clients must be positive and ascending: " + clients);
      }
    }
    long bytes;
    try {
      bytes = Sizes.parse(size);
    } catch (IllegalArgumentException e) {
      throw usage("--size: " + e.getMessage());
    }
    if (window < 1 || rounds < 1 || subset < 1 || firstSample < 0) {
      throw usage("--window, --rounds and --subset must be at least 1");
    }
    if (!op.equals("write") && !op.equals("read")) {
      throw usage("--op is write or read, not " + op);
    }
    boolean fake = provider.equals("fake");
    int max = counts.getLast();
    int children =
        processes != null
            ? processes
            : fake ? 0 : (max + DEFAULT_PER_PROCESS - 1) / DEFAULT_PER_PROCESS;
    if (fake && children != 0) {
      throw usage("the fake provider's fabric lives in one JVM: its clients need --processes 0");
    }
    if (children < 0) {
      throw usage("--processes must be 0 or more");
    }
    if (anchor != null) {
      if (fake) {
        throw usage("--anchor needs a libfabric provider: the fake's clients live in this JVM");
      }
      if (churn != null) {
        throw usage("--anchor measures the table, not the churn");
      }
      if (!Files.isExecutable(Path.of(anchor))) {
        throw usage(
            "--anchor "
                + anchor
                + " is not an executable file: build it with make -C dma-bench/native");
      }
    }
    Duration churned =
        churn == null ? Duration.ZERO : DmaConfiguration.parseDuration("--churn", churn);
    return new ScaleBench.Options(
        provider,
        fake ? null : bind,
        List.copyOf(counts),
        bytes,
        window,
        op.equals("write"),
        DmaConfiguration.parseDuration("--duration", duration),
        DmaConfiguration.parseDuration("--warmup", warmup),
        rounds,
        subset,
        children,
        firstSample,
        churned,
        DmaConfiguration.parseDuration("--churn-interval", churnInterval),
        reuseIds,
        gracefulLeave,
        seed,
        anchor == null ? null : Path.of(anchor).toAbsolutePath().toString());
  }

  private ParameterException usage(String message) {
    return new ParameterException(spec.commandLine(), message);
  }
}
