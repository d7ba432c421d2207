package dev.dma.core.internal.regions;

import static dev.dma.core.internal.regions.Contexts.NEVER_ASKED;
import static dev.dma.core.internal.regions.Contexts.NO_SPAN;
import static dev.dma.core.internal.regions.Contexts.span;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dma.api.CacheableSpan;
import dev.dma.api.DmaException;
import dev.dma.api.Operands;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The crate's {@code region_cache} tests, over a recording endpoint instead of a real tcp domain
 * (strong counts become lease counts), plus the lease path's own rules.
 */
class RegionCacheTest {
  private static final long KIB = 1024;

  /** A 64 KiB-aligned fake address; nothing here touches the memory. */
  private static final long BASE = 0x7f00_0001_0000L;

  private final RecordingEndpoint endpoint = new RecordingEndpoint();
  private final RegionRegistry registry = new RegionRegistry();
  private final LocalRegions regions =
      LocalRegions.withExactBound(endpoint, registry, Long.MAX_VALUE);

  @AfterEach
  void closesEverythingOnce() {
    regions.close();
    assertEquals(List.of(), endpoint.faults());
  }

  /** Registers and tracks an extent with the registry as its only holder. */
  private Registration tracked(long base, long lengthBytes) {
    Registration registration = trackedConcurrently(base, lengthBytes);
    assertEquals(1, registration.leases());
    return registration;
  }

  /** As {@link #tracked}, while other threads may already be leasing it. */
  private Registration trackedConcurrently(long base, long lengthBytes) {
    Registration registration = Registration.register(endpoint, base, lengthBytes, true);
    registry.track(regions, registration);
    registration.release();
    return registration;
  }

  /**
   * Invalidating another part of a shared extent (a neighbouring value being freed) uncaches the
   * extent but does not deregister it under the operand still in flight: the lease keeps it live
   * until released. (Formerly named after the bug this rules out.)
   */
  @Test
  void invalidatingANeighbourUncachesTheExtentButItsInFlightLeaseKeepsItRegistered() {
    Registration extent = tracked(BASE, 64 * KIB);
    Registration lease = regions.lease(BASE + 4096, 4096, NEVER_ASKED);
    assertSame(extent, lease);
    assertEquals(2, lease.leases());

    assertEquals(1, registry.invalidate(BASE + 32768, BASE + 36864));

    assertNull(registry.covering(regions, BASE + 4096, BASE + 8192));
    assertEquals(1, lease.leases(), "the operand's lease is now the only holder");
    assertTrue(endpoint.isLive(lease.handle()), "still registered while in flight");
    lease.release();
    assertFalse(endpoint.isLive(lease.handle()));
    assertEquals(1, endpoint.deregisterCalls());
  }

  @Test
  void aCacheableSpanWidensTheRegistration() {
    long extent = BASE + 64 * KIB; // a 64 KiB-aligned extent inside a 3 x 64 KiB buffer
    Contexts.WithSpan first = span(extent, extent + 64 * KIB);
    Registration near = regions.lease(extent, 4096, first);
    assertEquals(1, first.asked);
    assertEquals(extent, near.base());
    assertEquals(extent + 64 * KIB, near.end());
    assertArrayEquals(new long[] {extent, 64 * KIB}, endpoint.registered().getFirst());

    Registration far = regions.lease(extent + 64 * KIB - 4096, 4096, NEVER_ASKED);
    assertSame(near, far, "the far end of the extent shares the exact same registration");
    assertEquals(3, near.leases());
    near.release();
    far.release();

    // A span that does not contain its operand: the operand's own extent, nothing tracked.
    long outside = BASE + 2 * 64 * KIB + 8192;
    Contexts.WithSpan bogus = span(BASE, BASE + 4096);
    Registration own = regions.lease(outside, 4096, bogus);
    assertEquals(outside, own.base());
    assertEquals(outside + 4096, own.end());
    assertArrayEquals(new long[] {outside, 4096}, endpoint.registered().getLast());
    assertEquals(1, registry.size(regions), "nothing was tracked for the bogus span");
    assertNull(registry.covering(regions, BASE, BASE + 4096));
    assertEquals(1, own.leases());
    own.release();
    assertFalse(endpoint.isLive(own.handle()), "an uncached operand closes with its op");
  }

  @Test
  void aRegistrationHandedToACallerHasNoLease() {
    tracked(BASE, 64 * KIB);
    Registration lease = regions.lease(BASE, 4096, NEVER_ASKED);
    registry.invalidate(0, Long.MAX_VALUE);
    assertEquals(1, lease.leases());
    assertEquals(0, registry.size(regions));
    assertTrue(endpoint.isLive(lease.handle()));
    lease.release();
    assertEquals(0, endpoint.liveRegistrations());
  }

  @Test
  void aPinnedSpanServesTheOperandsInsideIt() {
    regions.pin(BASE, 64 * KIB);
    assertEquals(1, endpoint.registerCalls());
    Registration lease = regions.lease(BASE + 8192, 4096, NEVER_ASKED);
    Registration covering = registry.covering(regions, BASE + 8192, BASE + 12288);
    assertSame(covering, lease);
    assertEquals(RecordingEndpoint.descriptorOf(lease.handle()), lease.descriptor());
    assertEquals(1, endpoint.registerCalls());
    lease.release();
    covering.release();
  }

  @Test
  void droppingARegionRetiresItsRegistration() {
    regions.pin(BASE, 64 * KIB);
    Registration lease = regions.lease(BASE, 4096, NEVER_ASKED);
    // What a MemoryRegion's close does before freeing its storage.
    registry.invalidate(BASE, BASE + 64 * KIB);
    assertEquals(0, registry.size(regions));
    assertNull(registry.covering(regions, BASE, BASE + 4096));
    assertEquals(1, lease.leases(), "the lease is the sole holder");
    lease.release();
    assertEquals(0, endpoint.liveRegistrations());
  }

  @Test
  void aRegionOutlivingItsEndpointClosesNothingTwice() {
    regions.pin(BASE, 64 * KIB);
    regions.close();
    assertEquals(0, endpoint.liveRegistrations());
    assertEquals(0, registry.invalidate(BASE, BASE + 64 * KIB));
    assertEquals(0, registry.size(regions));
    assertEquals(1, endpoint.deregisterCalls());
  }

  @Test
  void descriptorsStayValidWhileReclaimsRunUnderneath() throws Exception {
    int extents = 8;
    long extentBytes = 32 * KIB;
    for (int i = 0; i < extents; i++) {
      tracked(BASE + i * extentBytes, extentBytes);
    }
    int readers = 4;
    AtomicBoolean done = new AtomicBoolean();
    CountDownLatch everyReaderLeased = new CountDownLatch(readers);
    AtomicLong leased = new AtomicLong();
    AtomicReference<String> fault = new AtomicReference<>();
    List<Thread> threads = new ArrayList<>();
    for (int r = 0; r < readers; r++) {
      int reader = r;
      threads.add(
          Thread.ofPlatform()
              .name("reader-" + r)
              .start(
                  () -> {
                    boolean counted = false;
                    for (int i = reader; !done.get(); i++) {
                      long start = BASE + (i % extents) * extentBytes + 512;
                      Registration lease = registry.covering(regions, start, start + 4096);
                      if (lease == null) {
                        continue;
                      }
                      // The descriptor must belong to a live registration for as long as we hold
                      // it.
                      if (!endpoint.isLive(lease.handle())
                          || lease.descriptor() != RecordingEndpoint.descriptorOf(lease.handle())
                          || lease.leases() < 1) {
                        fault.compareAndSet(null, "leased a closed registration: " + lease);
                      }
                      Thread.onSpinWait();
                      if (!endpoint.isLive(lease.handle())) {
                        fault.compareAndSet(null, "a held lease was deregistered: " + lease);
                      }
                      lease.release();
                      leased.incrementAndGet();
                      if (!counted) {
                        counted = true;
                        everyReaderLeased.countDown();
                      }
                    }
                  }));
    }
    try {
      // Not a timing assumption: every extent is tracked until the first round starts.
      assertTrue(everyReaderLeased.await(20, TimeUnit.SECONDS));
      for (int round = 0; round < 60; round++) {
        registry.invalidate(0, Long.MAX_VALUE);
        for (int i = 0; i < extents; i++) {
          trackedConcurrently(BASE + i * extentBytes, extentBytes);
        }
      }
    } finally {
      done.set(true);
      for (Thread thread : threads) {
        assertTrue(thread.join(Duration.ofSeconds(30)), thread.getName() + " did not stop");
      }
    }
    assertNull(fault.get());
    assertTrue(leased.get() >= readers);
    regions.close();
    assertEquals(61 * extents, endpoint.registerCalls());
    assertEquals(endpoint.registerCalls(), endpoint.deregisterCalls());
    assertEquals(0, endpoint.liveRegistrations());
  }

  @Test
  void aHitNeitherAsksTheContextNorRegisters() {
    Contexts.WithSpan context = span(BASE, BASE + 64 * KIB);
    regions.lease(BASE, 4096, context).release();
    for (int i = 0; i < 10; i++) {
      regions.lease(BASE + i * 4096, 4096, context).release();
    }
    assertEquals(1, context.asked);
    assertEquals(1, endpoint.registerCalls());
    assertEquals(10, regions.hits());
    assertEquals(1, regions.misses());
  }

  @Test
  void anUncachedOperandRegistersItsExactExtentEveryTime() {
    for (int i = 0; i < 3; i++) {
      Registration lease = regions.lease(BASE + 3, 4093, NO_SPAN);
      assertEquals(BASE + 3, lease.base(), "no page rounding");
      assertEquals(BASE + 4096, lease.end());
      assertEquals(1, lease.leases());
      lease.release();
    }
    assertEquals(3, endpoint.registerCalls());
    assertEquals(3, endpoint.deregisterCalls());
    assertEquals(0, registry.size(regions));
  }

  @Test
  void aFailedWidenedRegistrationFallsBackToTheOperandAndIsStillTracked() {
    endpoint.failRegistrationsLongerThan = 8192;
    Registration lease = regions.lease(BASE + 4096, 4096, span(BASE, BASE + 64 * KIB));
    assertEquals(BASE + 4096, lease.base());
    assertEquals(BASE + 8192, lease.end());
    assertEquals(2, lease.leases(), "tracked at its real extent, since a span was kept");
    lease.release();
    Registration again = regions.lease(BASE + 4096, 4096, NEVER_ASKED);
    assertSame(lease, again);
    again.release();
    assertNull(registry.covering(regions, BASE, BASE + 4096), "never tracked at the span's extent");
  }

  @Test
  void aFailedOperandRegistrationIsTheEndpointsError() {
    endpoint.failRegistrationsLongerThan = 0;
    DmaException failure =
        assertThrows(DmaException.class, () -> regions.lease(BASE, 4096, span(BASE, BASE + 8192)));
    assertEquals("fi_mr_reg(operand): Invalid argument (-22)", failure.getMessage());
    assertEquals(DmaException.Kind.FABRIC, failure.kind());
    assertEquals(0, endpoint.liveRegistrations());
    assertEquals(0, registry.size(regions));
  }

  @Test
  void rangesThatOverflowAreRefused() {
    assertEquals(
        "local operand range overflows",
        assertThrows(DmaException.class, () -> regions.lease(Long.MAX_VALUE - 10, 100, NO_SPAN))
            .getMessage());
    assertEquals(
        "pinned region range overflows",
        assertThrows(DmaException.class, () -> regions.pin(Long.MAX_VALUE - 10, 100)).getMessage());
    assertEquals(
        "cannot register 0 bytes",
        assertThrows(DmaException.class, () -> regions.lease(BASE, 0, NO_SPAN)).getMessage());
    assertEquals(0, endpoint.registerCalls());
  }

  @Test
  void anEndpointWithoutLocalRegistrationRegistersNothing() {
    endpoint.requiresLocalRegistration = false;
    LocalRegions none = LocalRegions.withExactBound(endpoint, registry, Long.MAX_VALUE);
    assertFalse(none.required());
    assertNull(none.lease(BASE, 4096, NEVER_ASKED));
    none.pin(BASE, 64 * KIB);
    assertEquals(0, endpoint.registerCalls());
    assertEquals(0, registry.size(none));
    none.close();
  }

  @Test
  void aNullSpanAnswerOrNoContextRegistersTheOperandOnly() {
    Operands nullAnswer =
        new Operands() {
          @Override
          public CacheableSpan cacheableSpan() {
            return null;
          }
        };
    Registration lease = regions.lease(BASE, 4096, nullAnswer);
    assertEquals(1, lease.leases());
    lease.release();
    Registration again = regions.lease(BASE, 4096, null);
    assertEquals(1, again.leases());
    again.release();
    assertEquals(0, endpoint.liveRegistrations());
  }

  @Test
  void invalidateReachesEveryDomain() {
    RecordingEndpoint other = new RecordingEndpoint();
    LocalRegions otherRegions = LocalRegions.withExactBound(other, registry, Long.MAX_VALUE);
    regions.pin(BASE, 64 * KIB);
    otherRegions.pin(BASE + 4096, 4096);
    otherRegions.pin(BASE + 128 * KIB, 4096);
    assertEquals(2, registry.invalidate(BASE + 4096, BASE + 4097));
    assertEquals(0, endpoint.liveRegistrations());
    assertEquals(1, other.liveRegistrations());
    otherRegions.close();
    assertEquals(0, other.liveRegistrations());
    assertEquals(List.of(), other.faults());
  }

  @Test
  void countersCountHitsMissesAndPinnedBytes() {
    Registration lease = regions.lease(BASE, 4096, span(BASE, BASE + 8192));
    regions.lease(BASE + 4096, 4096, NEVER_ASKED).release();
    assertEquals(1, regions.hits());
    assertEquals(1, regions.misses());
    assertEquals(1, endpoint.registered().size());
    assertEquals(0, regions.evictions());
    assertEquals(8192, regions.pinnedBytes());
    assertEquals(Long.MAX_VALUE, regions.maxPinnedBytes());
    assertEquals(1, registry.size(regions));
    lease.release();
    regions.close();
    assertEquals(0, regions.pinnedBytes());
  }

  @Test
  void theConfiguredBoundFollowsDmaConfiguration() {
    LocalRegions byDefault = new LocalRegions(endpoint, registry, 0);
    assertEquals(PinnedMemoryLimit.bound(0), byDefault.maxPinnedBytes());
    assertTrue(byDefault.maxPinnedBytes() > 0);
    LocalRegions small = new LocalRegions(endpoint, registry, 4096);
    assertEquals(4096, small.maxPinnedBytes());
    assertThrows(IllegalArgumentException.class, () -> new LocalRegions(endpoint, registry, -1));
    assertThrows(
        IllegalArgumentException.class, () -> LocalRegions.withExactBound(endpoint, registry, 0));
  }

  @Test
  void differentDomainsNeverShareARegistration() {
    RecordingEndpoint other = new RecordingEndpoint();
    LocalRegions otherRegions = LocalRegions.withExactBound(other, registry, Long.MAX_VALUE);
    regions.pin(BASE, 64 * KIB);
    Registration mine = regions.lease(BASE, 4096, NEVER_ASKED);
    Registration theirs = otherRegions.lease(BASE, 4096, NO_SPAN);
    assertNotSame(mine, theirs);
    assertEquals(1, other.registerCalls());
    mine.release();
    theirs.release();
    otherRegions.close();
  }

  // ------------------------------------------ mutation testing: the range checks' edges

  @Test
  @Timeout(10)
  void addressZeroIsAnOperandAndARegionLikeAnyOther() {
    Registration operand = regions.lease(0, 4 * KIB, NO_SPAN);
    assertEquals(0, operand.base());
    assertEquals(4 * KIB, operand.end());
    operand.release();
    regions.pin(0, 64 * KIB);
    assertEquals(1, registry.size(regions));
    assertEquals(2, endpoint.registerCalls());
  }

  @Test
  @Timeout(10)
  void anEmptyRegionIsRefusedBeforeTheEndpointIsAsked() {
    DmaException refused = assertThrows(DmaException.class, () -> regions.pin(BASE, 0));
    assertEquals("cannot register 0 bytes", refused.getMessage());
    assertEquals(DmaException.Reason.BAD_REQUEST, refused.reason());
    assertEquals(0, endpoint.registerCalls());
    assertEquals(0, registry.size(regions));
  }

  /** The widened span fails to register, and the operand it would have covered is empty. */
  @Test
  @Timeout(10)
  void anEmptyOperandWhoseSpanCannotRegisterIsRefused() {
    endpoint.failRegistrationsLongerThan = 4 * KIB;
    DmaException refused =
        assertThrows(DmaException.class, () -> regions.lease(BASE, 0, span(BASE, BASE + 8 * KIB)));
    assertEquals("cannot register 0 bytes", refused.getMessage());
    assertEquals(1, endpoint.registerCalls(), "only the widened span was tried");
    assertEquals(0, endpoint.liveRegistrations());
  }

  @Test
  @Timeout(10)
  void requiredIsWhatTheEndpointSays() {
    assertTrue(regions.required());
  }

  /**
   * A registration that throws leaves no claim open: an invalidate that runs while the next one
   * registers (here from inside the endpoint's register) finds only that one's claim, and ends.
   * Times out on a separate thread, since a claim list that loops spins under the registry's lock.
   */
  @Test
  @Timeout(value = 10, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
  void aFailedRegistrationLeavesNoClaimOpenForTheNextInvalidateToLoopOn() {
    long second = BASE + 64 * KIB;
    endpoint.failRegistrationsLongerThan = 2 * KIB;
    assertThrows(
        DmaException.class, () -> regions.lease(BASE, 4 * KIB, span(BASE, BASE + 8 * KIB)));
    assertThrows(DmaException.class, () -> regions.pin(BASE + 16 * KIB, 4 * KIB));
    endpoint.failRegistrationsLongerThan = Long.MAX_VALUE;
    AtomicLong invalidatesRun = new AtomicLong();
    endpoint.beforeRegister =
        () -> {
          // An unrelated range: only the walk over the open claims matters here.
          registry.invalidate(BASE + 1024 * KIB, BASE + 2048 * KIB);
          invalidatesRun.incrementAndGet();
        };
    Registration leased = regions.lease(second, 4 * KIB, span(second, second + 8 * KIB));
    regions.pin(second + 16 * KIB, 4 * KIB);
    endpoint.beforeRegister = null;
    assertEquals(2, invalidatesRun.get());
    assertEquals(second, leased.base());
    assertEquals(2, registry.size(regions), "the span and the region, both tracked");
    leased.release();
  }

  /** A span that starts before the operand, or ends after it, is registered whole. */
  @Test
  @Timeout(10)
  void aSpanDifferingFromTheOperandAtEitherEndIsRegisteredWhole() {
    Registration endsTogether = regions.lease(BASE + 4 * KIB, 4 * KIB, span(BASE, BASE + 8 * KIB));
    assertEquals(BASE, endsTogether.base());
    assertEquals(8 * KIB, endsTogether.lengthBytes());
    long other = BASE + 64 * KIB;
    Registration startsTogether = regions.lease(other, 4 * KIB, span(other, other + 8 * KIB));
    assertEquals(other, startsTogether.base());
    assertEquals(8 * KIB, startsTogether.lengthBytes());
    assertSame(endsTogether, regions.lease(BASE, 4 * KIB, NEVER_ASKED), "the span's start hits");
    endsTogether.release();
    endsTogether.release();
    startsTogether.release();
  }
}
