package dev.dma.core.internal;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The queue's capacity, on one thread: a requested capacity rounds up to a power of two, and the
 * queue then holds exactly that many elements, lap after lap. Separate from {@code MpscQueueTest},
 * whose cross-thread case mutation testing leaves out (docs/mutation.md), so that this runs there.
 */
@Timeout(10)
class MpscQueueCapacityTest {
  @Test
  void aCapacityRoundsUpToAPowerOfTwoAndIsExactlyWhatTheQueueHolds() {
    int[][] requestedAndHeld = {{4, 4}, {5, 8}, {8, 8}, {1000, 1024}, {1024, 1024}};
    for (int[] pair : requestedAndHeld) {
      MpscQueue<Integer> queue = new MpscQueue<>(pair[0]);
      assertEquals(pair[1], queue.capacity(), "requested " + pair[0]);
      for (int lap = 0; lap < 3; lap++) {
        for (int i = 0; i < pair[1]; i++) {
          assertTrue(queue.offer(i), "element " + i + " of lap " + lap);
        }
        assertFalse(queue.offer(-1), "full at " + pair[1]);
        for (int i = 0; i < pair[1]; i++) {
          assertEquals(i, queue.poll());
        }
        assertNull(queue.poll());
        assertTrue(queue.isEmpty());
      }
    }
  }
}
