package dev.dma.core.internal.regions;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;

import dev.dma.api.MemoryKind;
import dev.dma.api.Operands;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The context's memory kind reaches the endpoint's {@code register}: asked once per miss, never on
 * a hit; memory other than system memory registers where host memory needs no registration.
 */
@Timeout(30)
class RegistrationKindTest {
  private static final long BASE = 0x7f00_0001_0000L;

  private record DeviceKind(String name, boolean cpuReadable, int hmemIface)
      implements MemoryKind {}

  private static final MemoryKind DEVICE = new DeviceKind("TEST_DEVICE", false, 1);

  /** Reports a kind and counts how often it was asked. */
  private static final class Kinded implements Operands {
    final MemoryKind kind;
    final AtomicInteger asked = new AtomicInteger();

    Kinded(MemoryKind kind) {
      this.kind = kind;
    }

    @Override
    public MemoryKind memoryKind() {
      asked.incrementAndGet();
      return kind;
    }
  }

  private final RecordingEndpoint endpoint = new RecordingEndpoint();
  private final RegionRegistry registry = new RegionRegistry();

  @AfterEach
  void noFaults() {
    assertEquals(List.of(), endpoint.faults());
  }

  @Test
  void aMissRegistersWithTheContextsKindAndAHitDoesNotAskIt() {
    try (LocalRegions regions = LocalRegions.withExactBound(endpoint, registry, Long.MAX_VALUE)) {
      Kinded context = new Kinded(DEVICE);
      regions.pin(BASE, 64 * 1024, DEVICE);
      assertSame(DEVICE, endpoint.lastKind());
      assertEquals(1, endpoint.registerCalls());
      Registration hit = regions.lease(BASE + 4096, 4096, context);
      assertEquals(0, context.asked.get(), "a hit does not ask the kind");
      assertSame(DEVICE, hit.kind());
      hit.release();

      Registration miss = regions.lease(BASE + 1024 * 1024, 4096, context);
      assertEquals(1, context.asked.get(), "a miss asks once");
      assertSame(DEVICE, miss.kind());
      assertSame(DEVICE, endpoint.lastKind());
      miss.release();

      regions.lease(BASE + 2048 * 1024, 4096, new Kinded(MemoryKind.HOST)).release();
      assertSame(MemoryKind.HOST, endpoint.lastKind());
    }
  }

  @Test
  void withoutLocalRegistrationOnlyMemoryOtherThanSystemMemoryRegisters() {
    endpoint.requiresLocalRegistration = false;
    try (LocalRegions regions = LocalRegions.withExactBound(endpoint, registry, Long.MAX_VALUE)) {
      assertNull(regions.lease(BASE, 4096, new Kinded(MemoryKind.HOST)));
      regions.pin(BASE, 4096, MemoryKind.HOST);
      assertEquals(0, endpoint.registerCalls());
      Registration device = regions.lease(BASE, 4096, new Kinded(DEVICE));
      assertSame(DEVICE, device.kind());
      assertSame(DEVICE, endpoint.lastKind());
      device.release();
      regions.pin(BASE + 8192, 4096, DEVICE);
      assertEquals(2, endpoint.registerCalls());
    }
  }
}
