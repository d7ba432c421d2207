package dev.dma.core.internal;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The joins that close uses: they wait through interrupts, keep the interrupt for the caller, and
 * the bounded one returns within its bound. The threads waited for are daemons released in {@code
 * AfterEach}, so nothing is left running.
 */
// SEPARATE_THREAD: the joins under test ignore interrupts, so only a time-out on another thread
// ends a test whose join never returns.
@Timeout(value = 30, unit = TimeUnit.SECONDS, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
class ThreadsTest {
  private final CountDownLatch release = new CountDownLatch(1);

  @BeforeEach
  void noInterruptComesIn() {
    Thread.interrupted(); // another test class on this thread may have left one
  }

  @AfterEach
  void releaseThreads() {
    release.countDown();
    Thread.interrupted(); // leave no interrupt behind for the next test
  }

  private Thread sleeper() {
    return Thread.ofPlatform()
        .daemon()
        .start(
            () -> {
              try {
                release.await();
              } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
              }
            });
  }

  @Test
  void theBoundedJoinGivesUpAtItsBoundAndSaysSo() {
    Thread alive = sleeper();
    long started = System.nanoTime();
    assertFalse(Threads.joinUninterruptibly(alive, Duration.ofMillis(50)), "still alive");
    assertTrue(
        System.nanoTime() - started >= TimeUnit.MILLISECONDS.toNanos(50), "waited its bound");
    assertTrue(alive.isAlive());
    release.countDown();
    assertTrue(Threads.joinUninterruptibly(alive, Duration.ofSeconds(10)), "ended: true");
    assertFalse(alive.isAlive());
  }

  @Test
  void theBoundedJoinReturnsTrueAtOnceForAThreadAlreadyEnded() throws Exception {
    Thread ended = Thread.ofPlatform().start(() -> {});
    assertTrue(ended.join(Duration.ofSeconds(10)));
    assertTrue(Threads.joinUninterruptibly(ended, Duration.ZERO));
  }

  @Test
  void anInterruptDoesNotEndTheBoundedJoinAndIsKeptForTheCaller() {
    Thread alive = sleeper();
    Thread.currentThread().interrupt();
    assertFalse(Threads.joinUninterruptibly(alive, Duration.ofMillis(50)));
    assertTrue(Thread.interrupted(), "the interrupt is kept");
    // Interrupted while waiting (not before): still waits, then keeps it.
    Thread self = Thread.currentThread();
    Thread interrupter =
        Thread.ofPlatform()
            .daemon()
            .start(
                () -> {
                  self.interrupt();
                  release.countDown();
                });
    assertTrue(Threads.joinUninterruptibly(alive, Duration.ofSeconds(10)));
    // The interrupter has ended before the flag is read, so no interrupt can come later.
    assertTrue(Threads.joinUninterruptibly(interrupter, Duration.ofSeconds(10)));
    assertTrue(Thread.interrupted(), "the interrupt is kept");
  }

  @Test
  void theUnboundedJoinWaitsThroughAnInterruptAndKeepsIt() throws Exception {
    Thread worker = sleeper(); // ends only once released
    Thread self = Thread.currentThread();
    Thread releaser =
        Thread.ofPlatform()
            .daemon()
            .start(
                () -> {
                  self.interrupt(); // mid-join: must not end it
                  try {
                    Thread.sleep(50); // lets the join begin first; either order must pass
                  } catch (InterruptedException ignored) {
                    // a daemon helper: nothing to clean up
                  }
                  release.countDown();
                });
    Threads.joinUninterruptibly(worker);
    assertFalse(worker.isAlive(), "it returned only once the thread had ended");
    assertTrue(Thread.interrupted(), "the interrupt is kept for the caller");
    assertTrue(releaser.join(Duration.ofSeconds(10)));
  }
}
