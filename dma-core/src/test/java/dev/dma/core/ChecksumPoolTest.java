package dev.dma.core;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

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
  void closeDrainsQueuedJobsThenRunsNewOnesInline() {
    AtomicInteger ran = new AtomicInteger();
    ChecksumPool pool = new ChecksumPool(2);
    for (int i = 0; i < 1000; i++) {
      pool.submit(ran::incrementAndGet);
    }
    pool.close();
    assertEquals(1000, ran.get());
    assertTrue(pool.isClosed());
    // A shared pool closed before a service must not lose that service's completions.
    Thread[] ranOn = new Thread[1];
    pool.submit(
        () -> {
          ranOn[0] = Thread.currentThread();
          ran.incrementAndGet();
        });
    assertEquals(1001, ran.get(), "a job submitted after close runs exactly once");
    assertSame(Thread.currentThread(), ranOn[0], "inline, on the submitting thread");
    pool.close();
    assertEquals(1001, ran.get());
  }

  @Test
  void jobsRacingCloseEachRunExactlyOnceAndNoThreadIsLeft() throws Exception {
    int submitters = 4;
    int perSubmitter = 20_000;
    for (int round = 0; round < 20; round++) {
      Set<Thread> before = poolThreads();
      ChecksumPool pool = new ChecksumPool(2);
      AtomicInteger ran = new AtomicInteger();
      CountDownLatch start = new CountDownLatch(1);
      List<Thread> threads = new ArrayList<>();
      for (int s = 0; s < submitters; s++) {
        Thread submitter =
            new Thread(
                () -> {
                  try {
                    // Bounded: a submitter the test never releases ends, and the join below fails.
                    if (!start.await(10, TimeUnit.SECONDS)) {
                      return;
                    }
                  } catch (InterruptedException e) {
                    return;
                  }
                  for (int i = 0; i < perSubmitter; i++) {
                    pool.submit(ran::incrementAndGet);
                  }
                });
        submitter.start();
        threads.add(submitter);
      }
      start.countDown();
      // Close while the submitters are mid-stream, so some jobs land around the close: a jitter of
      // 0 to 2 ms that varies the race from round to round, not a wait for anything.
      Thread.sleep(round % 3);
      assertTimeoutPreemptively(Duration.ofSeconds(20), () -> pool.close());
      for (Thread submitter : threads) {
        submitter.join(20_000);
        assertFalse(submitter.isAlive(), "a submitter stayed blocked");
      }
      assertEquals(
          submitters * perSubmitter, ran.get(), "round " + round + ": lost or doubled jobs");
      Set<Thread> left = poolThreads();
      left.removeAll(before);
      assertEquals(Set.of(), left, "pool threads left alive after close");
    }
  }

  private static Set<Thread> poolThreads() {
    Set<Thread> threads = new HashSet<>();
    for (Thread thread : Thread.getAllStackTraces().keySet()) {
      if (thread.getName().startsWith("f-pool-") && thread.isAlive()) {
        threads.add(thread);
      }
    }
    return threads;
  }

  @Test
  @Timeout(60)
  void aJobThrowingAFatalErrorLeavesItsThreadServing() throws Exception {
    List<String> ranOn = Collections.synchronizedList(new ArrayList<>());
    CountDownLatch done = new CountDownLatch(1);
    try (ChecksumPool pool = new ChecksumPool(1)) {
      pool.submit(
          () -> {
            throw new OutOfMemoryError("test: a job ran out of heap");
          });
      pool.submit(
          () -> {
            throw new StackOverflowError("test: a job overflowed its stack");
          });
      pool.submit(
          () -> {
            ranOn.add(Thread.currentThread().getName());
            done.countDown();
          });
      assertTrue(done.await(30, TimeUnit.SECONDS), "the job after the errors never ran");
    }
    assertEquals(List.of("f-pool-00"), ranOn, "not run by the pool thread");
  }

  @Test
  @Timeout(60)
  void closeLeavesAThreadStuckInAJobBehindAfterItsTimeoutAndItKeepsItsJobs() throws Exception {
    CountDownLatch entered = new CountDownLatch(1);
    CountDownLatch release = new CountDownLatch(1);
    AtomicInteger ranAfter = new AtomicInteger();
    ChecksumPool pool = new ChecksumPool(1, Duration.ofSeconds(1));
    Thread stuck = null;
    try {
      pool.submit(
          () -> {
            entered.countDown();
            try {
              // A completer that blocks, against its contract; bounded so nothing outlives the
              // test even if the finally below never ran.
              release.await(60, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
              Thread.currentThread().interrupt();
            }
          });
      pool.submit(ranAfter::incrementAndGet);
      assertTrue(entered.await(30, TimeUnit.SECONDS));
      stuck = poolThreads().stream().filter(pool::isPoolThread).findFirst().orElseThrow();
      long started = System.nanoTime();
      pool.close();
      long tookMs = (System.nanoTime() - started) / 1_000_000;
      assertTrue(tookMs >= 900 && tookMs < 5_000, "close() with a 1 s timeout took " + tookMs);
      assertTrue(stuck.isAlive(), "the stuck thread is left behind, not stopped");
      assertTrue(stuck.isDaemon());
      assertEquals(0, ranAfter.get(), "the job queued behind the stuck one waits for its thread");
    } finally {
      release.countDown();
    }
    // Released, the thread runs the job it still held, exactly once, then ends.
    stuck.join(30_000);
    assertFalse(stuck.isAlive(), "the released thread did not end");
    assertEquals(1, ranAfter.get());
    // A job submitted now runs inline, as after any close.
    pool.submit(ranAfter::incrementAndGet);
    assertEquals(2, ranAfter.get());
  }

  @Test
  @Timeout(60)
  void closeFromAPoolThreadDoesNotWaitForItself() throws Exception {
    ChecksumPool pool = new ChecksumPool(2, Duration.ofSeconds(20));
    CountDownLatch closed = new CountDownLatch(1);
    long[] tookMs = new long[1];
    pool.submit(
        () -> {
          long started = System.nanoTime();
          pool.close();
          tookMs[0] = (System.nanoTime() - started) / 1_000_000;
          closed.countDown();
        });
    assertTrue(closed.await(30, TimeUnit.SECONDS));
    assertTrue(tookMs[0] < 10_000, "close() on a pool thread waited " + tookMs[0] + " ms");
    pool.close();
    assertEquals(Set.of(), poolThreadsOf(pool));
  }

  private static Set<Thread> poolThreadsOf(ChecksumPool pool) {
    Set<Thread> threads = poolThreads();
    threads.removeIf(thread -> !pool.isPoolThread(thread));
    return threads;
  }
}
