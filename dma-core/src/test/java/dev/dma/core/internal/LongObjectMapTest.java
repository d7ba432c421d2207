package dev.dma.core.internal;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

import java.util.HashMap;
import java.util.Map;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

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
}
