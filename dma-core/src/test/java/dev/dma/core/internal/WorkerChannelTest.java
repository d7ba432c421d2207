package dev.dma.core.internal;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The worker's channel at its edges: what wakes a parked worker, an offer waiting for room that the
 * close ends, and the close deadline. Every wait on another thread is a bounded join; the helper
 * threads are daemons, so one left blocked by a regression cannot keep the JVM alive.
 */
@Timeout(value = 30, unit = TimeUnit.SECONDS)
class WorkerChannelTest {
  private static final Duration BOUND = Duration.ofSeconds(10);

  @Test
  void closeWakesAWorkerParkedOnAnEmptyChannel() throws Exception {
    WorkerChannel channel = new WorkerChannel(8);
    AtomicReference<Boolean> blocked = new AtomicReference<>();
    Thread worker =
        Thread.ofPlatform()
            .daemon()
            .start(
                () -> {
                  channel.bind(Thread.currentThread());
                  blocked.set(channel.park());
                });
    awaitParked(worker);
    assertFalse(channel.isClosed());
    channel.close();
    assertTrue(channel.isClosed());
    assertTrue(worker.join(BOUND), "close() woke the parked worker");
    assertEquals(Boolean.TRUE, blocked.get(), "park() says it blocked");
  }

  @Test
  void parkReturnsAtOnceWhenAMessageIsWaitingOrTheChannelIsClosed() {
    WorkerChannel channel = new WorkerChannel(8);
    channel.bind(Thread.currentThread());
    assertTrue(channel.offer("m"));
    assertFalse(channel.park(), "a message is waiting: no block");
    assertEquals("m", channel.poll());
    channel.close();
    assertFalse(channel.park(), "closed: no block");
  }

  @Test
  void anOfferWaitingForRoomFailsOnceTheChannelCloses() throws Exception {
    WorkerChannel channel = new WorkerChannel(4); // a power of two: exactly 4 fit
    channel.bind(Thread.currentThread()); // this thread is the consumer; it never polls here
    for (String each : new String[] {"a", "b", "c", "d"}) {
      assertTrue(channel.offer(each));
    }
    AtomicReference<Boolean> accepted = new AtomicReference<>();
    AtomicBoolean started = new AtomicBoolean();
    Thread producer =
        Thread.ofPlatform()
            .daemon()
            .start(
                () -> {
                  started.set(true);
                  accepted.set(channel.offer("e"));
                });
    long until = System.nanoTime() + BOUND.toNanos();
    while (!started.get() && System.nanoTime() < until) {
      Thread.onSpinWait();
    }
    assertFalse(producer.join(Duration.ofMillis(50)), "a full queue makes the producer wait");
    channel.close();
    assertTrue(producer.join(BOUND), "the close ended the wait");
    assertEquals(Boolean.FALSE, accepted.get(), "refused: the caller keeps its message");
    for (String each : new String[] {"a", "b", "c", "d"}) {
      assertEquals(each, channel.poll());
    }
    assertNull(channel.poll(), "the refused message never landed");
    assertTrue(channel.isDrained());
  }

  @Test
  void anOfferWakesAWorkerParkedForABoundedTime() throws Exception {
    WorkerChannel channel = new WorkerChannel(8);
    AtomicReference<Object> taken = new AtomicReference<>();
    Thread worker =
        Thread.ofPlatform()
            .daemon()
            .start(
                () -> {
                  channel.bind(Thread.currentThread());
                  // Far longer than the test's bound: only the offer's unpark ends it in time.
                  channel.parkNanos(TimeUnit.SECONDS.toNanos(60));
                  taken.set(channel.poll());
                });
    awaitParked(worker);
    assertTrue(channel.offer("wake"));
    assertTrue(worker.join(BOUND), "the offer woke the worker");
    assertEquals("wake", taken.get());
  }

  @Test
  void theFirstCloseDeadlineHoldsAndIsSeenOncePast() {
    WorkerChannel channel = new WorkerChannel(8);
    assertFalse(channel.closeDeadlinePassed(), "no deadline before a close");
    long now = System.nanoTime();
    channel.close(now + TimeUnit.HOURS.toNanos(1));
    assertTrue(channel.isClosed());
    assertFalse(channel.closeDeadlinePassed(), "an hour away");
    channel.close(now - 1); // a second close cannot move the promised wait
    assertFalse(channel.closeDeadlinePassed(), "the first deadline holds");

    WorkerChannel past = new WorkerChannel(8);
    past.close(System.nanoTime() - 1);
    assertTrue(past.closeDeadlinePassed());
    WorkerChannel plain = new WorkerChannel(8);
    plain.close();
    assertFalse(plain.closeDeadlinePassed(), "close() sets no deadline");
  }

  /** Waits (bounded) until {@code thread} is parked, so the wake-up under test is needed. */
  private static void awaitParked(Thread thread) throws InterruptedException {
    long until = System.nanoTime() + BOUND.toNanos();
    while (thread.getState() != Thread.State.WAITING
        && thread.getState() != Thread.State.TIMED_WAITING) {
      assertTrue(System.nanoTime() < until, "the worker parked within the bound");
      Thread.sleep(1);
    }
  }
}
