package dev.dma.core.internal;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

class MpscQueueTest {
  @Test
  void isFifoAndBounded() {
    MpscQueue<Integer> queue = new MpscQueue<>(4);
    assertEquals(4, queue.capacity());
    assertTrue(queue.isEmpty());
    for (int i = 0; i < 4; i++) {
      assertTrue(queue.offer(i));
    }
    assertFalse(queue.offer(99));
    assertEquals(0, queue.poll());
    assertTrue(queue.offer(4));
    for (int i = 1; i <= 4; i++) {
      assertEquals(i, queue.poll());
    }
    assertNull(queue.poll());
    assertTrue(queue.isEmpty());
  }

  @Test
  void everyElementOfEveryProducerArrivesOnceInProducerOrder() throws Exception {
    int producers = 4;
    int perProducer = 200_000;
    MpscQueue<long[]> queue = new MpscQueue<>(1024);
    // Bounded on both sides: a lost element must fail the test, not spin the consumer (or, once
    // it gave up, the producers on a full queue) for ever.
    long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
    List<Thread> threads = new ArrayList<>();
    for (int p = 0; p < producers; p++) {
      int producer = p;
      threads.add(
          Thread.ofPlatform()
              .start(
                  () -> {
                    for (int i = 0; i < perProducer; i++) {
                      long[] element = {producer, i};
                      while (!queue.offer(element)) {
                        if (System.nanoTime() > deadline) {
                          return;
                        }
                        Thread.onSpinWait();
                      }
                    }
                  }));
    }
    long[] next = new long[producers];
    long received = 0;
    while (received < (long) producers * perProducer) {
      long[] element = queue.poll();
      if (element == null) {
        assertTrue(System.nanoTime() < deadline, "only " + received + " elements within 60 s");
        Thread.onSpinWait();
        continue;
      }
      assertEquals(next[(int) element[0]]++, element[1]);
      received++;
    }
    for (Thread thread : threads) {
      assertTrue(thread.join(Duration.ofSeconds(10)), "a producer did not finish");
    }
    assertNull(queue.poll());
  }
}
