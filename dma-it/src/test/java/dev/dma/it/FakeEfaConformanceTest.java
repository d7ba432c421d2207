package dev.dma.it;

import dev.dma.fake.FakeFabric;
import dev.dma.provider.efa.EfaFabric;

/**
 * The EFA conformance suite on the fake behaving like the efa (RDM) fabric: targets must progress
 * for RMA to land, and initiators handshake instead of needing the target to insert them first, so
 * the first operation to each peer goes alone (the EFA endpoint's handshake gate).
 */
class FakeEfaConformanceTest extends FakeEfaDirectConformanceTest {
  @Override
  protected void script(FakeFabric fabric) {
    fabric.script().likeEfaDirect().rejectUninsertedInitiator(false).targetProgressRequired(true);
  }

  @Override
  protected EfaFabric fabric() {
    return EfaFabric.EFA;
  }
}
