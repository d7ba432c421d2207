package dev.dma.bench;

import dev.dma.api.DmaConfiguration;
import dev.dma.core.FabricProviders;
import dev.dma.spi.FabricProvider;
import java.io.IOException;
import java.io.PrintWriter;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.time.Duration;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.Spec;

/**
 * {@code dma-bench target}: the passive half. Exposes buffers on passive targets (which progress
 * their endpoints on their own threads) and hands their advertisements to each {@code dma-bench
 * serve} that connects to its control socket.
 */
@Command(
    name = "target",
    mixinStandardHelpOptions = true,
    description = {
      "The passive half of a two-host run: exposes memory, prints its advertisements and the",
      "`dma-bench serve` command to run on the other host, and serves until interrupted."
    })
public final class TargetCommand implements Callable<Integer> {
  @Spec CommandSpec spec;

  @Option(
      names = {"-p", "--provider"},
      paramLabel = "NAME",
      description = "dma provider (default: ${DEFAULT-VALUE})")
  String provider = "tcp";

  @Option(
      names = "--bind",
      paramLabel = "ADDRESS",
      description = "source address of the endpoint (default: the provider's first interface)")
  String bind;

  @Option(
      names = "--listen",
      paramLabel = "HOST:PORT",
      description = "control socket (default: ${DEFAULT-VALUE}; port 0 picks one)")
  String listen = "0.0.0.0:7470";

  @Option(
      names = {"-c", "--clients"},
      paramLabel = "N",
      description = "passive targets, each with its own endpoint (default: ${DEFAULT-VALUE})")
  int clients = 1;

  @Option(
      names = "--buffer",
      paramLabel = "SIZE",
      description =
          "bytes exposed per target; at least the largest --sizes (default: ${DEFAULT-VALUE})")
  String buffer = "8m";

  @Option(
      names = "--target-idle",
      paramLabel = "TIME",
      description =
          "the targets' longest sleep when idle (target_idle); 0 spins (default: the"
              + " configuration's, 100ms)")
  String targetIdle;

  @Option(names = "--once", description = "exit after the first server is done")
  boolean once;

  @Option(
      names = "--exit-with-parent",
      hidden = true,
      description = "exit when standard input closes (run --processes 2 starts targets this way)")
  boolean exitWithParent;

  /** Created by picocli. */
  public TargetCommand() {}

  @Override
  public Integer call() throws Exception {
    PrintWriter out = spec.commandLine().getOut();
    PrintWriter err = spec.commandLine().getErr();
    long bufferBytes;
    try {
      bufferBytes = Sizes.parse(buffer);
    } catch (IllegalArgumentException e) {
      throw new ParameterException(spec.commandLine(), "--buffer: " + e.getMessage());
    }
    if (clients < 1) {
      throw new ParameterException(spec.commandLine(), "--clients must be at least 1");
    }
    int colon = listen.lastIndexOf(':');
    if (colon <= 0) {
      throw new ParameterException(
          spec.commandLine(), "--listen wants HOST:PORT, not \"" + listen + "\"");
    }
    String host = listen.substring(0, colon);
    int port;
    try {
      port = Integer.parseInt(listen.substring(colon + 1));
    } catch (NumberFormatException e) {
      throw new ParameterException(
          spec.commandLine(), "--listen wants a numeric port: \"" + listen + "\"");
    }
    var configuration = Bench.configuration(provider, bind, 1);
    if (targetIdle != null) {
      configuration =
          configuration.toBuilder()
              .targetIdle(
                  targetIdle.strip().equals("0")
                      ? Duration.ZERO
                      : DmaConfiguration.parseDuration("--target-idle", targetIdle))
              .build();
    }
    FabricProvider chosen = FabricProviders.select(configuration);
    try (LocalTargets targets = new LocalTargets(configuration, chosen, clients, bufferBytes);
        ServerSocket server = new ServerSocket()) {
      if (exitWithParent) {
        ParentWatch.start(() -> shutDown(server, targets));
      }
      server.setReuseAddress(true);
      server.bind(new InetSocketAddress(host, port));
      String shown = host;
      if (server.getInetAddress().isAnyLocalAddress()) {
        shown = InetAddress.getLocalHost().getHostAddress();
      }
      String where = shown + ":" + server.getLocalPort();
      Control.Offer offer = new Control.Offer(provider, targets.fabric(), targets.ads());
      if (exitWithParent) {
        // The parent reads exactly this line.
        out.println("listening " + where);
        out.flush();
      } else {
        out.printf(
            "dma-bench target: provider %s (%s), %d target%s of %s%n",
            provider,
            targets.fabric(),
            clients,
            clients == 1 ? "" : "s",
            Sizes.format(bufferBytes));
        out.println("listening " + where);
        for (Control.TargetAd ad : targets.ads()) {
          out.println("advertisement: " + ad.fields());
        }
        out.println("on the server host run:");
        out.println("  dma-bench serve --provider " + provider + " --connect " + where);
        out.println(
            "or paste the advertisements (no control socket; the target cannot insert the server"
                + " then):");
        StringBuilder paste = new StringBuilder("  dma-bench serve --provider " + provider);
        for (Control.TargetAd ad : targets.ads()) {
          paste.append(" --advertisement \"").append(ad.fields()).append('"');
        }
        out.println(paste);
        out.flush();
      }
      Control.serve(
          server,
          offer,
          targets::insertPeer,
          once,
          message -> {
            if (!exitWithParent) {
              err.println("dma-bench target: " + message);
              err.flush();
            }
          });
    }
    return 0;
  }

  /**
   * Stops serving, then closes the endpoints: an shm endpoint unlinks its {@code
   * /dev/shm/<pid>:...} file only when it is closed, and halting first left it behind (issue 19).
   */
  private static void shutDown(ServerSocket server, LocalTargets targets) {
    try {
      server.close();
    } catch (IOException ignored) {
      // Closing the endpoints matters more.
    }
    targets.close();
  }
}
