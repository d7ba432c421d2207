package dev.dma.provider.local;

import com.google.auto.service.AutoService;
import dev.dma.api.DmaConfiguration;
import dev.dma.spi.Availability;
import dev.dma.spi.FabricEndpoint;
import dev.dma.spi.FabricProvider;

/**
 * Provider {@code local}: one-sided RMA between processes of one host, made by the server itself
 * with one {@code MemorySegment.copy} per transfer on its worker thread ({@link LocalEndpoint} has
 * the design). Needs Linux with {@code memfd_create} and Unix sockets and native access; needs no
 * ptrace permission, no libfabric, and works across pid namespaces that share a network namespace
 * (its sockets are abstract, scoped by the network namespace).
 *
 * <p>What a client does differently: memory to expose comes from {@code PassiveTarget.allocate},
 * since only memory the provider made can be shared; exposing any other segment fails at {@code
 * expose} saying so.
 *
 * <p>Stateless and thread-safe; availability is computed once.
 */
@SuppressWarnings("exports") // @AutoService is source-only metadata.
@AutoService(FabricProvider.class)
public final class LocalProvider implements FabricProvider {
  /** The name to configure: {@code providers=local}. */
  public static final String NAME = "local";

  private static final class Probe {
    static final Availability AVAILABILITY = probe();
  }

  /** Creates the provider (called by {@link java.util.ServiceLoader}). */
  public LocalProvider() {}

  @Override
  public String name() {
    return NAME;
  }

  /** Below tcp and EFA: a same-host path is chosen by name, never by default for remote peers. */
  @Override
  public int priority() {
    return 5;
  }

  @Override
  public Availability availability() {
    return Probe.AVAILABILITY;
  }

  private static Availability probe() {
    String os = System.getProperty("os.name", "");
    String arch = System.getProperty("os.arch", "");
    if (!os.equals("Linux") || !(arch.equals("amd64") || arch.equals("x86_64"))) {
      return Availability.unavailable(
          "provider local needs Linux on x86_64 (memfd and Unix sockets), not " + os + " " + arch);
    }
    try {
      // Opening one endpoint proves every step: native access, memfd, socket, bind, listen.
      try (LocalEndpoint endpoint = new LocalEndpoint()) {
        endpoint.allocateExposable(1);
      }
      return Availability.AVAILABLE;
    } catch (IllegalCallerException e) {
      return Availability.unavailable(
          "provider local needs native access: run with --enable-native-access=ALL-UNNAMED"
              + " (or =dev.dma.provider.local on the module path)");
    } catch (RuntimeException | LinkageError e) {
      return Availability.unavailable("provider local cannot open an endpoint here: " + e);
    }
  }

  @Override
  public FabricEndpoint open(DmaConfiguration configuration) {
    return new LocalEndpoint();
  }
}
