package dev.dma.core;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dma.api.DmaConfiguration;
import dev.dma.api.DmaException;
import dev.dma.api.RemoteAccess;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * Nothing waits forever on a {@link PassiveTarget}: every call is answered or fails with reason
 * CLOSED, and close returns within its bound.
 */
class PassiveTargetCloseTest {
  private static final Duration BOUND = Duration.ofSeconds(10);

  private final Arena arena = Arena.ofShared();
  private final GatedEndpoint endpoint = new GatedEndpoint();

  @AfterEach
  void releaseEverything() {
    endpoint.progressGate.countDown();
    endpoint.closeGate.countDown();
    arena.close();
  }

  private PassiveTarget start(Duration idle) {
    return PassiveTarget.start(
        DmaConfiguration.builder().closeTimeout(Duration.ofMillis(300)).build(),
        endpoint.provider(),
        idle);
  }

  private static Set<Thread> targetThreads() {
    Set<Thread> threads = new HashSet<>();
    for (Thread thread : Thread.getAllStackTraces().keySet()) {
      if (thread.getName().startsWith("dma-target-") && thread.isAlive()) {
        threads.add(thread);
      }
    }
    return threads;
  }

  private static void assertClosed(DmaException failure) {
    assertEquals(DmaException.Reason.CLOSED, failure.reason(), failure.getMessage());
  }

  @Test
  void aCallQueuedAfterTheFinalDrainFailsInsteadOfWaitingForever() throws Exception {
    endpoint.closeGate = new CountDownLatch(1);
    PassiveTarget target = start(Duration.ZERO);
    MemorySegment segment = arena.allocate(4096);
    Thread closer = new Thread(target::close, "test-closer");
    closer.setDaemon(true);
    closer.start();
    // The target's thread has drained its commands and is closing the endpoint: still alive.
    assertTrue(endpoint.closeEntered.await(10, TimeUnit.SECONDS));
    AtomicReference<Throwable> outcome = new AtomicReference<>();
    Thread caller =
        new Thread(
            () -> {
              try {
                target.expose(segment, RemoteAccess.READ_WRITE);
              } catch (Throwable t) {
                outcome.set(t);
              }
            },
            "test-caller");
    caller.setDaemon(true);
    caller.start();
    caller.join(2_000);
    endpoint.closeGate.countDown();
    caller.join(BOUND.toMillis());
    closer.join(BOUND.toMillis());
    assertFalse(caller.isAlive(), "expose stayed blocked on a target that had drained for good");
    assertFalse(closer.isAlive());
    assertClosed((DmaException) outcome.get());
  }

  @Test
  void closeWakesATargetSleepingBetweenProgressCalls() {
    PassiveTarget target = start(Duration.ofHours(1));
    assertTimeoutPreemptively(Duration.ofSeconds(5), () -> target.close());
    assertEquals(1, endpoint.closes.get());
  }

  @Test
  void aCallWakesATargetSleepingBetweenProgressCalls() {
    try (PassiveTarget target = start(Duration.ofHours(1))) {
      MemorySegment segment = arena.allocate(4096);
      TargetRegion region =
          assertTimeoutPreemptively(
              Duration.ofSeconds(5), () -> target.expose(segment, RemoteAccess.READ_WRITE));
      assertTimeoutPreemptively(Duration.ofSeconds(5), () -> region.close());
    }
  }

  @Test
  void closeIsBoundedWhenTheProviderIsStuckAndQueuedCallsFail() throws Exception {
    Set<Thread> mine = targetThreads();
    PassiveTarget target = start(Duration.ZERO);
    Set<Thread> others = mine;
    mine = targetThreads();
    mine.removeAll(others);
    assertEquals(1, mine.size());
    endpoint.progressGate = new CountDownLatch(1); // the next progress() call blocks
    assertTrue(endpoint.progressEntered.await(10, TimeUnit.SECONDS));
    AtomicReference<Throwable> outcome = new AtomicReference<>();
    Thread caller =
        new Thread(
            () -> {
              try {
                target.insertPeer(new byte[] {1, 2, 3});
              } catch (Throwable t) {
                outcome.set(t);
              }
            },
            "test-caller");
    caller.setDaemon(true);
    caller.start();
    long started = System.nanoTime();
    assertTimeoutPreemptively(Duration.ofSeconds(5), () -> target.close(Duration.ofMillis(200)));
    assertTrue(System.nanoTime() - started < Duration.ofSeconds(3).toNanos());
    caller.join(BOUND.toMillis());
    assertFalse(caller.isAlive(), "a call queued behind a stuck provider stayed blocked");
    assertClosed((DmaException) outcome.get());
    // Once the provider returns, the thread closes the endpoint and ends by itself.
    endpoint.progressGate.countDown();
    for (Thread thread : mine) {
      thread.join(BOUND.toMillis());
      assertFalse(thread.isAlive(), "the target's thread was left running");
    }
    assertEquals(1, endpoint.closes.get());
    assertThrows(DmaException.class, () -> target.insertPeer(new byte[] {1}));
  }

  @Test
  void racingExposeAndCloseEveryCallReturns() throws Exception {
    for (int round = 0; round < 30; round++) {
      PassiveTarget target = start(Duration.ZERO);
      MemorySegment segment = arena.allocate(64);
      AtomicInteger exposed = new AtomicInteger();
      AtomicInteger refused = new AtomicInteger();
      AtomicReference<DmaException> wrongReason = new AtomicReference<>();
      List<Thread> callers = new ArrayList<>();
      CountDownLatch go = new CountDownLatch(1);
      for (int i = 0; i < 6; i++) {
        Thread caller =
            new Thread(
                () -> {
                  try {
                    // Bounded: a caller the test never releases ends, and the join below fails.
                    if (!go.await(10, TimeUnit.SECONDS)) {
                      return;
                    }
                  } catch (InterruptedException e) {
                    return;
                  }
                  for (int n = 0; n < 50; n++) {
                    try {
                      TargetRegion region = target.expose(segment, RemoteAccess.READ_WRITE);
                      assertNotNull(region.advertisement());
                      exposed.incrementAndGet();
                    } catch (DmaException failure) {
                      if (failure.reason() == DmaException.Reason.CLOSED) {
                        refused.incrementAndGet();
                      } else {
                        wrongReason.set(failure);
                      }
                    }
                  }
                });
        caller.setDaemon(true);
        caller.start();
        callers.add(caller);
      }
      go.countDown();
      // A jitter of 0 to 2 ms that varies where close lands among the calls, not a wait.
      Thread.sleep(round % 3);
      assertTimeoutPreemptively(BOUND, () -> target.close());
      for (Thread caller : callers) {
        caller.join(BOUND.toMillis());
        assertFalse(caller.isAlive(), "round " + round + ": a call never returned");
      }
      assertEquals(null, wrongReason.get(), "a refusal without reason CLOSED");
      assertEquals(300, exposed.get() + refused.get());
    }
  }

  @Test
  void theAdvertisementCarriesTheExposedLength() {
    try (PassiveTarget target = start(Duration.ZERO)) {
      TargetRegion region = target.expose(arena.allocate(12288), RemoteAccess.READ_WRITE);
      assertEquals(12288, region.advertisement().lengthBytes());
      region.close();
    }
  }

  /**
   * The core tests' loopback endpoint whose progress() and close() can be held on latches, as a
   * stuck provider.
   */
  private static final class GatedEndpoint extends LoopbackTestEndpoint {
    volatile CountDownLatch progressGate = new CountDownLatch(0);
    final CountDownLatch progressEntered = new CountDownLatch(1);
    volatile CountDownLatch closeGate = new CountDownLatch(0);
    final CountDownLatch closeEntered = new CountDownLatch(1);
    final AtomicInteger closes = new AtomicInteger();

    private static void await(CountDownLatch gate) {
      try {
        gate.await(30, TimeUnit.SECONDS);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }

    @Override
    public void progress() {
      CountDownLatch gate = progressGate;
      if (gate.getCount() > 0) {
        progressEntered.countDown();
        await(gate);
      }
    }

    @Override
    public void close() {
      closes.incrementAndGet();
      closeEntered.countDown();
      await(closeGate);
      super.close();
    }
  }
}
