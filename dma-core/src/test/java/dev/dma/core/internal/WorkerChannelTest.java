package dev.dma.core.internal;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The worker's one channel: FIFO with a closing gate, what wakes a parked worker, an offer waiting
 * for room that the close ends, and the close deadline. Every wait on another thread is a bounded
 * join; the helper threads are daemons, so one left blocked by a regression cannot keep the JVM
 * alive.
 */
@Timeout(value = 30, unit = TimeUnit.SECONDS)
class WorkerChannelTest {
  private static final Duration BOUND = Duration.ofSeconds(10);

  @Test
  void closeWakesAWorkerParkedOnAnEmptyChannel() throws Exception {
    WorkerChannel channel = new WorkerChannel(8);
    AtomicReference<Boolean> blocked = new AtomicReference<>();
    Thread worker = worker(channel, () -> blocked.set(channel.park()));
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
        worker(
            channel,
            () -> {
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

  @Test
  void aClosedChannelRefusesOffersAndDrains() {
    WorkerChannel channel = new WorkerChannel(8);
    channel.bind(Thread.currentThread());
    assertTrue(channel.offer("a"));
    assertFalse(channel.isDrained());
    channel.close();
    assertFalse(channel.offer("b"));
    assertFalse(channel.isDrained());
    assertEquals("a", channel.poll());
    assertTrue(channel.isDrained());
  }

  @Test
  void aParkedWorkerIsWokenByAnOffer() throws Exception {
    WorkerChannel channel = new WorkerChannel(8);
    AtomicInteger seen = new AtomicInteger();
    Thread worker =
        worker(
            channel,
            () -> {
              while (seen.get() < 1000) {
                if (channel.poll() != null) {
                  seen.incrementAndGet();
                } else if (channel.isDrained()) {
                  return;
                } else {
                  channel.park();
                }
              }
            });
    // A worker that missed a wake-up parks for good with the channel full: fail, don't spin.
    long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
    for (int i = 0; i < 1000; i++) {
      while (!channel.offer(i)) {
        assertTrue(System.nanoTime() < deadline, "the worker stopped taking at " + i);
        Thread.onSpinWait();
      }
      if (i % 100 == 0) {
        Thread.sleep(1);
      }
    }
    assertTrue(worker.join(BOUND), "the worker took every message");
    assertEquals(1000, seen.get());
  }

  @Test
  void theWorkerOfferingToItselfOnAFullQueueNeverWaits() {
    WorkerChannel channel = new WorkerChannel(2);
    channel.bind(Thread.currentThread());
    // The worker's own completion hook resubmitting while the queue is full: waiting for room
    // would deadlock, since only this thread makes room.
    for (int i = 0; i < 10; i++) {
      assertTrue(channel.offer(i));
    }
    for (int i = 0; i < 10; i++) {
      assertEquals(i, channel.poll());
    }
    channel.close();
    assertTrue(channel.isDrained());
  }

  @Test
  void theWorkersOwnOffersKeepTheirOrderWhenTheQueueFillsAndEmpties() {
    WorkerChannel channel = new WorkerChannel(4); // a power of two: exactly 4 fit
    channel.bind(Thread.currentThread());
    for (int i = 0; i < 4; i++) {
      assertTrue(channel.offer(i));
    }
    assertTrue(channel.offer(4)); // the queue is full: into the overflow
    assertEquals(0, channel.poll()); // room in the queue again
    assertTrue(channel.offer(5)); // must still go behind 4
    for (int i = 1; i <= 5; i++) {
      assertEquals(i, channel.poll());
    }
    assertNull(channel.poll());
    channel.close();
    assertFalse(channel.offer(6), "a closed channel refuses the worker's own offers too");
    assertTrue(channel.isDrained());
  }

  /** A daemon worker thread bound to {@code channel}: one left parked cannot keep the JVM alive. */
  private static Thread worker(WorkerChannel channel, Runnable body) {
    return Thread.ofPlatform()
        .daemon()
        .start(
            () -> {
              channel.bind(Thread.currentThread());
              body.run();
            });
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
