package dev.dma.core;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dma.api.DmaConfiguration;
import dev.dma.api.RemoteAccess;
import java.lang.foreign.Arena;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.time.Duration;
import java.util.HashSet;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.LockSupport;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * An idle {@link PassiveTarget} sleeps by default (on an endpoint that can wait for incoming RMA),
 * and a call made while it sleeps is answered at once, not after the sleep.
 */
@Timeout(value = 30, unit = TimeUnit.SECONDS)
class PassiveTargetIdleTest {
  /** An endpoint whose waits park the owner until the time passes or {@link #wakeup()}. */
  private static final class SleepingEndpoint extends LoopbackTestEndpoint {
    final AtomicInteger waits = new AtomicInteger();
    private volatile Thread owner;
    private volatile boolean woken;

    @Override
    public Set<Capability> capabilities() {
      return Set.of(Capability.AWAITS_INCOMING);
    }

    @Override
    public boolean awaitIncoming(long timeoutNanos) {
      owner = Thread.currentThread();
      waits.incrementAndGet();
      long deadline = System.nanoTime() + timeoutNanos;
      while (!woken && System.nanoTime() - deadline < 0) {
        LockSupport.parkNanos(this, deadline - System.nanoTime());
      }
      woken = false;
      return false;
    }

    @Override
    public void wakeup() {
      woken = true;
      Thread thread = owner;
      if (thread != null) {
        LockSupport.unpark(thread);
      }
    }
  }

  /**
   * An endpoint with no wait object but a count of served RMA, as shm: while {@link #streaming},
   * each progress call serves one more.
   */
  private static final class CountingEndpoint extends LoopbackTestEndpoint {
    volatile boolean streaming;
    private long served;

    @Override
    public void progress() {
      if (streaming) {
        served++;
      }
    }

    @Override
    public long incomingServed() {
      return served;
    }
  }

  /** The CPU time, in nanoseconds, the target thread {@code id} uses over {@code millis}. */
  private static long cpuOver(long id, long millis) throws InterruptedException {
    ThreadMXBean threads = ManagementFactory.getThreadMXBean();
    long first = threads.getThreadCpuTime(id);
    Thread.sleep(millis);
    return threads.getThreadCpuTime(id) - first;
  }

  @Test
  void withoutAWaitObjectAnIdleTargetNapsAndAServingOneSpins() throws Exception {
    CountingEndpoint endpoint = new CountingEndpoint();
    Set<Long> before = targetThreads();
    try (PassiveTarget _ =
        PassiveTarget.builder(DmaConfiguration.defaults()).provider(endpoint.provider()).start()) {
      long id = onlyNew(before);
      Thread.sleep(200); // past the spin and yield phases
      long idle = cpuOver(id, 2_000);
      assertTrue(idle < 40_000_000L, "an idle target used " + idle / 1e6 + " ms of CPU in 2 s");
      Thread thread = null;
      for (Thread each : Thread.getAllStackTraces().keySet()) {
        if (each.threadId() == id) {
          thread = each;
        }
      }
      assertNotNull(thread);
      endpoint.streaming = true;
      Thread.sleep(100);
      // A napping thread is parked (TIMED_WAITING) most of the time; a spinning one never is.
      int parked = 0;
      for (int i = 0; i < 500; i++) {
        if (thread.getState() == Thread.State.TIMED_WAITING) {
          parked++;
        }
        Thread.sleep(1);
      }
      assertTrue(parked < 100, "a serving target was napping in " + parked + " of 500 samples");
    }
  }

  private static Set<Long> targetThreads() {
    Set<Long> ids = new HashSet<>();
    for (Thread thread : Thread.getAllStackTraces().keySet()) {
      if (thread.getName().startsWith("dma-target-")) {
        ids.add(thread.threadId());
      }
    }
    return ids;
  }

  private static long onlyNew(Set<Long> before) {
    Set<Long> now = targetThreads();
    now.removeAll(before);
    assertEquals(1, now.size(), "one new target thread");
    return now.iterator().next();
  }

  @Test
  void anIdleTargetUsesUnderTwoPercentOfACoreByDefault() throws Exception {
    ThreadMXBean threads = ManagementFactory.getThreadMXBean();
    SleepingEndpoint endpoint = new SleepingEndpoint();
    Set<Long> before = targetThreads();
    try (PassiveTarget _ =
        PassiveTarget.builder(DmaConfiguration.defaults()).provider(endpoint.provider()).start()) {
      long id = onlyNew(before);
      Thread.sleep(200); // past the spin and yield phases
      long first = threads.getThreadCpuTime(id);
      Thread.sleep(2_000);
      long cpu = threads.getThreadCpuTime(id) - first;
      assertTrue(cpu < 40_000_000L, "an idle target used " + cpu / 1e6 + " ms of CPU in 2 s");
      assertTrue(endpoint.waits.get() > 0, "it never slept");
    }
  }

  @Test
  void aCallWakesASleepingTarget() throws Exception {
    SleepingEndpoint endpoint = new SleepingEndpoint();
    try (Arena arena = Arena.ofShared();
        PassiveTarget target =
            PassiveTarget.builder(DmaConfiguration.defaults())
                .provider(endpoint.provider())
                .idle(Duration.ofSeconds(20))
                .start()) {
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
      while (endpoint.waits.get() == 0 && System.nanoTime() < deadline) {
        Thread.sleep(1);
      }
      assertTrue(endpoint.waits.get() > 0, "the target never slept");
      long start = System.nanoTime();
      target.expose(arena.allocate(64), RemoteAccess.READ_WRITE).close();
      long millis = (System.nanoTime() - start) / 1_000_000;
      assertTrue(millis < 5_000, "expose waited " + millis + " ms for a 20 s sleep");
    }
    // close() woke it as well: the try-with-resources returned well within the 20 s sleep.
  }

  @Test
  void zeroSpinsAndNeverSleeps() throws Exception {
    SleepingEndpoint endpoint = new SleepingEndpoint();
    try (PassiveTarget _ =
        PassiveTarget.builder(DmaConfiguration.builder().targetIdle(Duration.ZERO).build())
            .provider(endpoint.provider())
            .start()) {
      Thread.sleep(300);
      assertEquals(0, endpoint.waits.get());
    }
  }
}
