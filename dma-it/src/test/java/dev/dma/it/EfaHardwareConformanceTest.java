package dev.dma.it;

import dev.dma.api.DmaConfiguration;
import dev.dma.provider.efa.EfaFabric;
import dev.dma.provider.efa.EfaHardware;
import dev.dma.provider.efa.EfaProvider;
import dev.dma.spi.FabricProvider;
import org.junit.jupiter.api.BeforeAll;

/**
 * The EFA conformance suite on the real {@code efa} provider, on the first EFA device. Runs only
 * with {@code -Ddma.efa=true} on an EFA host; skipped, with the reason printed,
 * everywhere else.
 */
class EfaHardwareConformanceTest extends EfaConformanceSuite {
  @BeforeAll
  static void hardware() {
    EfaHardware.require(EfaFabric.EFA);
  }

  @Override
  protected DmaConfiguration configuration() {
    return DmaConfiguration.builder().providers("efa").build();
  }

  @Override
  protected FabricProvider provider() {
    return new EfaProvider();
  }

  @Override
  protected EfaFabric fabric() {
    return EfaFabric.EFA;
  }

  /**
   * None: EFA accepts an operation to a well-formed address nobody answers and fails it only when
   * the device gives up, which is undocumented and has been seen to take minutes (aws-ofi-nccl
   * issue 663), longer than this suite waits.
   */
  @Override
  protected byte[] deadPeerAddress() {
    return null;
  }

  /** EFA builds an address handle for any GID, so garbage may well be accepted by fi_av_insert. */
  @Override
  protected boolean garbageAddressRefused() {
    return false;
  }
}
