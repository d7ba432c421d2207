package dev.dma.core.internal.peers;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dma.core.internal.LongObjectMap;
import java.util.Arrays;
import java.util.HashMap;
import java.util.Map;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

@Timeout(60) // pure computation, a few seconds at most; a regression that loops fails here
class HandleIndexTest {
  private record Held(long handle, byte[] address) {}

  /** The handle {@code index} gives for these bytes, or -1. */
  private static long lookUp(HandleIndex index, long clientId, byte[] address) {
    int slot = index.find(clientId, address);
    return slot < 0 ? -1 : index.handleAt(slot);
  }

  private static long expected(Map<Long, Held> model, long clientId, byte[] address) {
    Held held = model.get(clientId);
    return held != null && Arrays.equals(held.address(), address) ? held.handle() : -1;
  }

  @Test
  void findsExactlyWhatAMapOfClientToHandleAndAddressHolds() {
    HandleIndex index = checkAgainstAModel(7, 0);
    assertFalse(index.compact(), "random handles need the wide layout");
  }

  @Test
  void compactSlotsFindExactlyWhatTheModelHolds() {
    HandleIndex index = checkAgainstAModel(11, Integer.MAX_VALUE);
    assertTrue(index.compact(), "short addresses and small handles stay compact");
  }

  @Test
  void switchingFromCompactToWideMidwayKeepsEveryClient() {
    HandleIndex index = checkAgainstAModel(13, 100_000);
    assertFalse(index.compact());
  }

  /**
   * Runs random puts, removals, touches and lookups against a map; from step {@code wideFrom} on,
   * addresses up to past the longest kept and handles of any size, before it only what a compact
   * slot holds (up to 16 bytes, handles under 2^56).
   */
  private static HandleIndex checkAgainstAModel(long seed, int wideFrom) {
    HandleIndex index = new HandleIndex();
    Map<Long, Held> model = new HashMap<>();
    SplittableRandom random = new SplittableRandom(seed);
    for (int step = 0; step < 200_000; step++) {
      boolean wide = step >= wideFrom;
      // A small id range forces collisions, long probe runs, backward shifts and growth.
      long clientId = random.nextInt(400) - 200L;
      // Lengths around every word boundary, past the longest kept, and few distinct bytes, so a
      // lookup often carries another length or one differing byte.
      int longest = wide ? HandleIndex.MAX_ADDRESS + 4 : HandleIndex.COMPACT_MAX_ADDRESS;
      byte[] address = new byte[1 + random.nextInt(longest)];
      for (int b = 0; b < address.length; b++) {
        address[b] = (byte) random.nextInt(2);
      }
      switch (random.nextInt(4)) {
        case 0 -> {
          long handle = wide ? random.nextLong() : random.nextLong(1L << HandleIndex.HANDLE_BITS);
          index.put(clientId, handle, address);
          model.put(clientId, new Held(handle, address));
        }
        case 1 -> {
          index.remove(clientId);
          model.remove(clientId);
        }
        case 2 -> {
          index.touch(clientId);
          index.touch(clientId + 1);
        }
        default -> {
          Held held = model.get(clientId);
          byte[] asked = held != null && random.nextBoolean() ? held.address().clone() : address;
          long found = lookUp(index, clientId, asked);
          long wanted = expected(model, clientId, asked);
          if (asked.length <= HandleIndex.MAX_ADDRESS) {
            assertEquals(wanted, found, "client " + clientId + " at step " + step);
          } else {
            assertEquals(-1, found, "an address too long to keep is never found");
          }
        }
      }
    }
    for (Map.Entry<Long, Held> held : model.entrySet()) {
      byte[] address = held.getValue().address();
      long found = lookUp(index, held.getKey(), address);
      assertEquals(
          address.length <= HandleIndex.MAX_ADDRESS ? held.getValue().handle() : -1, found);
    }
    assertTrue(index.size() <= model.size());
    HandleIndex filled = index;
    index.clear();
    assertEquals(0, index.size());
    return filled;
  }

  @Test
  void aCompactTableWidensForALongAddressOrALargeHandle() {
    for (boolean longAddress : new boolean[] {true, false}) {
      HandleIndex index = new HandleIndex();
      byte[][] addresses = new byte[100][];
      for (int c = 0; c < 100; c++) {
        addresses[c] = new byte[] {(byte) c, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
        index.put(c, 1000 + c, addresses[c]);
      }
      assertTrue(index.compact());
      if (longAddress) {
        index.put(500, 7, new byte[28]);
      } else {
        index.put(500, -2, new byte[16]);
      }
      assertFalse(index.compact());
      for (int c = 0; c < 100; c++) {
        assertEquals(1000 + c, lookUp(index, c, addresses[c]), "client " + c);
      }
      assertEquals(longAddress ? 7 : -2, lookUp(index, 500, new byte[longAddress ? 28 : 16]));
      assertEquals(101, index.size());
    }
  }

  @Test
  void aClientWhoseAddressGrewTooLongIsForgotten() {
    HandleIndex index = new HandleIndex();
    byte[] shortAddress = new byte[16];
    index.put(3, 11, shortAddress);
    assertEquals(11, lookUp(index, 3, shortAddress));
    index.put(3, 12, new byte[HandleIndex.MAX_ADDRESS + 1]);
    assertEquals(-1, lookUp(index, 3, shortAddress));
    assertEquals(0, index.size());
  }

  @Test
  void everyByteCounts() {
    HandleIndex index = new HandleIndex();
    byte[] address = new byte[32];
    Arrays.fill(address, (byte) 0x5a);
    index.put(Long.MIN_VALUE, 9, address);
    for (int b = 0; b < address.length; b++) {
      byte[] other = address.clone();
      other[b] ^= (byte) 0x80;
      assertEquals(-1, lookUp(index, Long.MIN_VALUE, other), "byte " + b);
    }
    assertEquals(-1, lookUp(index, Long.MIN_VALUE, Arrays.copyOf(address, 31)));
    assertEquals(-1, lookUp(index, Long.MIN_VALUE, Arrays.copyOf(address, 33)));
    assertEquals(9, lookUp(index, Long.MIN_VALUE, address.clone()));
  }

  // ------------------------------------------ mutation testing: probe runs across the array's end

  /**
   * The first client id from {@code from} on whose hash has {@code low} as its low 16 bits: its
   * home is the last slot ({@code 0xffff}) or the first ({@code 0}) of any table up to 65,536
   * slots.
   */
  private static long idWithHashBits(int low, long from) {
    for (long id = from; ; id++) {
      if ((LongObjectMap.hash(id) & 0xffff) == low) {
        return id;
      }
    }
  }

  /** A 16-byte address (compact) or a 24-byte one (wide), with {@code tag} in it. */
  private static byte[] address(boolean wide, int tag) {
    byte[] address = new byte[wide ? 24 : 16];
    address[0] = (byte) tag;
    address[address.length - 1] = (byte) (tag + 1);
    return address;
  }

  /**
   * A removal from the last slot closes the gap with the slots after the wrap: a client there that
   * wrapped from the last slot moves back into it, and a client at its own home (slot 0) stays.
   */
  @Test
  void removingFromTheLastSlotKeepsTheClientsPastTheWrapFindable() {
    long last = idWithHashBits(0xffff, 0);
    long alsoLast = idWithHashBits(0xffff, last + 1);
    long first = idWithHashBits(0, 0);
    for (boolean wide : new boolean[] {false, true}) {
      HandleIndex wrapped = new HandleIndex();
      wrapped.put(last, 1, address(wide, 1));
      wrapped.put(alsoLast, 2, address(wide, 2)); // its home is taken: it wraps to slot 0
      assertEquals(!wide, wrapped.compact());
      wrapped.remove(last);
      assertEquals(2, lookUp(wrapped, alsoLast, address(wide, 2)), "wide " + wide);
      assertEquals(-1, lookUp(wrapped, last, address(wide, 1)));
      assertEquals(1, wrapped.size());

      HandleIndex atHome = new HandleIndex();
      atHome.put(last, 1, address(wide, 1));
      atHome.put(first, 3, address(wide, 3));
      atHome.remove(last);
      assertEquals(3, lookUp(atHome, first, address(wide, 3)), "wide " + wide);
      assertEquals(1, atHome.size());
    }
  }

  /**
   * {@code touch} reads the word that marks a client's first slot taken: zero while it is free, not
   * zero once the client is there, whatever the slot and the layout.
   */
  @Test
  void touchReadsTheTakenMarkOfTheClientsFirstSlot() {
    for (boolean wide : new boolean[] {false, true}) {
      for (int home : new int[] {0, 1, 2, 3, 7, 0xffff}) {
        long id = idWithHashBits(home, 0);
        HandleIndex index = new HandleIndex();
        if (wide) {
          index.put(id + 1_000_000_007L, 5, new byte[HandleIndex.MAX_ADDRESS]);
          index.remove(id + 1_000_000_007L);
        }
        assertEquals(!wide, index.compact());
        assertEquals(0, index.touch(id), "free, home " + home + ", wide " + wide);
        index.put(id, 9, address(wide, home));
        assertNotEquals(0, index.touch(id), "taken, home " + home + ", wide " + wide);
      }
    }
  }

  @Test
  void clearForgetsEveryClient() {
    for (boolean wide : new boolean[] {false, true}) {
      HandleIndex index = new HandleIndex();
      for (int c = 0; c < 20; c++) {
        index.put(c, 100 + c, address(wide, c));
      }
      index.clear();
      assertEquals(0, index.size());
      for (int c = 0; c < 20; c++) {
        assertEquals(-1, lookUp(index, c, address(wide, c)), "client " + c);
        assertEquals(0, index.touch(c));
      }
      index.put(4, 44, address(wide, 4));
      assertEquals(44, lookUp(index, 4, address(wide, 4)));
      assertEquals(1, index.size());
    }
  }
}
