package dev.dma.core;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Collections;
import java.util.HashSet;
import java.util.Set;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

class ChecksumPoolTest {
  @Test
  void threadsAreNamedPerPoolAndJobsSpreadRoundRobin() throws Exception {
    Set<String> names = Collections.synchronizedSet(new HashSet<>());
    CountDownLatch done = new CountDownLatch(6);
    try (ChecksumPool pool = new ChecksumPool(3)) {
      assertEquals(3, pool.threads());
      for (int i = 0; i < 6; i++) {
        pool.submit(
            () -> {
              names.add(Thread.currentThread().getName());
              done.countDown();
            });
      }
      assertTrue(done.await(10, TimeUnit.SECONDS));
    }
    assertEquals(Set.of("f-pool-00", "f-pool-01", "f-pool-02"), names);
  }

  @Test
  void atLeastOneThread() {
    try (ChecksumPool pool = new ChecksumPool(0)) {
      assertEquals(1, pool.threads());
    }
  }

  @Test
  void aFailingJobKillsOnlyItself() throws Exception {
    AtomicInteger ran = new AtomicInteger();
    try (ChecksumPool pool = new ChecksumPool(1)) {
      pool.submit(
          () -> {
            throw new IllegalStateException("boom (expected by the test)");
          });
      pool.submit(ran::incrementAndGet);
    }
    assertEquals(1, ran.get());
  }

  @Test
  void closeDrainsQueuedJobsThenDropsNewOnes() {
    AtomicInteger ran = new AtomicInteger();
    ChecksumPool pool = new ChecksumPool(2);
    for (int i = 0; i < 1000; i++) {
      pool.submit(ran::incrementAndGet);
    }
    pool.close();
    assertEquals(1000, ran.get());
    assertTrue(pool.isClosed());
    pool.submit(ran::incrementAndGet);
    pool.close();
    assertEquals(1000, ran.get());
  }
}
