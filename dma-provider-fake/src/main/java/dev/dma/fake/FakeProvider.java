package dev.dma.fake;

import com.google.auto.service.AutoService;
import dev.dma.api.DmaConfiguration;
import dev.dma.api.DmaException;
import dev.dma.spi.Availability;
import dev.dma.spi.FabricEndpoint;
import dev.dma.spi.FabricProvider;
import java.util.ArrayList;
import java.util.List;

/**
 * Provider {@code fake}: endpoints on an in-JVM {@link FakeFabric}. Selected by putting {@code
 * dma-provider-fake} on the class path and naming {@code fake} in {@link
 * DmaConfiguration#providers()}; it ranks lowest, so it is never picked over a real provider by
 * priority. Always available. Stateless and thread-safe.
 *
 * <p>{@link #open} opens an endpoint on the fabric named by the first of {@link
 * DmaConfiguration#interfaces()}, which must have been {@linkplain FakeFabric#create created}, or
 * on the {@linkplain FakeFabric#defaultFabric() default fabric} when no interface is named.
 */
// "exports": @AutoService is source-only in effect (it generates META-INF/services), so users of
// this class never need com.google.auto.service, which this module requires only statically.
@SuppressWarnings("exports")
@AutoService(FabricProvider.class)
public final class FakeProvider implements FabricProvider {
  /** The name to configure. */
  public static final String NAME = "fake";

  /** Lowest of all providers: a test fabric must never win by priority. */
  public static final int PRIORITY = Integer.MIN_VALUE;

  /** Creates the provider; {@link java.util.ServiceLoader} calls this. */
  public FakeProvider() {}

  @Override
  public String name() {
    return NAME;
  }

  @Override
  public int priority() {
    return PRIORITY;
  }

  @Override
  public Availability availability() {
    return Availability.AVAILABLE;
  }

  /**
   * Opens an endpoint on the configured fake fabric.
   *
   * @throws DmaException of kind FABRIC, {@code no fabric domain named "x"; open fake fabrics:
   *     [...]}, when the first interface names no open fabric
   */
  @Override
  public FabricEndpoint open(DmaConfiguration configuration) {
    FakeFabric fabric =
        configuration.interfaces().isEmpty()
            ? FakeFabric.defaultFabric()
            : FakeFabric.named(configuration.interfaces().getFirst());
    return fabric.openEndpoint();
  }

  /**
   * The names of the open fake fabrics, in the order they were created, with the default fabric's
   * name first when it is not open (opening without interfaces creates it).
   */
  @Override
  public List<String> discoverDomains(DmaConfiguration configuration) {
    List<String> names = new ArrayList<>(FakeFabric.names());
    if (!names.contains(FakeFabric.DEFAULT_NAME)) {
      names.addFirst(FakeFabric.DEFAULT_NAME);
    }
    return List.copyOf(names);
  }

  @Override
  public String toString() {
    return "FakeProvider";
  }
}
