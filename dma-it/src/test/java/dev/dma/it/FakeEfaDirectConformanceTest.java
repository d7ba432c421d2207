package dev.dma.it;

import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.dma.api.DmaConfiguration;
import dev.dma.fake.FakeCounters;
import dev.dma.fake.FakeEndpoint;
import dev.dma.fake.FakeFabric;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The conformance suite on the fake configured like efa-direct: every operand needs a covering
 * registration, contexts are scribbled while posted, removing a peer flushes its in-flight
 * operations, and a target refuses initiators it has not inserted. Nothing may break those rules.
 */
class FakeEfaDirectConformanceTest extends ConformanceSuite {
  private static final AtomicInteger FABRICS = new AtomicInteger();
  private FakeFabric fabric;

  @Override
  protected DmaConfiguration configuration() {
    if (fabric == null) {
      fabric = FakeFabric.create("efa-conformance-" + FABRICS.incrementAndGet());
      fabric.script().likeEfaDirect();
    }
    return DmaConfiguration.builder().providers("fake").interfaces(List.of(fabric.name())).build();
  }

  @Override
  protected byte[] deadPeerAddress() {
    FakeEndpoint gone = fabric.openEndpoint();
    byte[] address = gone.localAddress();
    gone.close();
    return address;
  }

  @Override
  protected void afterClose() {
    if (fabric != null) {
      FakeCounters counters = fabric.counters();
      fabric.close();
      assertEquals(0, counters.violations(), counters.lastViolation());
      assertEquals(0, counters.removesWithOpsOutstanding(), "a peer was removed under its transfers");
    }
  }
}
