package dev.dma.it;

import dev.dma.provider.efa.EfaFabric;
import dev.dma.provider.efa.EfaHardware;
import org.junit.jupiter.api.BeforeAll;

/**
 * The EFA conformance suite on the real {@code efa-direct} provider (see {@link EfaHardwareSuite}).
 */
class EfaDirectHardwareConformanceTest extends EfaHardwareSuite {
  @BeforeAll
  static void hardware() {
    EfaHardware.require(EfaFabric.EFA_DIRECT);
  }

  @Override
  protected EfaFabric fabric() {
    return EfaFabric.EFA_DIRECT;
  }
}
