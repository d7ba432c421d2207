package dev.dma.it;

import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.dma.api.DmaConfiguration;
import dev.dma.fake.FakeCounters;
import dev.dma.fake.FakeEndpoint;
import dev.dma.fake.FakeFabric;
import dev.dma.provider.efa.EfaFabric;
import dev.dma.provider.efa.FakeEfaProvider;
import dev.dma.spi.FabricProvider;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The EFA conformance suite on the fake behaving like efa-direct, behind the EFA provider's own
 * endpoint rules: local registration required, contexts scribbled while posted, a removed peer's
 * in-flight operations flushed, a target that has not inserted the initiator failing with {@code
 * FI_ENOTCONN}, 32-byte addresses. After each test the fake must have seen no violation and no
 * removal with operations in flight.
 */
class FakeEfaDirectConformanceTest extends EfaConformanceSuite {
  private static final AtomicInteger FABRICS = new AtomicInteger();
  private FakeFabric fake;

  protected void script(FakeFabric fabric) {
    fabric.script().likeEfaDirect();
  }

  @Override
  protected DmaConfiguration configuration() {
    if (fake == null) {
      fake = FakeFabric.create("efa-conformance-" + FABRICS.incrementAndGet());
      script(fake);
    }
    return DmaConfiguration.builder().providers("fake").interfaces(List.of(fake.name())).build();
  }

  @Override
  protected FabricProvider provider() {
    return new FakeEfaProvider(fabric());
  }

  @Override
  protected EfaFabric fabric() {
    return EfaFabric.EFA_DIRECT;
  }

  @Override
  protected byte[] deadPeerAddress() {
    FakeEndpoint gone = fake.openEndpoint();
    byte[] address = gone.localAddress();
    gone.close();
    return address;
  }

  @Override
  protected void afterClose() {
    if (fake != null) {
      FakeCounters counters = fake.counters();
      fake.close();
      assertEquals(0, counters.violations(), counters.lastViolation());
      assertEquals(
          0, counters.removesWithOpsOutstanding(), "a peer was removed under its transfers");
    }
  }
}
