package dev.dma.core.internal.regions;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The registry's own rules, and a registration's lease counting. */
class RegionRegistryTest {
  private final RecordingEndpoint endpoint = new RecordingEndpoint();
  private final RegionRegistry registry = new RegionRegistry();
  private final Object domain = new Object();

  private Registration track(long base, long end) {
    Registration registration = Registration.register(endpoint, base, end - base, true);
    registry.track(domain, registration);
    registration.release();
    return registration;
  }

  @Test
  void coveringLooksOnlyAtTheGreatestBaseAtOrBelowTheStart() {
    Registration wide = track(1000, 9000);
    Registration nested = track(2000, 3000);
    Registration hit = registry.covering(domain, 1500, 9000);
    assertSame(wide, hit);
    hit.release();
    // The nested entry hides the wider one: a miss, costing a registration, never a wrong one.
    assertNull(registry.covering(domain, 2500, 4000));
    hit = registry.covering(domain, 2000, 3000);
    assertSame(nested, hit);
    hit.release();
    assertNull(registry.covering(domain, 999, 1000));
    assertNull(registry.covering(new Object(), 1500, 2000));
  }

  @Test
  void invalidateIsHalfOpen() {
    track(1000, 2000);
    track(3000, 4000);
    assertEquals(0, registry.invalidate(2000, 3000), "adjacent ranges do not overlap");
    assertEquals(0, registry.invalidate(500, 1000));
    assertEquals(2, registry.invalidate(1999, 3001));
    assertEquals(0, registry.size(domain));
    assertEquals(0, endpoint.liveRegistrations());
  }

  @Test
  void invalidateFindsALongEntryFarBelowTheRange() {
    track(1000, 1_000_000);
    for (int i = 0; i < 100; i++) {
      track(2000 + i * 100, 2050 + i * 100);
    }
    // Every entry above it ends long before 900_000: the scan must still reach the long one.
    assertEquals(1, registry.invalidate(900_000, 900_001));
    assertEquals(100, registry.size(domain));
    assertEquals(1, registry.invalidate(2000, 2001));
    assertEquals(99, registry.invalidate(0, Long.MAX_VALUE));
  }

  @Test
  void invalidateLeavesAnEntryEndingWhereTheRangeStarts() {
    track(1000, 2000);
    track(10_000, 30_000); // longer: the scan below the range does not stop at the first entry
    assertEquals(0, registry.invalidate(2000, 3000), "[1000, 2000) ends where the range starts");
    assertEquals(2, registry.size(domain));
    assertEquals(1, registry.invalidate(1999, 3000));
    assertEquals(1, registry.size(domain));
  }

  @Test
  void anEntryLeasedAcrossAClearCanBeTrackedAgain() {
    Registration entry = track(1000, 2000);
    Registration leased = registry.covering(domain, 1000, 2000);
    assertEquals(1, registry.clearDomain(domain));
    assertTrue(endpoint.isLive(entry.handle()), "its operation still leases it");
    Object other = new Object();
    registry.track(other, leased); // no longer the registry's, so it takes a lease again
    assertEquals(1, registry.size(other));
    assertEquals(2, leased.leases());
    leased.release();
    assertEquals(1, registry.clearDomain(other));
    assertEquals(0, endpoint.liveRegistrations());
  }

  @Test
  void removingAWholeChunkWhenTheChunkIndexIsFull() {
    // Ascending inserts split a full chunk into 128 and 129: 513 entries make 4 chunks (128, 128,
    // 128, 129), which fill the chunk index's first capacity of 4.
    int entries = 513;
    for (int i = 0; i < entries; i++) {
      track(100_000 + i * 1000L, 100_000 + i * 1000L + 100);
    }
    assertEquals(4, registry.chunkCount(domain));
    // Empties the second chunk (entries 128 to 255) and takes it out of the index.
    assertEquals(128, registry.invalidate(100_000 + 128 * 1000L, 100_000 + 255 * 1000L + 100));
    assertEquals(3, registry.chunkCount(domain));
    assertNull(registry.layoutFault(domain));
    assertEquals(entries - 128, registry.size(domain));
    for (int i = 0; i < entries; i++) {
      Registration hit = registry.covering(domain, 100_000 + i * 1000L, 100_000 + i * 1000L + 100);
      if (i >= 128 && i <= 255) {
        assertNull(hit, "entry " + i + " was invalidated");
      } else {
        assertNotNull(hit, "entry " + i);
        assertEquals(100_000 + i * 1000L, hit.base());
        hit.release();
      }
    }
    assertEquals(entries - 128, registry.clearDomain(domain));
    assertEquals(0, endpoint.liveRegistrations());
  }

  @Test
  void trackingAtTheSameBaseReplacesAndReleasesOnlyTheRegistrysLease() {
    Registration first = track(1000, 2000);
    Registration leased = registry.covering(domain, 1000, 1500);
    Registration second = track(1000, 3000);
    assertEquals(1, registry.size(domain));
    assertEquals(1, leased.leases(), "the replaced entry lives while an operand leases it");
    assertTrue(endpoint.isLive(first.handle()));
    leased.release();
    assertFalse(endpoint.isLive(first.handle()));
    Registration hit = registry.covering(domain, 1000, 2500);
    assertSame(second, hit);
    hit.release();
    registry.track(domain, second); // tracking twice takes no second lease
    assertEquals(1, second.leases());
    registry.clearDomain(domain);
    assertEquals(List.of(), endpoint.faults());
    assertEquals(0, endpoint.liveRegistrations());
  }

  @Test
  void manyEntriesStaySorted() {
    for (int i = 99; i >= 0; i--) {
      track(10_000 + i * 1000, 10_000 + i * 1000 + 500);
    }
    for (int i = 0; i < 100; i++) {
      Registration hit = registry.covering(domain, 10_000 + i * 1000 + 10, 10_000 + i * 1000 + 20);
      assertEquals(10_000 + i * 1000, hit.base());
      hit.release();
    }
    assertEquals(100, registry.clearDomain(domain));
    assertEquals(0, registry.clearDomain(domain));
    assertEquals(0, endpoint.liveRegistrations());
  }

  @Test
  void deregistrationRunsExactlyOnceOnTheLastRelease() {
    Registration registration = Registration.register(endpoint, 4096, 4096, false);
    registration.retain();
    registration.release();
    assertTrue(endpoint.isLive(registration.handle()));
    registration.release();
    assertEquals(0, registration.leases());
    assertEquals(1, endpoint.deregisterCalls());
    assertThrows(IllegalStateException.class, registration::release);
    assertThrows(IllegalStateException.class, registration::retain);
    assertEquals(1, endpoint.deregisterCalls());
    assertEquals(List.of(), endpoint.faults());
  }

  @Test
  void aClaimIsMarkedOnlyByAnInvalidateOverlappingIt() {
    RegionRegistry.Claim claim = new RegionRegistry.Claim();
    registry.open(claim, 1000, 2000, false);
    registry.invalidate(2000, 3000);
    registry.invalidate(0, 1000);
    assertFalse(claim.invalidated, "ranges that only touch the claim's ends do not overlap it");
    registry.invalidate(1999, 2000);
    assertTrue(claim.invalidated);
    Registration overFreedPages = Registration.register(endpoint, 1000, 1000, true);
    assertFalse(registry.trackClaimed(domain, overFreedPages, claim), "the invalidate won");
    assertFalse(claim.open);
    assertEquals(0, registry.size(domain));
    overFreedPages.release();
    assertEquals(0, endpoint.liveRegistrations());
  }

  @Test
  void closingAClaimLeavesTheOtherOpenClaimsMarkable() {
    RegionRegistry.Claim first = new RegionRegistry.Claim();
    RegionRegistry.Claim second = new RegionRegistry.Claim();
    RegionRegistry.Claim neverOpened = new RegionRegistry.Claim();
    registry.open(first, 1000, 2000, false);
    registry.open(second, 3000, 4000, false);
    registry.abandon(neverOpened); // not open: must not touch the list of open ones
    registry.abandon(second);
    assertFalse(second.open);
    registry.open(second, 3000, 4000, false); // reused, as a LocalRegions reuses its one claim
    Registration registration = Registration.register(endpoint, 3000, 1000, true);
    assertTrue(registry.trackClaimed(domain, registration, second));
    assertFalse(second.open);
    registration.release();
    registry.invalidate(1500, 3500);
    assertTrue(first.invalidated, "the claim still open was marked");
    assertFalse(second.invalidated, "a closed claim is not marked");
    assertEquals(0, registry.size(domain), "the tracked entry was retired");
    registry.abandon(first);
    assertFalse(first.open);
  }

  @Test
  void theGlobalRegistryIsOne() {
    assertNotNull(RegionRegistry.global());
    assertSame(RegionRegistry.global(), RegionRegistry.global());
  }

  /** A chunk holding exactly its capacity is a sound layout, and the next entry splits it. */
  @Test
  @Timeout(10)
  void aFullChunkIsASoundLayoutAndTheNextEntrySplitsIt() {
    int chunk = RegionRegistry.DomainMap.CHUNK;
    for (int i = 0; i < chunk; i++) {
      track(100_000 + i * 1000L, 100_000 + i * 1000L + 100);
    }
    assertEquals(1, registry.chunkCount(domain));
    assertNull(registry.layoutFault(domain));
    track(100_000 + chunk * 1000L, 100_000 + chunk * 1000L + 100);
    assertEquals(2, registry.chunkCount(domain));
    assertNull(registry.layoutFault(domain));
    assertEquals(chunk + 1, registry.size(domain));
  }
}
