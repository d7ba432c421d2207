package dev.dma.bench;

import java.util.ArrayList;
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
 * {@code dma-bench serve}: the active half on one host, driving a {@code dma-bench target} on
 * another, found through its control socket ({@code --connect}) or pasted advertisements.
 */
@Command(
    name = "serve",
    mixinStandardHelpOptions = true,
    description = {
      "The server half of a two-host run: connects to `dma-bench target` on another host,",
      "gets its advertisements and transfers to and from it."
    })
public final class ServeCommand implements Callable<Integer> {
  @Spec CommandSpec spec;

  @Mixin LoadOptions load;

  @Option(
      names = "--connect",
      paramLabel = "HOST:PORT",
      description = "the target's control socket, as `dma-bench target` printed it")
  String connect;

  @Option(
      names = "--advertisement",
      paramLabel = "\"HEX KEY ADDR [LEN]\"",
      description = "a target's advertisement pasted instead of --connect (repeatable)")
  List<String> advertisements = new ArrayList<>();

  @Option(
      names = "--bind",
      paramLabel = "ADDRESS",
      description =
          "source address of this host's endpoint (default: the provider's first interface)")
  String bind;

  boolean terminal;

  /** Created by picocli. */
  public ServeCommand() {}

  @Override
  public Integer call() throws Exception {
    if ((connect == null) == advertisements.isEmpty()) {
      throw new ParameterException(
          spec.commandLine(), "give the target's --connect HOST:PORT or its --advertisement");
    }
    List<Control.TargetAd> pasted = new ArrayList<>();
    for (String text : advertisements) {
      try {
        pasted.add(Control.TargetAd.parse(text));
      } catch (IllegalArgumentException e) {
        throw new ParameterException(spec.commandLine(), "--advertisement: " + e.getMessage());
      }
    }
    Plan plan = load.plan(Optional.ofNullable(bind), 2, Optional.ofNullable(connect), pasted);
    return RunCommand.execute(
        plan, load, spec.commandLine().getOut(), spec.commandLine().getErr(), terminal);
  }
}
