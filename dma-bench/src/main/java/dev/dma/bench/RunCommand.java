package dev.dma.bench;

import java.io.PrintWriter;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.Spec;

/**
 * {@code dma-bench run}: a service and passive targets over loopback, in one process or two, and a
 * table per operation.
 */
@Command(
    name = "run",
    mixinStandardHelpOptions = true,
    description = {
      "Transfers over loopback between a service and passive targets, in one process or two,",
      "and prints MB/s, transfers/s, p50/p99/max latency and errors per operation and size."
    })
public final class RunCommand implements Callable<Integer> {
  @Spec CommandSpec spec;

  @Mixin LoadOptions load;

  @Option(
      names = {"-P", "--processes"},
      paramLabel = "N",
      description = "1: targets in this JVM (default); 2: targets in a child JVM")
  int processes = 1;

  @Option(
      names = "--bind",
      paramLabel = "ADDRESS",
      description = "source address for real providers (default: ${DEFAULT-VALUE})")
  String bind = "127.0.0.1";

  @Option(
      names = "--otel",
      description =
          "install the OpenTelemetry SDK (metrics only) for the run and print what dma recorded")
  boolean otel;

  @Option(
      names = "--devices",
      paramLabel = "N",
      description =
          "initiate on a FabricServiceGroup of N services (N endpoints on --interface) that stripes"
              + " transfers of --stripe-threshold or more over all of them (default: 1, one plain"
              + " service)")
  int devices = 1;

  @Option(
      names = "--interface",
      paramLabel = "NAME",
      description =
          "the domain each of the --devices services opens (default: lo; the fake's fabric fake0"
              + " for the fake)")
  String device;

  @Option(
      names = "--stripe-threshold",
      paramLabel = "SIZE",
      description =
          "with --devices > 1, stripe transfers of at least SIZE (default: ${DEFAULT-VALUE})")
  String stripeThreshold = "1m";

  @Option(
      names = "--virtual-threads",
      paramLabel = "N",
      description =
          "submit through AsyncFabricService from N virtual threads, each blocking on its"
              + " transfer's future, instead of resubmitting from the completer; --window stays"
              + " the cap on posted transfers (default: 0, the pipelined loop)")
  int virtualThreads;

  @Option(
      names = "--endpoint-only",
      description =
          "a diagnostic: drive the provider's endpoint directly from one thread, in the C anchor's"
              + " shape, with no dma core (no service, worker, deadlines, recovery or checks), to"
              + " split a transfer's cost between the endpoint and the core")
  boolean endpointOnly;

  boolean terminal;

  /** Created by picocli. */
  public RunCommand() {}

  @Override
  public Integer call() throws Exception {
    if (processes != 1 && processes != 2) {
      throw new ParameterException(
          spec.commandLine(), "--processes must be 1 or 2, not " + processes);
    }
    if (processes == 2 && load.provider.equals("fake")) {
      throw new ParameterException(
          spec.commandLine(),
          "the fake provider's fabric lives inside one JVM; --processes 2 needs a real provider"
              + " such as tcp");
    }
    if (devices < 1) {
      throw new ParameterException(
          spec.commandLine(), "--devices must be at least 1, not " + devices);
    }
    if (virtualThreads < 0) {
      throw new ParameterException(
          spec.commandLine(), "--virtual-threads must not be negative, not " + virtualThreads);
    }
    if (endpointOnly && (virtualThreads > 0 || devices > 1 || load.checksum)) {
      throw new ParameterException(
          spec.commandLine(),
          "--endpoint-only drives one endpoint from the pipelined loop: it takes no"
              + " --virtual-threads, --devices or --checksum");
    }
    Bench.Driver driver = new Bench.Driver(virtualThreads, endpointOnly);
    long threshold;
    try {
      threshold = Sizes.parse(stripeThreshold);
    } catch (IllegalArgumentException e) {
      throw new ParameterException(spec.commandLine(), "--stripe-threshold: " + e.getMessage());
    }
    Bench.Striping striping =
        new Bench.Striping(
            devices,
            device != null ? device : load.provider.equals("fake") ? "fake0" : "lo",
            threshold);
    Plan plan = load.plan(Optional.of(bind), processes, Optional.empty(), List.of());
    if (!otel) {
      return execute(
          plan,
          load,
          spec.commandLine().getOut(),
          spec.commandLine().getErr(),
          terminal,
          io.opentelemetry.api.OpenTelemetry.noop(),
          striping,
          driver);
    }
    try (OtelReport report = OtelReport.install()) {
      int status =
          execute(
              plan,
              load,
              spec.commandLine().getOut(),
              spec.commandLine().getErr(),
              terminal,
              report.openTelemetry(),
              striping,
              driver);
      report.print(spec.commandLine().getOut());
      return status;
    }
  }

  static int execute(
      Plan plan, LoadOptions load, PrintWriter out, PrintWriter err, boolean terminal)
      throws Exception {
    return execute(plan, load, out, err, terminal, io.opentelemetry.api.OpenTelemetry.noop());
  }

  static int execute(
      Plan plan,
      LoadOptions load,
      PrintWriter out,
      PrintWriter err,
      boolean terminal,
      io.opentelemetry.api.OpenTelemetry openTelemetry)
      throws Exception {
    return execute(plan, load, out, err, terminal, openTelemetry, Bench.Striping.NONE);
  }

  static int execute(
      Plan plan,
      LoadOptions load,
      PrintWriter out,
      PrintWriter err,
      boolean terminal,
      io.opentelemetry.api.OpenTelemetry openTelemetry,
      Bench.Striping striping)
      throws Exception {
    return execute(plan, load, out, err, terminal, openTelemetry, striping, Bench.Driver.PIPELINED);
  }

  static int execute(
      Plan plan,
      LoadOptions load,
      PrintWriter out,
      PrintWriter err,
      boolean terminal,
      io.opentelemetry.api.OpenTelemetry openTelemetry,
      Bench.Striping striping,
      Bench.Driver driver)
      throws Exception {
    Progress progress = new Progress(err, terminal, !load.noProgress);
    List<Result> results = Bench.run(plan, progress, openTelemetry, striping, driver);
    load.report(results, out);
    long errors = 0;
    for (Result r : results) {
      errors += r.errors();
      if (r.firstError().startsWith("stalled")) {
        errors++;
      }
    }
    if (errors > 0) {
      err.println("dma-bench: " + errors + " transfers failed");
      err.flush();
      return Main.FAILED;
    }
    return 0;
  }
}
