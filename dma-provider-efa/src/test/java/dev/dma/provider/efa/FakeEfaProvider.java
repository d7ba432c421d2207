package dev.dma.provider.efa;

import dev.dma.api.DmaConfiguration;
import dev.dma.fake.FakeProvider;
import dev.dma.spi.Availability;
import dev.dma.spi.FabricEndpoint;
import dev.dma.spi.FabricProvider;
import java.util.List;

/**
 * The fake provider dressed as EFA: each endpoint is a fake one (on a fabric whose script says
 * {@code likeEfaDirect()}) wrapped in an {@link EfaEndpoint} with one EFA fabric's rules. Not
 * registered with the ServiceLoader; tests hand it to the service builder.
 */
public final class FakeEfaProvider implements FabricProvider {
  private final FakeProvider fake = new FakeProvider();
  private final EfaFabric fabric;

  /**
   * A provider imitating one EFA fabric over the fake.
   *
   * @param fabric whose rules the wrapped endpoints follow
   */
  public FakeEfaProvider(EfaFabric fabric) {
    this.fabric = fabric;
  }

  @Override
  public String name() {
    return "fake-" + fabric.configuredName();
  }

  @Override
  public int priority() {
    return FakeProvider.PRIORITY;
  }

  @Override
  public Availability availability() {
    return Availability.AVAILABLE;
  }

  @Override
  public FabricEndpoint open(DmaConfiguration configuration) {
    return ImitatedEfa.endpoint(fake.open(configuration), fabric);
  }

  @Override
  public List<String> discoverDomains(DmaConfiguration configuration) {
    return fake.discoverDomains(configuration);
  }
}
