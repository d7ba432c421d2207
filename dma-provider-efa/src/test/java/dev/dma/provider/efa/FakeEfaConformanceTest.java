package dev.dma.provider.efa;

import dev.dma.fake.FakeFabric;

/**
 * The conformance suite on the fake configured as the efa (RDM) fabric: as efa-direct, but targets
 * must progress for RMA to land (manual progress) and initiators handshake instead of needing the
 * target to insert them first, so the first operation to each peer goes alone ({@link
 * EfaEndpoint}'s handshake gate).
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
