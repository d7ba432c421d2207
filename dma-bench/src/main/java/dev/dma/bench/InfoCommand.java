package dev.dma.bench;

import dev.dma.api.Advertisement;
import dev.dma.api.DmaConfiguration;
import dev.dma.core.FabricProviders;
import dev.dma.libfabric.Libfabric;
import dev.dma.provider.tcp.TcpProvider;
import dev.dma.spi.Availability;
import dev.dma.spi.FabricEndpoint;
import dev.dma.spi.FabricProvider;
import java.io.PrintWriter;
import java.util.List;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

/**
 * {@code dma-bench info}: what a user checks first on a new host, in the spirit of {@code fi_info}:
 * the JDK, libfabric's version and providers, every dma provider on the class path with its
 * availability (or why not), and for the chosen provider its domains and what an endpoint turns out
 * to be.
 */
@Command(
    name = "info",
    mixinStandardHelpOptions = true,
    description = {
      "Lists the providers on the class path (available, or why not), libfabric's version,",
      "and the domains and endpoint of the chosen provider."
    })
public final class InfoCommand implements Callable<Integer> {
  @Spec CommandSpec spec;

  @Option(
      names = {"-p", "--provider"},
      paramLabel = "NAME",
      description = "provider whose domains and endpoint to show (default: ${DEFAULT-VALUE})")
  String provider = DmaConfiguration.DEFAULT_PROVIDER;

  @Option(
      names = "--bind",
      paramLabel = "ADDRESS",
      description = "source address for the endpoint (default: ${DEFAULT-VALUE})")
  String bind = "127.0.0.1";

  /** Created by picocli. */
  public InfoCommand() {}

  @Override
  public Integer call() {
    PrintWriter out = spec.commandLine().getOut();
    out.printf(
        "java: %s (%s), %s %s, %d CPUs%n",
        Runtime.version(),
        System.getProperty("java.vendor"),
        System.getProperty("os.name"),
        System.getProperty("os.arch"),
        Runtime.getRuntime().availableProcessors());
    out.println("libfabric: " + libfabric());
    out.println("tcp provider: " + tcpChoice());
    if (Libfabric.availability().available()) {
      out.println("shm refusals: " + Libfabric.shmRefusalDefence(Libfabric.version()));
    }
    out.println("providers on the class path (highest priority first):");
    List<FabricProvider> installed = FabricProviders.installed();
    int width = 4;
    for (FabricProvider p : installed) {
      width = Math.max(width, p.name().length());
    }
    for (FabricProvider p : installed) {
      Availability availability = safeAvailability(p);
      out.printf(
          "  %-" + width + "s  priority %11d  %s%n",
          p.name(),
          p.priority(),
          availability.available() ? "available" : "unavailable: " + availability.reason());
    }
    out.flush();
    DmaConfiguration configuration = Bench.configuration(provider, bind, 64);
    FabricProvider chosen;
    try {
      chosen = FabricProviders.select(configuration);
    } catch (RuntimeException e) {
      out.println("provider " + provider + ": " + e.getMessage());
      out.flush();
      return Main.FAILED;
    }
    try {
      out.println(
          "domains of "
              + provider
              + ": "
              + String.join(", ", chosen.discoverDomains(configuration)));
    } catch (RuntimeException e) {
      out.println("domains of " + provider + ": " + e.getMessage());
    }
    out.println(
        "endpoint of "
            + provider
            + (configuration.bind() != null ? " (bind " + configuration.bind() + ")" : "")
            + ":");
    try (FabricEndpoint endpoint = chosen.open(configuration)) {
      for (String line : endpoint.describe().lines()) {
        out.println("  " + line);
      }
      out.println("  address: " + Advertisement.encodeHex(endpoint.localAddress()));
      out.println(
          "  max_tx: " + endpoint.maxTx() + (endpoint.maxTx() == 0 ? " (no fixed depth)" : ""));
      if (endpoint instanceof dev.dma.libfabric.LibfabricEndpoint libfabric) {
        java.util.List<String> limits =
            dev.dma.libfabric.ProviderLimits.known(libfabric.providerName());
        for (String limit : limits) {
          out.println("  limit: " + limit);
        }
      }
      out.println(
          "  limit: max_pinned_bytes "
              + (configuration.maxPinnedBytes() == 0
                  ? "default (derived from RLIMIT_MEMLOCK)"
                  : Long.toString(configuration.maxPinnedBytes()))
              + " (registered bytes kept per endpoint; the max_pinned_bytes setting)");
    } catch (RuntimeException e) {
      out.println("  cannot open an endpoint: " + e.getMessage());
      out.flush();
      return Main.FAILED;
    }
    out.flush();
    return 0;
  }

  private static Availability safeAvailability(FabricProvider p) {
    try {
      return p.availability();
    } catch (RuntimeException | LinkageError e) {
      return Availability.unavailable("availability probe failed: " + e);
    }
  }

  /**
   * Which libfabric provider dma's {@code tcp} opens here and why: chosen by whether {@code tcp}
   * serves RDM with RMA in this library, not by its version.
   */
  static String tcpChoice() {
    try {
      if (!Libfabric.availability().available()) {
        return "none (libfabric unavailable)";
      }
      boolean tcpServes = Libfabric.serves(dev.dma.libfabric.EndpointPolicy.of("tcp"));
      return TcpProvider.libfabricProvider()
          + " (libfabric's tcp "
          + (tcpServes ? "serves" : "does not serve")
          + " FI_EP_RDM with FI_RMA here"
          + (tcpServes ? "" : "; on 1.17 and older only tcp;ofi_rxm answers for it")
          + ")";
    } catch (RuntimeException | LinkageError e) {
      return "unknown: " + e;
    }
  }

  /** libfabric's version and its providers, or why it cannot be loaded. */
  static String libfabric() {
    try {
      Availability availability = Libfabric.availability();
      if (!availability.available()) {
        return "unavailable: " + availability.reason();
      }
      String names;
      try {
        names = String.join(", ", Libfabric.providerNames());
      } catch (RuntimeException e) {
        names = "(fi_getinfo failed: " + e.getMessage() + ")";
      }
      String builtIn;
      try {
        builtIn = String.join(", ", Libfabric.builtInProviders());
      } catch (RuntimeException e) {
        builtIn = "(fi_getinfo(FI_PROV_ATTR_ONLY) failed: " + e.getMessage() + ")";
      }
      return Libfabric.versionText(Libfabric.version())
          + " (API "
          + Libfabric.versionText(Libfabric.apiVersion())
          + ") from "
          + Libfabric.libraryPath()
          + "; providers answering: "
          + names
          + "; built in: "
          + builtIn;
    } catch (LinkageError e) {
      return "unavailable: " + e;
    }
  }
}
