package dev.dma.core.internal;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.HashMap;
import java.util.Map;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

class LongObjectMapTest {
  @Test
  void behavesLikeAHashMapUnderRandomOperations() {
    LongObjectMap<String> map = new LongObjectMap<>(2);
    Map<Long, String> expected = new HashMap<>();
    SplittableRandom random = new SplittableRandom(42);
    for (int step = 0; step < 200_000; step++) {
      // A small key range forces collisions, long probe runs and backward shifts.
      long key = random.nextInt(300) - 150L;
      switch (random.nextInt(3)) {
        case 0 -> assertEquals(expected.put(key, "v" + step), map.put(key, "v" + step));
        case 1 -> assertEquals(expected.remove(key), map.remove(key));
        default -> assertEquals(expected.get(key), map.get(key));
      }
      assertEquals(expected.size(), map.size());
    }
    for (Map.Entry<Long, String> entry : expected.entrySet()) {
      assertEquals(entry.getValue(), map.get(entry.getKey()));
    }
    int[] seen = {0};
    map.forEachValue(value -> seen[0]++);
    assertEquals(expected.size(), seen[0]);
    map.clear();
    assertEquals(0, map.size());
    assertNull(map.get(0));
  }

  @Test
  void extremeKeysWork() {
    LongObjectMap<String> map = new LongObjectMap<>();
    map.put(Long.MIN_VALUE, "min");
    map.put(Long.MAX_VALUE, "max");
    map.put(0, "zero");
    assertEquals("min", map.get(Long.MIN_VALUE));
    assertEquals("max", map.get(Long.MAX_VALUE));
    assertEquals("zero", map.remove(0));
    assertNull(map.get(0));
  }

  /**
   * The hash is Murmur3's 64-bit finalizer (fmix64), low 32 bits: what spreads sequential client
   * ids over the table here and in the peer table's handle index. Expected values from an
   * independent fmix64.
   */
  @Test
  @Timeout(10)
  void theHashIsMurmur3sFinalizer() {
    assertEquals(0, LongObjectMap.hash(0));
    assertEquals(885181228, LongObjectMap.hash(1));
    assertEquals(1694925799, LongObjectMap.hash(2));
    assertEquals(-116674823, LongObjectMap.hash(12345));
    assertEquals(1266835233, LongObjectMap.hash(-1));
    assertEquals(-1996346134, LongObjectMap.hash(0x0123456789abcdefL));
  }

  /**
   * The first key from {@code from} on whose hash has {@code low} as its low 16 bits: its home is
   * the last slot ({@code 0xffff}) or the first ({@code 0}) of any table up to 65,536 slots.
   */
  private static long keyWithHashBits(int low, long from) {
    for (long key = from; ; key++) {
      if ((LongObjectMap.hash(key) & 0xffff) == low) {
        return key;
      }
    }
  }

  /**
   * A removal from the last slot closes the gap with the entries after the wrap: one that wrapped
   * from the last slot moves back into it, one at its own home (slot 0) stays.
   */
  @Test
  @Timeout(10)
  void removingFromTheLastSlotKeepsTheEntriesPastTheWrapFindable() {
    long last = keyWithHashBits(0xffff, 0);
    long alsoLast = keyWithHashBits(0xffff, last + 1);
    long first = keyWithHashBits(0, 0);

    LongObjectMap<String> wrapped = new LongObjectMap<>();
    wrapped.put(last, "last");
    wrapped.put(alsoLast, "wrapped"); // its home is taken: it wraps to slot 0
    assertEquals("last", wrapped.remove(last));
    assertEquals("wrapped", wrapped.get(alsoLast));
    assertNull(wrapped.get(last));
    assertEquals("wrapped", wrapped.remove(alsoLast));
    assertTrue(wrapped.isEmpty());

    LongObjectMap<String> atHome = new LongObjectMap<>();
    atHome.put(last, "last");
    atHome.put(first, "first");
    assertEquals("last", atHome.remove(last));
    assertEquals("first", atHome.get(first));
    assertEquals(1, atHome.size());
  }
}
