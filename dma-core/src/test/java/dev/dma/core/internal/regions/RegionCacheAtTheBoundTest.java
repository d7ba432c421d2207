package dev.dma.core.internal.regions;

import static dev.dma.core.internal.regions.Contexts.NEVER_ASKED;
import static dev.dma.core.internal.regions.Contexts.NO_SPAN;
import static dev.dma.core.internal.regions.Contexts.span;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dma.api.DmaException;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The registration cache at its pinned-bytes bound: the idle list (its order and byte total, kept
 * as leases come and go), the ordered map's layout at 100,000 entries, and what a lease answers
 * when the operations' own leases fill the bound.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class RegionCacheAtTheBoundTest {
  private static final long SPAN = 64 * 1024;
  private static final long BASE = 0x7f00_0000_0000L;

  private final RecordingEndpoint endpoint = new RecordingEndpoint();
  private final RegionRegistry registry = new RegionRegistry();

  private static long spanBase(int index) {
    return BASE + index * 2 * SPAN;
  }

  private static Registration leaseSpan(LocalRegions regions, int index) {
    return regions.lease(spanBase(index), 4096, span(spanBase(index), spanBase(index) + SPAN));
  }

  /**
   * The idle list holds exactly the tracked evictable entries nothing but the registry leases, and
   * its byte total is their sum: never negative, never above what is pinned.
   */
  static void assertIdleAccounting(RegionRegistry registry, LocalRegions regions) {
    long idle = registry.idleBytes(regions);
    long sum = 0;
    for (Registration entry : registry.idleEntries(regions)) {
      assertEquals(1, entry.leases(), "an idle entry is leased: " + entry);
      assertTrue(entry.evictable(), "a pinned region on the idle list: " + entry);
      sum += entry.lengthBytes();
    }
    assertEquals(sum, idle, "the idle byte total drifted from the idle list");
    assertTrue(idle >= 0, "idle bytes negative: " + idle);
    assertTrue(
        idle <= regions.pinnedBytes(), "idle " + idle + " > pinned " + regions.pinnedBytes());
  }

  @Test
  void eachSpanGoesIdleWhenItsLastOperationReleasesItAndIsEvictedInThatOrder() {
    LocalRegions regions = LocalRegions.withExactBound(endpoint, registry, 3 * SPAN);
    Registration a = leaseSpan(regions, 0);
    Registration b = leaseSpan(regions, 1);
    Registration c = leaseSpan(regions, 2);
    assertEquals(0, registry.idleBytes(regions), "all three are leased");
    Registration secondOnB = regions.lease(spanBase(1) + 8192, 4096, NEVER_ASKED);
    assertSame(b, secondOnB);

    c.release();
    a.release();
    b.release(); // b still leased by secondOnB: not idle
    assertEquals(List.of(c, a), registry.idleEntries(regions));
    assertEquals(2 * SPAN, registry.idleBytes(regions));
    secondOnB.release();
    assertEquals(List.of(c, a, b), registry.idleEntries(regions));

    // A hit takes an idle entry off the list; its release puts it back as the most recent.
    regions.lease(spanBase(2) + 4096, 4096, NEVER_ASKED).release();
    assertEquals(List.of(a, b, c), registry.idleEntries(regions));
    assertIdleAccounting(registry, regions);

    Registration d = leaseSpan(regions, 3); // evicts a, released longest ago
    assertFalse(endpoint.isLive(a.handle()));
    assertTrue(endpoint.isLive(b.handle()));
    assertEquals(List.of(b, c), registry.idleEntries(regions));
    Registration e = regions.lease(spanBase(4), 4096, span(spanBase(4), spanBase(4) + 2 * SPAN));
    assertFalse(endpoint.isLive(b.handle()), "two spans' room: b, then c, in release order");
    assertFalse(endpoint.isLive(c.handle()));
    assertEquals(3, regions.evictions());
    assertEquals(List.of(), registry.idleEntries(regions));
    assertEquals(3 * SPAN, regions.pinnedBytes());
    assertIdleAccounting(registry, regions);
    d.release();
    e.release();
    regions.close();
    assertEquals(0, regions.pinnedBytes());
    assertEquals(List.of(), endpoint.faults());
  }

  @Test
  void invalidatingClearingAndReplacingTakeEntriesOffTheIdleList() {
    LocalRegions regions = LocalRegions.withExactBound(endpoint, registry, Long.MAX_VALUE);
    for (int i = 0; i < 4; i++) {
      leaseSpan(regions, i).release();
    }
    assertEquals(4 * SPAN, registry.idleBytes(regions));
    Registration held = regions.lease(spanBase(3), 4096, NEVER_ASKED);

    registry.invalidate(spanBase(0), spanBase(1) + 1); // spans 0 and 1
    assertEquals(SPAN, registry.idleBytes(regions), "span 2 alone: 3 is leased");
    assertIdleAccounting(registry, regions);

    // A registration at span 2's base replaces the idle entry there.
    Registration wider =
        regions.lease(spanBase(2) + SPAN, 4096, span(spanBase(2), spanBase(2) + SPAN + 8192));
    assertEquals(spanBase(2), wider.base());
    assertEquals(0, registry.idleBytes(regions));
    wider.release();
    assertEquals(SPAN + 8192, registry.idleBytes(regions));

    // Invalidated while leased: released later, it is not tracked, so it never goes idle.
    registry.invalidate(spanBase(3), spanBase(3) + 1);
    held.release();
    assertEquals(SPAN + 8192, registry.idleBytes(regions));
    assertIdleAccounting(registry, regions);

    regions.close();
    assertEquals(0, registry.idleBytes(regions));
    assertEquals(0, endpoint.liveRegistrations());
    assertEquals(List.of(), endpoint.faults());
  }

  @Test
  void aFullBoundAnswersNoRoomYetWithoutRegisteringAskingOrCountingAMiss() {
    LocalRegions regions = LocalRegions.withExactBound(endpoint, registry, 2 * SPAN);
    Registration a = leaseSpan(regions, 0);
    Registration b = regions.lease(spanBase(1), SPAN, NO_SPAN); // one-off, untracked
    long misses = regions.misses();
    int registered = endpoint.registerCalls();

    Registration refused = regions.lease(spanBase(2), 4096, NEVER_ASKED);

    assertSame(regions.noRoomYet(), refused);
    assertEquals(misses, regions.misses());
    assertEquals(registered, endpoint.registerCalls());
    assertEquals(2 * SPAN, regions.pinnedBytes());

    b.release(); // the one-off deregisters: room for the operand
    Registration admitted = regions.lease(spanBase(2), 4096, NO_SPAN);
    assertNotSame(regions.noRoomYet(), admitted);
    assertEquals(2 * SPAN - SPAN + 4096, regions.pinnedBytes());

    // The placeholder survives a stray release: it never deregisters anything.
    regions.noRoomYet().release();
    assertEquals(List.of(), endpoint.faults());
    admitted.release();
    a.release();
    regions.close();
    assertEquals(0, endpoint.liveRegistrations());
  }

  @Test
  void theNoRoomErrorIsRetryableAndNamesTheBoundItsValueAndItsKey() {
    LocalRegions regions = LocalRegions.withExactBound(endpoint, registry, 2 * SPAN);
    Registration a = leaseSpan(regions, 0);
    Registration b = leaseSpan(regions, 1);

    DmaException error =
        regions.noRoomError(4096, "with no transfer in flight left to release one");

    assertEquals(DmaException.Reason.BACKPRESSURE, error.reason());
    assertTrue(error.retryable());
    assertEquals(12, error.fabricErrno());
    assertEquals(
        "registering the 4096-byte operand would pin "
            + (2 * SPAN + 4096)
            + " bytes on this endpoint, above max_pinned_bytes ("
            + 2 * SPAN
            + " bytes; "
            + 2 * SPAN
            + " are held by operations in flight and registered regions, none idle), and it was"
            + " held with no transfer in flight left to release one; retry it, or raise the"
            + " max_pinned_bytes configuration key (DmaConfiguration.Builder.maxPinnedBytes), and"
            + " ulimit -l (RLIMIT_MEMLOCK) when that caps it",
        error.getMessage());
    a.release();
    b.release();
    regions.close();
  }

  @Test
  void theMapStaysCompactAndTheBoundHoldsAtAHundredThousandEntries() {
    int entries = 100_000;
    long length = 4096;
    LocalRegions regions = LocalRegions.withExactBound(endpoint, registry, entries * length);
    // Ascending bases: every insertion splits or appends to the last chunk.
    for (int i = 0; i < entries; i++) {
      long base = BASE + i * 2 * length;
      regions.lease(base, length, span(base, base + length)).release();
    }
    assertEquals(entries, registry.size(regions));
    assertNull(registry.layoutFault(regions));
    int chunks = registry.chunkCount(regions);
    // Ascending insertions split each full chunk in two halves: about 2 n / CHUNK chunks.
    assertTrue(chunks <= 4 * entries / RegionRegistry.DomainMap.CHUNK + 1, chunks + " chunks");
    assertEquals(entries * length, registry.idleBytes(regions));

    // Every miss past the bound now evicts the span released longest ago, the lowest.
    for (int i = 0; i < 1000; i++) {
      long base = BASE + (entries + i) * 2 * length;
      Registration lease = regions.lease(base, length, span(base, base + length));
      assertTrue(regions.pinnedBytes() <= entries * length);
      lease.release();
    }
    assertEquals(1000, regions.evictions());
    assertEquals(entries, registry.size(regions));
    assertNull(registry.covering(regions, BASE + 999 * 2 * length, BASE + 999 * 2 * length + 1));
    long next = BASE + 1000 * 2 * length;
    Registration kept = registry.covering(regions, next, next + 1);
    assertTrue(kept != null, "the 1001st span is still cached");
    kept.release();
    assertNull(registry.layoutFault(regions));
    assertIdleAccounting(registry, regions);

    // An invalidate over a run of them finds each one.
    assertEquals(500, registry.invalidate(BASE + 2000 * 2 * length, BASE + 2500 * 2 * length));
    assertEquals(entries - 500, registry.size(regions));
    assertNull(registry.layoutFault(regions));
    assertIdleAccounting(registry, regions);
    assertEquals(List.of(), endpoint.faults());
    regions.close();
    assertEquals(0, endpoint.liveRegistrations());
  }

  @Test
  void theLayoutHoldsUnderRandomMissesEvictionsAndInvalidates() {
    long length = 4096;
    int slots = 20_000;
    LocalRegions regions = LocalRegions.withExactBound(endpoint, registry, 2000 * length);
    java.util.Random random = new java.util.Random(20261201);
    int maxChunks = 0;
    for (int step = 0; step < 60_000; step++) {
      long base = BASE + random.nextInt(slots) * 2 * length;
      if (random.nextInt(50) == 0) {
        // A run of slots, as a freed buffer pool would invalidate.
        registry.invalidate(base, base + random.nextInt(100) * 2 * length);
      } else {
        Registration lease = regions.lease(base + 64, 64, span(base, base + length));
        assertTrue(lease.base() <= base + 64 && base + 128 <= lease.end());
        lease.release();
      }
      if (step % 500 == 0) {
        String fault = registry.layoutFault(regions);
        assertNull(fault, "step " + step + ": " + fault);
        assertIdleAccounting(registry, regions);
        maxChunks = Math.max(maxChunks, registry.chunkCount(regions));
      }
    }
    assertNull(registry.layoutFault(regions));
    assertTrue(regions.evictions() > 10_000, "the workload must evict: " + regions.evictions());
    assertTrue(maxChunks > 5, "the workload must split chunks: " + maxChunks);
    int entries = registry.size(regions);
    assertTrue(
        registry.chunkCount(regions) <= 4 * entries / RegionRegistry.DomainMap.CHUNK + 1,
        registry.chunkCount(regions) + " chunks for " + entries + " entries");
    regions.close();
    assertEquals(0, endpoint.liveRegistrations());
    assertEquals(List.of(), endpoint.faults());
  }

  @Test
  void thinnedOutChunksMergeSoTheirNumberFollowsTheEntries() {
    long length = 4096;
    int entries = 10_000;
    LocalRegions regions = LocalRegions.withExactBound(endpoint, registry, Long.MAX_VALUE);
    for (int i = 0; i < entries; i++) {
      long base = BASE + i * 2 * length;
      regions.lease(base, length, span(base, base + length)).release();
    }
    int full = registry.chunkCount(regions);
    // Keep one entry in 50: every chunk is thinned to two or three entries.
    for (int i = 0; i < entries; i += 50) {
      long kept = BASE + i * 2 * length;
      assertEquals(49, registry.invalidate(kept + length, kept + 50 * 2 * length));
      String fault = registry.layoutFault(regions);
      assertNull(fault, "after thinning at " + i + ": " + fault);
    }
    assertEquals(entries / 50, registry.size(regions));
    int chunks = registry.chunkCount(regions);
    assertTrue(
        chunks <= 4 * (entries / 50) / RegionRegistry.DomainMap.CHUNK + 1, chunks + " chunks");
    assertTrue(chunks < full, chunks + " chunks, " + full + " before thinning");
    for (int i = 0; i < entries; i += 50) {
      long kept = BASE + i * 2 * length;
      Registration hit = registry.covering(regions, kept, kept + length);
      assertTrue(hit != null && hit.base() == kept, "entry " + i + " lost in a merge");
      hit.release();
    }
    regions.close();
    assertEquals(0, endpoint.liveRegistrations());
  }
}
