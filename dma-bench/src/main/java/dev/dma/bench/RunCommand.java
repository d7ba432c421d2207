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

  boolean terminal;

  /** Created by picocli. */
  public RunCommand() {}

  @Override
  public Integer call() throws Exception {
    if (processes != 1 && processes != 2) {
      throw new ParameterException(spec.commandLine(), "--processes must be 1 or 2, not " + processes);
    }
    if (processes == 2 && load.provider.equals("fake")) {
      throw new ParameterException(
          spec.commandLine(),
          "the fake provider's fabric lives inside one JVM; --processes 2 needs a real provider"
              + " such as tcp");
    }
    Plan plan = load.plan(Optional.of(bind), processes, Optional.empty(), List.of());
    if (!otel) {
      return execute(plan, load, spec.commandLine().getOut(), spec.commandLine().getErr(), terminal);
    }
    try (OtelReport report = OtelReport.install()) {
      int status =
          execute(
              plan,
              load,
              spec.commandLine().getOut(),
              spec.commandLine().getErr(),
              terminal,
              report.openTelemetry());
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
    Progress progress = new Progress(err, terminal, !load.noProgress);
    List<Result> results = Bench.run(plan, progress, openTelemetry);
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
