package dev.dma.fake;

import static dev.dma.spi.FabricEndpoint.POSTED;
import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.dma.spi.CompletionSink;
import java.lang.foreign.MemorySegment;
import org.junit.jupiter.api.Test;

/**
 * The plain post-to-reap path must stay cheap enough for a test to push a million transfers through
 * a fabric service in a few seconds. Asserts only counts, never time: the elapsed time is printed
 * for whoever wonders.
 */
class FakeThroughputTest {
  private static final int OPS = 1_000_000;
  private static final int SLOTS = 64;

  @Test
  void aMillionSmallWritesPostAndReap() {
    try (Pair pair = new Pair(SLOTS, 64 * 64)) {
      MemorySegment local = pair.local(64, 1);
      long key = pair.region.advertisement().remoteKey();
      int[] free = new int[SLOTS];
      int[] freeCount = {SLOTS};
      for (int i = 0; i < SLOTS; i++) {
        free[i] = i;
      }
      CompletionSink sink =
          new CompletionSink() {
            @Override
            public void completed(int slot) {
              free[freeCount[0]++] = slot;
            }

            @Override
            public void failed(int slot, int errno, int providerErrno, String message) {
              throw new AssertionError(message);
            }
          };
      long started = System.nanoTime();
      int posted = 0;
      while (posted < OPS) {
        while (freeCount[0] > 0 && posted < OPS) {
          int slot = free[--freeCount[0]];
          int code =
              pair.initiator.postWrite(slot, pair.peer, local.address(), 64, 0, slot * 64L, key);
          if (code != POSTED) {
            throw new AssertionError("post returned " + code);
          }
          posted++;
        }
        pair.initiator.reap(sink, 10);
      }
      while (freeCount[0] < SLOTS) {
        pair.initiator.reap(sink, 10);
      }
      long elapsedMs = (System.nanoTime() - started) / 1_000_000;
      System.out.println(
          "fake fabric: " + OPS + " writes posted and reaped in " + elapsedMs + " ms");
      FakeCounters counters = pair.counters();
      assertEquals(OPS, counters.posts());
      assertEquals(OPS, counters.completions());
      assertEquals(64L * OPS, counters.bytesWritten());
      assertEquals(0, counters.violations(), counters.lastViolation());
    }
  }
}
