package dev.dma.it;

import dev.dma.api.DmaConfiguration;
import dev.dma.fake.FakeEndpoint;
import dev.dma.fake.FakeFabric;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;

/** The conformance suite on the fake provider: what users' unit tests rely on. */
class FakeConformanceTest extends ConformanceSuite {
  private static final AtomicInteger FABRICS = new AtomicInteger();
  private FakeFabric fabric;

  @Override
  protected DmaConfiguration configuration() {
    if (fabric == null) {
      fabric = FakeFabric.create("conformance-" + FABRICS.incrementAndGet());
    }
    return DmaConfiguration.builder().providers("fake").interfaces(List.of(fabric.name())).build();
  }

  @Override
  protected byte[] deadPeerAddress() {
    // An endpoint that existed and is gone: well-formed, and nothing answers it.
    FakeEndpoint gone = fabric.openEndpoint();
    byte[] address = gone.localAddress();
    gone.close();
    return address;
  }

  @Override
  protected void afterClose() {
    // After the service: closing the fabric first would close the worker's endpoint under it.
    if (fabric != null) {
      fabric.close();
    }
  }
}
