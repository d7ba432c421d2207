package dev.dma.core.internal.regions;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.reflect.Field;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.Callable;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.ReentrantLock;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Every registry call that takes the lock gives it back, on each way out: a normal return, an early
 * return, and a thrown exception. The lock is reentrant, so a call that kept it would go unnoticed
 * by a test on one thread; here, after each call on the test thread, a second thread makes a
 * registry call that needs the lock, and must finish within a bound with the expected answer. A
 * lock left held would block that thread (and, in production, every other worker) for ever.
 *
 * <p>The test also reads the lock itself (by reflection): before the second thread starts, whether
 * the test thread still holds it, which fails at once rather than after the second thread's bound;
 * and after, whether the second thread's own call kept it (when that call is the broken one), which
 * would otherwise show as the test thread's next call blocking until the class's time-out. {@code
 * SEPARATE_THREAD}: {@code lock()} ignores interrupts, so only a time-out on another thread can end
 * a test blocked in it.
 */
@Timeout(value = 30, unit = TimeUnit.SECONDS, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
class RegionRegistryLockReleaseTest {
  /** How long a second thread may take to get the lock: generous, it is free at once. */
  private static final Duration BOUND = Duration.ofSeconds(5);

  private final RecordingEndpoint endpoint = new RecordingEndpoint();
  private final RegionRegistry registry = new RegionRegistry();
  private final Object domain = new Object();
  private final ReentrantLock lock = lockOf(registry);

  /** The registry's private lock: only read, to tell which side kept it. */
  private static ReentrantLock lockOf(RegionRegistry registry) {
    try {
      Field field = RegionRegistry.class.getDeclaredField("lock");
      field.setAccessible(true);
      return (ReentrantLock) field.get(registry);
    } catch (ReflectiveOperationException e) {
      throw new AssertionError("RegionRegistry has no field `lock` any more", e);
    }
  }

  /**
   * Runs {@code call} on a new daemon thread and waits for it at most {@link #BOUND}: fails when it
   * did not finish (it is blocked on the lock the test thread kept; being a daemon, it does not
   * keep the JVM alive), when it threw, or when its own call kept the lock. Returns its answer.
   */
  private <V> V onSecondThread(String after, Callable<V> call) throws InterruptedException {
    // The direct sign first: it fails at once, where the second thread would wait out its bound.
    assertFalse(
        lock.isHeldByCurrentThread(), "the test thread still holds the lock after " + after);
    AtomicReference<V> answer = new AtomicReference<>();
    AtomicReference<Throwable> failure = new AtomicReference<>();
    Thread second =
        Thread.ofPlatform()
            .daemon()
            .name("second thread after " + after)
            .start(
                () -> {
                  try {
                    answer.set(call.call());
                  } catch (Throwable t) {
                    failure.set(t);
                  }
                });
    assertTrue(
        second.join(BOUND),
        "a second thread could not take the registry's lock after " + after + ": it was kept");
    if (failure.get() != null) {
      throw new AssertionError("the second thread failed after " + after, failure.get());
    }
    assertFalse(
        lock.isLocked(), "the second thread's own call, after " + after + ", kept the lock");
    return answer.get();
  }

  /** A second thread counts the domain's entries: the lock is free and the count is right. */
  private void lockFreeAfter(String after, int expectedEntries) throws InterruptedException {
    assertEquals(
        expectedEntries,
        onSecondThread(after, () -> registry.size(domain)),
        "entries a second thread sees after " + after);
  }

  /** A registration the registry tracks, with the caller's lease dropped. */
  private Registration tracked(long base, long end, boolean evictable) {
    Registration registration = Registration.register(endpoint, base, end - base, evictable);
    registry.track(domain, registration);
    registration.release();
    return registration;
  }

  @Test
  void trackGivesTheLockBack() throws Exception {
    Registration first = Registration.register(endpoint, 1000, 1000, true);
    registry.track(domain, first);
    lockFreeAfter("track of a new entry", 1);

    Registration second = Registration.register(endpoint, 1000, 2000, true);
    registry.track(domain, second); // same base: replaces the first
    lockFreeAfter("track replacing an entry", 1);

    registry.track(domain, second); // already tracked: returns early, no second lease
    lockFreeAfter("track of an entry already tracked", 1);
    assertEquals(2, second.leases(), "the caller's and the registry's");

    first.release();
    second.release();
    assertFalse(endpoint.isLive(first.handle()), "the replaced entry deregistered");
    assertTrue(endpoint.isLive(second.handle()));
  }

  @Test
  void trackThatThrowsGivesTheLockBack() throws Exception {
    Registration closed = Registration.register(endpoint, 1000, 1000, true);
    closed.release(); // deregistered: retaining it under the lock throws
    assertThrows(IllegalStateException.class, () -> registry.track(domain, closed));
    lockFreeAfter("track that threw", 0);
  }

  @Test
  void coveringGivesTheLockBackOnEveryAnswer() throws Exception {
    assertNull(registry.covering(domain, 1000, 1100));
    lockFreeAfter("covering in an unknown domain", 0);

    Registration entry = tracked(1000, 2000, true);
    assertNull(registry.covering(domain, 500, 600));
    lockFreeAfter("covering below every entry", 1);

    assertNull(registry.covering(domain, 1500, 2500));
    lockFreeAfter("covering past the entry's end", 1);

    Registration hit = registry.covering(domain, 1200, 1300);
    assertSame(entry, hit);
    lockFreeAfter("covering that hit", 1);

    // The hit's release leaves only the registry's lease: becameIdle takes the lock.
    hit.release();
    assertEquals(
        1000, onSecondThread("a release made an entry idle", () -> registry.idleBytes(domain)));

    RegionRegistry.Claim claim = new RegionRegistry.Claim();
    assertNull(registry.covering(domain, 3000, 3100, claim));
    lockFreeAfter("covering that missed with a claim", 1);
    assertSame(entry, registry.covering(domain, 1000, 2000, claim));
    lockFreeAfter("covering that hit with a claim", 1);
    entry.release();
  }

  @Test
  void becameIdleGivesTheLockBack() throws Exception {
    Registration entry = Registration.register(endpoint, 1000, 1000, true);
    registry.track(domain, entry);
    entry.release(); // two leases to one: the registry is told it is idle, under its lock
    assertEquals(1, entry.leases());
    assertEquals(
        List.of(entry),
        onSecondThread("a release told the registry", () -> registry.idleEntries(domain)));

    registry.becameIdle(entry); // already idle: nothing to do
    lockFreeAfter("becameIdle of an idle entry", 1);
  }

  @Test
  void invalidateGivesTheLockBack() throws Exception {
    assertEquals(0, registry.invalidate(0, 100));
    lockFreeAfter("invalidate over an empty registry", 0);

    tracked(1000, 2000, true);
    tracked(3000, 4000, true);
    RegionRegistry.Claim claim = new RegionRegistry.Claim();
    registry.open(claim, 5000, 6000, false);
    assertEquals(1, registry.invalidate(1500, 1600));
    lockFreeAfter("invalidate that retired an entry", 1);

    assertEquals(0, registry.invalidate(5000, 5001));
    assertTrue(claim.invalidated, "the open claim was marked");
    lockFreeAfter("invalidate that marked a claim", 1);
    registry.abandon(claim);
  }

  @Test
  void clearDomainGivesTheLockBack() throws Exception {
    assertEquals(0, registry.clearDomain(domain));
    lockFreeAfter("clearDomain of an unknown domain", 0);

    tracked(1000, 2000, true);
    tracked(3000, 4000, true);
    assertEquals(2, registry.clearDomain(domain));
    lockFreeAfter("clearDomain", 0);
    assertEquals(0, endpoint.liveRegistrations());
  }

  @Test
  void evictGivesTheLockBack() throws Exception {
    assertEquals(0, registry.evict(domain, 1000));
    lockFreeAfter("evict in an unknown domain", 0);

    tracked(1000, 2000, true);
    tracked(3000, 4000, true);
    assertEquals(1, registry.evict(domain, 1000));
    lockFreeAfter("evict", 1);
    assertEquals(1, endpoint.liveRegistrations());
  }

  @Test
  void theQueriesGiveTheLockBack() throws Exception {
    assertEquals(0, registry.idleBytes(domain));
    lockFreeAfter("idleBytes of an unknown domain", 0);
    assertEquals(List.of(), registry.idleEntries(domain));
    lockFreeAfter("idleEntries of an unknown domain", 0);
    assertNull(registry.layoutFault(domain));
    lockFreeAfter("layoutFault of an unknown domain", 0);
    assertEquals(0, registry.chunkCount(domain));
    lockFreeAfter("chunkCount of an unknown domain", 0);
    assertEquals(0, registry.size(domain));
    lockFreeAfter("size of an unknown domain", 0);

    Registration entry = tracked(1000, 2000, true);
    assertEquals(1000, registry.idleBytes(domain));
    lockFreeAfter("idleBytes", 1);
    assertEquals(List.of(entry), registry.idleEntries(domain));
    lockFreeAfter("idleEntries", 1);
    assertNull(registry.layoutFault(domain));
    lockFreeAfter("layoutFault", 1);
    assertEquals(1, registry.chunkCount(domain));
    lockFreeAfter("chunkCount", 1);
    assertEquals(1, registry.size(domain));
    lockFreeAfter("size", 1);
  }

  @Test
  void claimsGiveTheLockBack() throws Exception {
    RegionRegistry.Claim claim = new RegionRegistry.Claim();
    registry.open(claim, 1000, 2000, false);
    lockFreeAfter("open", 0);

    Registration registration = Registration.register(endpoint, 1000, 1000, true);
    assertTrue(registry.trackClaimed(domain, registration, claim));
    assertFalse(claim.open);
    lockFreeAfter("trackClaimed that tracked", 1);
    registration.release();

    registry.open(claim, 3000, 4000, false);
    registry.invalidate(3500, 3600);
    Registration overFreedPages = Registration.register(endpoint, 3000, 1000, true);
    assertFalse(registry.trackClaimed(domain, overFreedPages, claim));
    lockFreeAfter("trackClaimed that an invalidate beat", 1);
    overFreedPages.release();
    assertFalse(endpoint.isLive(overFreedPages.handle()), "never cached, so gone with its lease");

    registry.open(claim, 5000, 6000, false);
    registry.abandon(claim);
    assertFalse(claim.open);
    lockFreeAfter("abandon", 1);
    registry.abandon(claim); // not open: returns before the lock
    lockFreeAfter("abandon of a closed claim", 1);
  }

  @Test
  void trackClaimedThatThrowsGivesTheLockBack() throws Exception {
    RegionRegistry.Claim claim = new RegionRegistry.Claim();
    registry.open(claim, 1000, 2000, false);
    Registration closed = Registration.register(endpoint, 1000, 1000, true);
    closed.release();
    assertThrows(IllegalStateException.class, () -> registry.trackClaimed(domain, closed, claim));
    assertFalse(claim.open, "the claim is closed before tracking fails");
    lockFreeAfter("trackClaimed that threw", 0);
  }
}
