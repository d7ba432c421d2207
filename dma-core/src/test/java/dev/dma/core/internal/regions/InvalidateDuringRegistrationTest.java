package dev.dma.core.internal.regions;

import static dev.dma.core.internal.regions.Contexts.NEVER_ASKED;
import static dev.dma.core.internal.regions.Contexts.span;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dma.api.CacheableSpan;
import dev.dma.api.Operands;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * An {@code invalidate} that overlaps a registration still in progress (registered outside the
 * registry's lock, tracked afterwards) must win: the registration serves its one operation and is
 * never cached, so no later operand binds to pages the owner already gave back.
 */
class InvalidateDuringRegistrationTest {
  private static final long KIB = 1024;
  private static final long BASE = 0x7f00_0001_0000L;
  private static final long SPAN = 64 * KIB;

  private final RecordingEndpoint endpoint = new RecordingEndpoint();
  private final RegionRegistry registry = new RegionRegistry();
  private final LocalRegions regions =
      LocalRegions.withExactBound(endpoint, registry, Long.MAX_VALUE);

  @AfterEach
  void everyRegistrationIsDeregisteredOnce() {
    regions.close();
    assertEquals(0, endpoint.liveRegistrations(), "registrations left live");
    assertEquals(endpoint.registered().size(), endpoint.deregisterCalls());
    assertEquals(List.of(), endpoint.faults());
  }

  /**
   * Runs {@code work} on a second thread (the "worker") until its first {@code register} call,
   * holds it there while {@code meanwhile} runs on this thread, then lets it finish.
   */
  private <V> V whileRegistering(java.util.function.Supplier<V> work, Runnable meanwhile)
      throws Exception {
    CountDownLatch entered = new CountDownLatch(1);
    CountDownLatch proceed = new CountDownLatch(1);
    endpoint.beforeRegister =
        () -> {
          endpoint.beforeRegister = null; // only the first registration waits
          entered.countDown();
          try {
            assertTrue(proceed.await(10, TimeUnit.SECONDS), "the test never released register");
          } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
          }
        };
    AtomicReference<V> result = new AtomicReference<>();
    AtomicReference<Throwable> failure = new AtomicReference<>();
    Thread worker =
        new Thread(
            () -> {
              try {
                result.set(work.get());
              } catch (Throwable t) {
                failure.set(t);
              }
            },
            "test-worker");
    worker.start();
    try {
      assertTrue(entered.await(10, TimeUnit.SECONDS), "the worker never reached register");
      meanwhile.run();
    } finally {
      proceed.countDown();
      worker.join(10_000);
    }
    assertFalse(worker.isAlive(), "the worker stayed blocked");
    if (failure.get() != null) {
      throw new AssertionError("the worker failed", failure.get());
    }
    return result.get();
  }

  @Test
  void anInvalidateDuringTheRegistrationWins() throws Exception {
    Registration overFreedPages =
        whileRegistering(
            () -> regions.lease(BASE + 4096, 4096, span(BASE, BASE + SPAN)),
            () -> registry.invalidate(BASE, BASE + SPAN));
    assertNotNull(overFreedPages);
    assertEquals(0, registry.size(regions), "a registration an invalidate overlapped was cached");
    assertNull(registry.covering(regions, BASE + 4096, BASE + 8192));
    assertEquals(1, overFreedPages.leases(), "only the operation holds it");

    // The next lease of the range (the owner reallocated it) registers afresh.
    Registration next = regions.lease(BASE + 4096, 4096, span(BASE, BASE + SPAN));
    assertNotSame(overFreedPages, next);
    assertNotEquals(overFreedPages.handle(), next.handle());
    assertEquals(2, endpoint.registered().size());

    assertTrue(endpoint.isLive(overFreedPages.handle()), "live while its operation is in flight");
    overFreedPages.release();
    assertFalse(endpoint.isLive(overFreedPages.handle()), "deregistered when its lease drops");
    next.release();
    assertTrue(endpoint.isLive(next.handle()), "the fresh one is cached");
    assertSame(next, registry.covering(regions, BASE, BASE + 4096));
    next.release();
  }

  @Test
  void anInvalidateOverlappingOnlyTheWidenedSpanStillWins() throws Exception {
    // The operand is at the span's start; the owner frees the span's tail.
    Registration lease =
        whileRegistering(
            () -> regions.lease(BASE, 4096, span(BASE, BASE + SPAN)),
            () -> registry.invalidate(BASE + SPAN - 4096, BASE + SPAN));
    assertEquals(0, registry.size(regions));
    lease.release();
    assertEquals(0, endpoint.liveRegistrations());
  }

  @Test
  void anInvalidateElsewhereDoesNotStopCaching() throws Exception {
    Registration lease =
        whileRegistering(
            () -> regions.lease(BASE + 4096, 4096, span(BASE, BASE + SPAN)),
            () -> registry.invalidate(BASE + SPAN, BASE + 2 * SPAN));
    assertEquals(1, registry.size(regions), "an unrelated invalidate must not defeat the cache");
    lease.release();
    Registration hit = regions.lease(BASE + 8192, 4096, NEVER_ASKED);
    assertSame(lease, hit);
    hit.release();
  }

  @Test
  void anInvalidateBetweenTheMissAndTheRegistrationWins() {
    // The caller context frees its span while the worker is asking for it: after the miss, before
    // the registration starts.
    Operands freesWhileAsked =
        new Operands() {
          @Override
          public CacheableSpan cacheableSpan() {
            registry.invalidate(BASE, BASE + SPAN);
            return new CacheableSpan(BASE, BASE + SPAN);
          }
        };
    Registration lease = regions.lease(BASE + 4096, 4096, freesWhileAsked);
    assertEquals(0, registry.size(regions));
    lease.release();
    assertEquals(0, endpoint.liveRegistrations());
  }

  @Test
  void anInvalidateDuringAPinWins() throws Exception {
    whileRegistering(
        () -> {
          regions.pin(BASE, SPAN);
          return Boolean.TRUE;
        },
        () -> registry.invalidate(BASE + 4096, BASE + 8192));
    assertEquals(0, registry.size(regions), "a pinned region invalidated while pinning was kept");
    assertEquals(0, endpoint.liveRegistrations(), "and it is deregistered at once");
  }
}
