package dev.dma.core.internal.regions;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

/** The lease + release hit path runs on every post: it must allocate nothing. */
class HitPathAllocationTest {
  private static final long BASE = 0x7f00_0000_0000L;

  /** Keeps the probe's arrays reachable, so escape analysis cannot remove them. */
  private static final Object[] ESCAPE = new Object[1];

  @Test
  void theCounterSeesAllocations() {
    long allocated = Allocations.measure(10_000, () -> ESCAPE[0] = new byte[64]);
    assertTrue(allocated >= 10_000L * 64, "measured only " + allocated + " bytes");
  }

  @Test
  void aCacheHitAllocatesNothing() {
    RecordingEndpoint endpoint = new RecordingEndpoint();
    RegionRegistry registry = new RegionRegistry();
    LocalRegions regions = LocalRegions.withExactBound(endpoint, registry, 1L << 30);
    // Several domains and entries, so the lookups are not trivially the first slot.
    LocalRegions other = LocalRegions.withExactBound(new RecordingEndpoint(), registry, 1L << 30);
    for (int i = 0; i < 32; i++) {
      regions.pin(BASE + i * 0x10_0000L, 0x10_0000L);
      other.pin(BASE + i * 0x10_0000L, 0x10_0000L);
    }
    int iterations = 200_000;
    long[] addresses = new long[64];
    for (int i = 0; i < addresses.length; i++) {
      addresses[i] = BASE + (i % 32) * 0x10_0000L + (i * 4096L) % 0x8_0000L;
    }
    int[] next = {0};
    long allocated =
        Allocations.measure(
            iterations,
            () -> {
              long address = addresses[next[0]++ & 63];
              Registration lease = regions.lease(address, 4096, Contexts.NEVER_ASKED);
              lease.release();
            });
    assertEquals(2L * iterations, regions.hits());
    assertEquals(0, regions.misses());
    // A handful of bytes of slack for a stray safepoint or JIT bookkeeping, far below one object
    // per thousand hits.
    assertTrue(allocated < 1024, "the hit path allocated " + allocated + " bytes");
    regions.close();
    other.close();
  }
}
