package dev.dma.core.internal;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.util.HashMap;
import java.util.Map;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

class ClientMapTest {
  @Test
  void behavesLikeAHashMapUnderRandomOperations() {
    // Four slots for up to 300 keys: most keys overflow, and slots free up under overflowed keys.
    ClientMap<String> map = new ClientMap<>(4);
    Map<Long, String> expected = new HashMap<>();
    SplittableRandom random = new SplittableRandom(42);
    for (int step = 0; step < 200_000; step++) {
      long key = random.nextInt(300) - 150L;
      switch (random.nextInt(3)) {
        case 0 -> {
          expected.put(key, "v" + step);
          map.put(key, "v" + step);
        }
        case 1 -> assertEquals(expected.remove(key), map.remove(key));
        default -> assertEquals(expected.get(key), map.get(key));
      }
      assertEquals(expected.size(), map.size());
    }
    for (Map.Entry<Long, String> entry : expected.entrySet()) {
      assertEquals(entry.getValue(), map.get(entry.getKey()));
    }
  }

  @Test
  void aKeyThatOverflowedIsKeptOnceWhenItsSlotFreesUp() {
    ClientMap<String> map = new ClientMap<>(1);
    map.put(1, "one");
    map.put(2, "two"); // slot taken by 1: overflows
    assertEquals("one", map.remove(1)); // its slot is free now, 2 still in the overflow map
    assertEquals("two", map.get(2));
    map.put(2, "two again"); // moves into its slot
    assertEquals(1, map.size());
    assertEquals("two again", map.remove(2));
    assertNull(map.get(2));
    assertNull(map.remove(2));
    assertEquals(0, map.size());
  }

  @Test
  void slotsAreAPowerOfTwoWithinBounds() {
    assertEquals(256, ClientMap.slotsFor(1));
    assertEquals(4096, ClientMap.slotsFor(64));
    assertEquals(16_384, ClientMap.slotsFor(65_536));
    assertThrows(IllegalArgumentException.class, () -> new ClientMap<String>(3));
  }
}
