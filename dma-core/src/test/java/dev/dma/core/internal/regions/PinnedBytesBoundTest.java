package dev.dma.core.internal.regions;

import static dev.dma.core.internal.regions.Contexts.NEVER_ASKED;
import static dev.dma.core.internal.regions.Contexts.NO_SPAN;
import static dev.dma.core.internal.regions.Contexts.span;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dma.api.DmaException;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The pinned-bytes bound and its least-recently-used eviction of idle cached spans. */
class PinnedBytesBoundTest {
  private static final long SPAN = 64 * 1024;
  private static final long BASE = 0x7f00_0000_0000L;

  private final RecordingEndpoint endpoint = new RecordingEndpoint();
  private final RegionRegistry registry = new RegionRegistry();

  private static long spanBase(int index) {
    return BASE + index * 2 * SPAN;
  }

  /** Leases the start of span {@code index}, caching the whole span. */
  private static Registration leaseSpan(LocalRegions regions, int index) {
    return regions.lease(spanBase(index), 4096, span(spanBase(index), spanBase(index) + SPAN));
  }

  @Test
  void theBoundEvictsTheLeastRecentlyUsedIdleSpan() {
    LocalRegions regions = LocalRegions.withExactBound(endpoint, registry, 3 * SPAN);
    Registration a = leaseSpan(regions, 0);
    Registration b = leaseSpan(regions, 1);
    Registration c = leaseSpan(regions, 2);
    a.release();
    b.release();
    c.release();
    regions.lease(spanBase(0) + 8192, 4096, NEVER_ASKED).release(); // a is now the most recent

    Registration d = leaseSpan(regions, 3);

    assertEquals(1, regions.evictions());
    assertFalse(endpoint.isLive(b.handle()), "b was the least recently used");
    assertTrue(endpoint.isLive(a.handle()));
    assertTrue(endpoint.isLive(c.handle()));
    assertEquals(3 * SPAN, regions.pinnedBytes());
    assertEquals(3 * SPAN, endpoint.liveBytes());
    d.release();
    regions.close();
    assertEquals(0, regions.pinnedBytes());
    assertEquals(List.of(), endpoint.faults());
  }

  @Test
  void evictionNeverTouchesALeasedEntry() {
    LocalRegions regions = LocalRegions.withExactBound(endpoint, registry, 2 * SPAN);
    Registration a = leaseSpan(regions, 0); // held: in flight
    Registration b = leaseSpan(regions, 1);
    b.release();
    Registration c = leaseSpan(regions, 2);
    assertTrue(endpoint.isLive(a.handle()), "leased, so never evicted although least recent");
    assertFalse(endpoint.isLive(b.handle()));

    // Both cached spans are leased: the widened registration cannot fit, nor can the operand,
    // until a lease drops. Nothing is registered and the context is not asked.
    int registered = endpoint.registerCalls();
    assertSame(regions.noRoomYet(), regions.lease(spanBase(3), 4096, NEVER_ASKED));
    assertEquals(registered, endpoint.registerCalls());
    assertTrue(endpoint.isLive(a.handle()));
    assertTrue(endpoint.isLive(c.handle()));

    a.release();
    Registration d = leaseSpan(regions, 3);
    assertFalse(endpoint.isLive(a.handle()), "idle now, so evicted");
    d.release();
    c.release();
    regions.close();
    assertEquals(List.of(), endpoint.faults());
  }

  @Test
  void aWidenedSpanOverTheBoundFallsBackToTheOperand() {
    LocalRegions regions = LocalRegions.withExactBound(endpoint, registry, SPAN + 4096);
    Registration a = leaseSpan(regions, 0);
    Registration b = leaseSpan(regions, 1); // the span cannot fit beside a; the operand can
    assertEquals(spanBase(1), b.base());
    assertEquals(spanBase(1) + 4096, b.end());
    assertEquals(2, b.leases(), "still tracked at its real extent");
    assertEquals(SPAN + 4096, regions.pinnedBytes());
    a.release();
    b.release();
    regions.close();
  }

  @Test
  void aSpanThatCannotFitEvictsNothing() {
    LocalRegions regions = LocalRegions.withExactBound(endpoint, registry, 3 * SPAN);
    Registration held = leaseSpan(regions, 0);
    leaseSpan(regions, 1).release();
    Registration big = regions.lease(spanBase(2), 4096, span(spanBase(2), spanBase(2) + 3 * SPAN));
    // 3 spans would need span 0 gone too, which is leased: evicting span 1 would not help, and the
    // narrow fallback fits beside both.
    assertEquals(0, regions.evictions());
    assertEquals(4096, big.lengthBytes());
    Registration stillCached = registry.covering(regions, spanBase(1), spanBase(1) + 1);
    assertNotNull(stillCached);
    stillCached.release();
    big.release();
    held.release();
    regions.close();
    assertEquals(List.of(), endpoint.faults());
  }

  @Test
  void pinnedRegionsAreNeverEvicted() {
    LocalRegions regions = LocalRegions.withExactBound(endpoint, registry, 2 * SPAN);
    regions.pin(spanBase(0), SPAN);
    leaseSpan(regions, 1).release();
    leaseSpan(regions, 2).release(); // evicts span 1, not the pinned region
    assertEquals(1, regions.evictions());
    Registration pinned = registry.covering(regions, spanBase(0), spanBase(0) + 1);
    assertNotNull(pinned);
    pinned.release();
    DmaException full = assertThrows(DmaException.class, () -> regions.pin(spanBase(3), 2 * SPAN));
    assertTrue(full.getMessage().startsWith("registering " + 2 * SPAN + " bytes would pin"));
    regions.close();
    assertEquals(0, endpoint.liveRegistrations());
  }

  @Test
  void theKernelsEnomemEvictsIdleSpansAndRetries() {
    endpoint.memlockBytes = 2 * SPAN;
    LocalRegions regions = LocalRegions.withExactBound(endpoint, registry, Long.MAX_VALUE);
    leaseSpan(regions, 0).release();
    Registration b = leaseSpan(regions, 1);
    Registration c = leaseSpan(regions, 2); // -FI_ENOMEM: evict idle span 0, retry
    assertEquals(1, regions.evictions());
    assertNull(registry.covering(regions, spanBase(0), spanBase(0) + 1));

    DmaException enomem =
        assertThrows(DmaException.class, () -> regions.lease(spanBase(3), 4096, NO_SPAN));
    assertTrue(
        enomem
            .getMessage()
            .startsWith("fi_mr_reg(operand): Cannot allocate memory (-12): cannot pin 4096"),
        enomem.getMessage());
    assertTrue(enomem.getMessage().contains("raise ulimit -l (RLIMIT_MEMLOCK)"));
    assertTrue(enomem.getMessage().contains("max_pinned_bytes"));
    assertEquals(12, enomem.fabricErrno());
    assertSame(DmaException.class, enomem.getCause().getClass());
    b.release();
    c.release();
    regions.close();
    assertEquals(List.of(), endpoint.faults());
  }

  @Test
  void anOperandLargerThanTheBoundFailsWithoutEvicting() {
    LocalRegions regions = LocalRegions.withExactBound(endpoint, registry, SPAN);
    leaseSpan(regions, 0).release();
    DmaException tooLong =
        assertThrows(DmaException.class, () -> regions.lease(spanBase(1), 2 * SPAN, NO_SPAN));
    // No wait can make it fit: not retryable, and the message says what to raise.
    assertEquals(DmaException.Reason.BAD_REQUEST, tooLong.reason());
    assertFalse(tooLong.retryable());
    assertTrue(
        tooLong.getMessage().contains("above max_pinned_bytes (" + SPAN + " bytes"),
        tooLong.getMessage());
    assertTrue(
        tooLong.getMessage().contains("raise the max_pinned_bytes configuration key"),
        tooLong.getMessage());
    assertEquals(0, regions.evictions());
    assertEquals(1, registry.size(regions));
    regions.close();
  }

  @Test
  void thePinnedBytesBoundHoldsUnderARandomWorkload() {
    long bound = 1024 * 1024;
    endpoint.memlockBytes = bound; // the kernel's view agrees: it must never be reached
    LocalRegions regions = LocalRegions.withExactBound(endpoint, registry, bound);
    Random random = new Random(20261130);
    List<Registration> held = new ArrayList<>();
    int refused = 0;
    for (int step = 0; step < 20_000; step++) {
      int action = random.nextInt(10);
      if (action < 6) {
        int buffer = random.nextInt(64);
        long spanBytes = 4096L * (1 + random.nextInt(48));
        long offset = 4096L * random.nextInt((int) (spanBytes / 4096));
        long length = Math.min(spanBytes - offset, 1 + random.nextInt(16384));
        long base = BASE + buffer * 0x100_0000L;
        Registration lease =
            random.nextBoolean()
                ? regions.lease(base + offset, length, span(base, base + spanBytes))
                : regions.lease(base + offset, length, NO_SPAN);
        if (lease == regions.noRoomYet()) {
          // Refused only when the leased bytes alone leave no room.
          assertTrue(
              regions.pinnedBytes() - registry.idleBytes(regions) + length > bound,
              "refused with room: pinned "
                  + regions.pinnedBytes()
                  + ", idle "
                  + registry.idleBytes(regions));
          refused++;
        } else {
          assertTrue(lease.base() <= base + offset && base + offset + length <= lease.end());
          held.add(lease);
        }
      } else if (action < 9 && !held.isEmpty()) {
        held.remove(random.nextInt(held.size())).release();
      } else if (action == 9) {
        long base = BASE + random.nextInt(64) * 0x100_0000L;
        registry.invalidate(base, base + 4096L * random.nextInt(64));
      }
      assertTrue(regions.pinnedBytes() <= bound, "pinned " + regions.pinnedBytes());
      RegionCacheAtTheBoundTest.assertIdleAccounting(registry, regions);
      assertEquals(endpoint.liveBytes(), regions.pinnedBytes());
      for (Registration lease : held) {
        assertTrue(endpoint.isLive(lease.handle()), "eviction touched a leased entry: " + lease);
      }
    }
    assertTrue(regions.evictions() > 0, "the workload must exercise eviction");
    assertTrue(regions.hits() > 0);
    assertTrue(refused > 0, "the workload must fill the bound with leases");
    assertTrue(refused < 20_000);
    for (Registration lease : held) {
      lease.release();
    }
    regions.close();
    assertEquals(0, endpoint.liveRegistrations());
    assertEquals(endpoint.registerCalls(), endpoint.deregisterCalls());
    assertEquals(List.of(), endpoint.faults());
  }

  // ------------------------------------------ mutation testing: exactly at the bound

  /** A region of exactly the bound fits once an idle span of exactly the excess is evicted. */
  @Test
  @Timeout(10)
  void aRegionOfExactlyTheBoundEvictsAnIdleSpanOfExactlyTheExcess() {
    LocalRegions regions = LocalRegions.withExactBound(endpoint, registry, 2 * SPAN);
    Registration idle = leaseSpan(regions, 0);
    idle.release();
    assertEquals(SPAN, regions.pinnedBytes());
    regions.pin(spanBase(4), 2 * SPAN);
    assertEquals(1, regions.evictions());
    assertFalse(endpoint.isLive(idle.handle()));
    assertEquals(2 * SPAN, regions.pinnedBytes());
    regions.close();
    assertEquals(List.of(), endpoint.faults());
  }

  /**
   * A region of exactly the bound that cannot fit while another region is pinned is a full bound
   * (PROVIDER), not a request longer than the bound (BAD_REQUEST); the message counts what it would
   * pin.
   */
  @Test
  @Timeout(10)
  void aRegionOfExactlyTheBoundBehindAPinnedOneIsAFullBoundNotABadRequest() {
    LocalRegions regions = LocalRegions.withExactBound(endpoint, registry, 2 * SPAN);
    regions.pin(spanBase(0), SPAN);
    DmaException full = assertThrows(DmaException.class, () -> regions.pin(spanBase(2), 2 * SPAN));
    assertEquals(DmaException.Reason.PROVIDER, full.reason());
    assertTrue(
        full.getMessage().startsWith("registering " + 2 * SPAN + " bytes would pin " + 3 * SPAN),
        full.getMessage());
    DmaException tooLong =
        assertThrows(DmaException.class, () -> regions.pin(spanBase(2), 2 * SPAN + 1));
    assertEquals(DmaException.Reason.BAD_REQUEST, tooLong.reason());
    assertEquals(SPAN, regions.pinnedBytes());
    regions.close();
    assertEquals(List.of(), endpoint.faults());
  }

  /**
   * An operand that fits only once every idle span is gone, exactly: it is registered (evicting
   * them), not answered with "no room yet".
   */
  @Test
  @Timeout(10)
  void anOperandThatFitsExactlyOnceTheIdleSpansAreEvictedIsRegistered() {
    LocalRegions regions = LocalRegions.withExactBound(endpoint, registry, 2 * SPAN);
    Registration idle = leaseSpan(regions, 0);
    idle.release();
    Registration held = leaseSpan(regions, 1);
    assertEquals(2 * SPAN, regions.pinnedBytes());
    Registration operand = regions.lease(spanBase(2), SPAN, NO_SPAN);
    assertNotSame(regions.noRoomYet(), operand);
    assertEquals(spanBase(2), operand.base());
    assertEquals(1, regions.evictions());
    assertEquals(2 * SPAN, regions.pinnedBytes());
    operand.release();
    held.release();
    regions.close();
    assertEquals(List.of(), endpoint.faults());
  }

  /**
   * An operand of exactly the bound while a held span fills part of it waits for room (no room
   * yet), as any operand within the bound does; only a longer one fails at once.
   */
  @Test
  @Timeout(10)
  void anOperandOfExactlyTheBoundWaitsForRoomRatherThanFailing() {
    LocalRegions regions = LocalRegions.withExactBound(endpoint, registry, 2 * SPAN);
    Registration held = leaseSpan(regions, 0);
    int registered = endpoint.registerCalls();
    assertSame(regions.noRoomYet(), regions.lease(spanBase(2), 2 * SPAN, NEVER_ASKED));
    assertEquals(registered, endpoint.registerCalls());
    held.release();
    Registration operand = regions.lease(spanBase(2), 2 * SPAN, NO_SPAN);
    assertEquals(2 * SPAN, operand.lengthBytes());
    operand.release();
    regions.close();
    assertEquals(List.of(), endpoint.faults());
  }
}
