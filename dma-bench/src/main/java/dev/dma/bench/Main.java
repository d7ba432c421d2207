package dev.dma.bench;

import java.io.PrintWriter;
import java.nio.charset.Charset;
import java.util.Set;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.IExecutionExceptionHandler;
import picocli.CommandLine.IParameterExceptionHandler;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.ParseResult;

/**
 * The {@code dma-bench} command: {@code run} (the default), {@code info}, {@code serve}, {@code
 * target} and {@code scale}. {@code bin/dma-bench} at the repository root builds and starts it.
 */
@Command(
    name = "dma-bench",
    mixinStandardHelpOptions = true,
    versionProvider = Main.Version.class,
    description = {
      "Loopback and two-host RMA benchmarks for dma, modelled on libfabric's fi_rma_bw and"
          + " fi_info.",
      "Without a command, runs `dma-bench run`."
    },
    subcommands = {
      RunCommand.class,
      InfoCommand.class,
      ServeCommand.class,
      TargetCommand.class,
      ScaleCommand.class,
      ScaleTargetCommand.class,
      CommandLine.HelpCommand.class
    })
public final class Main implements Runnable {
  /** Exit code when some transfers failed or a run could not be set up. */
  public static final int FAILED = 1;

  /** Exit code for options picocli or a command rejected. */
  public static final int USAGE = 2;

  private static final Set<String> TOP_LEVEL =
      Set.of(
          "-h",
          "--help",
          "-V",
          "--version",
          "run",
          "info",
          "serve",
          "target",
          "scale",
          "scale-target",
          "help");

  /** Created by picocli. */
  public Main() {}

  /**
   * Runs the command and exits with its code.
   *
   * @param args the command line
   */
  public static void main(String[] args) {
    Charset charset = Charset.defaultCharset();
    PrintWriter out = new PrintWriter(new java.io.OutputStreamWriter(System.out, charset), true);
    PrintWriter err = new PrintWriter(new java.io.OutputStreamWriter(System.err, charset), true);
    int code = execute(args, out, err, Progress.onTerminal());
    out.flush();
    err.flush();
    System.exit(code);
  }

  /**
   * Runs the command without exiting (tests call this).
   *
   * @param args the command line; without a command it is {@code run}'s
   * @param out standard output
   * @param err standard error
   * @param terminal whether to draw a live progress line
   * @return the exit code: 0, {@link #FAILED} or {@link #USAGE}
   */
  public static int execute(String[] args, PrintWriter out, PrintWriter err, boolean terminal) {
    String[] effective = args;
    if (args.length == 0 || !TOP_LEVEL.contains(args[0])) {
      // `run` is the default: `dma-bench --sizes 1m` means `dma-bench run --sizes 1m`.
      effective = new String[args.length + 1];
      effective[0] = "run";
      System.arraycopy(args, 0, effective, 1, args.length);
    }
    CommandLine line = new CommandLine(new Main());
    line.setOut(out);
    line.setErr(err);
    line.setParameterExceptionHandler(new UsageHandler());
    line.setExecutionExceptionHandler(new FailureHandler());
    line.setCaseInsensitiveEnumValuesAllowed(true);
    Object run = line.getSubcommands().get("run").getCommand();
    if (run instanceof RunCommand command) {
      command.terminal = terminal;
    }
    Object serve = line.getSubcommands().get("serve").getCommand();
    if (serve instanceof ServeCommand command) {
      command.terminal = terminal;
    }
    return line.execute(effective);
  }

  @Override
  public void run() {
    // Never reached: execute() always names a subcommand.
  }

  /** Prints the one-line reason and where to find help, not the whole usage text. */
  private static final class UsageHandler implements IParameterExceptionHandler {
    @Override
    public int handleParseException(ParameterException ex, String[] args) {
      CommandLine cmd = ex.getCommandLine();
      PrintWriter err = cmd.getErr();
      err.println("dma-bench: " + ex.getMessage());
      CommandLine.UnmatchedArgumentException.printSuggestions(ex, err);
      err.println(
          "Try `dma-bench "
              + cmd.getCommandName().replace("dma-bench", "").strip()
              + (cmd.getCommandName().equals("dma-bench") ? "" : " ")
              + "--help` for the options.");
      err.flush();
      return USAGE;
    }
  }

  /** A failure while running: its message, not a stack trace (set DMA_BENCH_DEBUG for one). */
  private static final class FailureHandler implements IExecutionExceptionHandler {
    @Override
    public int handleExecutionException(Exception ex, CommandLine cmd, ParseResult parsed) {
      PrintWriter err = cmd.getErr();
      String message = ex.getMessage() == null ? ex.toString() : ex.getMessage();
      err.println("dma-bench " + cmd.getCommandName() + ": " + message);
      if (System.getenv("DMA_BENCH_DEBUG") != null) {
        ex.printStackTrace(err);
      }
      err.flush();
      return FAILED;
    }
  }

  /** The version: the jar's, and the JDK's. */
  static final class Version implements CommandLine.IVersionProvider {
    @Override
    public String[] getVersion() {
      String version = Main.class.getPackage().getImplementationVersion();
      return new String[] {
        "dma-bench " + (version == null ? "(development build)" : version),
        "Java " + Runtime.version() + " (" + System.getProperty("java.vendor") + ")"
      };
    }
  }
}
