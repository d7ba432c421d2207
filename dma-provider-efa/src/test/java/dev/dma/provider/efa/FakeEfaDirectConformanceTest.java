package dev.dma.provider.efa;

import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.dma.api.DmaConfiguration;
import dev.dma.fake.FakeCounters;
import dev.dma.fake.FakeEndpoint;
import dev.dma.fake.FakeFabric;
import dev.dma.spi.FabricProvider;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The conformance suite on the fake configured as efa-direct ({@code likeEfaDirect()}): local
 * registration required, contexts scribbled while posted, a removed peer's in-flight operations
 * flushed, a target that has not inserted the initiator failing with {@code FI_ENOTCONN}, 32-byte
 * addresses with recycled QPNs. After each test the fake must have seen no violation: no post
 * without a descriptor, no context touched while posted, no removal with operations in flight.
 */
class FakeEfaDirectConformanceTest extends EfaConformanceSuite {
  private static final AtomicInteger FABRICS = new AtomicInteger();
  protected FakeFabric fake;

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
    FakeCounters counters = fake.counters();
    fake.close();
    assertEquals(0, counters.violations(), counters.lastViolation());
    assertEquals(
        0, counters.removesWithOpsOutstanding(), "a peer was removed with operations in flight");
  }
}
