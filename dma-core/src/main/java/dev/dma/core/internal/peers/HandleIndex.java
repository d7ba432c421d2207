package dev.dma.core.internal.peers;

import dev.dma.core.internal.LongObjectMap;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteOrder;
import java.util.Arrays;

/**
 * Client id to address-vector handle and address bytes, all inline in one slot of a flat {@code
 * long[]}: what {@link PeerTable#handle} reads on every post of a known client. The map it mirrors
 * ({@code PeerTable}'s client to entry) costs a post three dependent cache misses once the clients
 * outgrow the cache (the key and value arrays, the entry, the entry's address array); a slot here
 * costs one, read at an index the client id alone gives. Measured with {@code
 * ManyClientsBenchmark}: that chain was two fifths of a transfer's time at 100,000 clients.
 *
 * <p>Two slot layouts, one per table. Compact, 32 bytes, while every address is at most {@value
 * #COMPACT_MAX_ADDRESS} bytes (tcp's IPv4 addresses) and every handle fits in {@value #HANDLE_BITS}
 * bits: client id, then the address length plus one in the top byte over the handle, then the
 * address in two little-endian words, zero-padded. Wide, 64 bytes, from the first longer address or
 * larger handle on (the table is rebuilt once): client id, handle, address length plus one, then up
 * to {@value #WORDS} words. In both a zero length word marks a free slot. Addresses longer than
 * {@value #MAX_ADDRESS} bytes are not kept (their posts take the map). The per-transfer cost steps
 * up once the slots outgrow the core's L2 cache ({@code ManyClientsBenchmark}: flat to about 6,000
 * clients with 64-byte slots), so the compact layout keeps twice the clients there. Slots start
 * {@value #PAD} longs into the array, so in an array that starts a cache line (a large one does: G1
 * places it at a region's start) no slot straddles two lines.
 *
 * <p>Linear probing with backward-shift deletion, power-of-two capacity, at most three quarters
 * full: 43 to 85 bytes a client compact, 85 to 170 wide.
 *
 * <p>Not thread-safe: owned by the fabric worker thread, as the table.
 */
final class HandleIndex {
  /** Address words a wide slot holds. */
  static final int WORDS = 5;

  /** The longest address kept, in bytes (EFA's are 32, tcp's 16 or 28). */
  static final int MAX_ADDRESS = WORDS * 8;

  /** The longest address a compact slot holds, in bytes. */
  static final int COMPACT_MAX_ADDRESS = 16;

  /** Handle bits a compact slot holds; the byte above them is the address length plus one. */
  static final int HANDLE_BITS = 56;

  private static final long HANDLE_MASK = (1L << HANDLE_BITS) - 1;
  private static final int COMPACT_SHIFT = 2; // 4 longs: id, length + 1 over handle, 2 words
  private static final int WIDE_SHIFT = 3; // 8 longs: id, handle, length + 1, WORDS words, spare
  private static final int PAD = 6; // 16-byte array header + 48 bytes: slot 0 starts a line
  private static final VarHandle LONGS =
      MethodHandles.byteArrayViewVarHandle(long[].class, ByteOrder.LITTLE_ENDIAN);

  private int shift = COMPACT_SHIFT;
  private long[] slots = new long[PAD + (16 << COMPACT_SHIFT)];
  private int mask = 15;
  private int size;
  private final long[] scratch = new long[WORDS]; // an address's words, for put

  HandleIndex() {}

  /**
   * Whether the table holds compact slots (for tests).
   *
   * @return true until a longer address or a larger handle was put
   */
  boolean compact() {
    return shift == COMPACT_SHIFT;
  }

  /** Word {@code w} of an address, little-endian, zero past its end. */
  private static long word(byte[] address, int w) {
    int from = w << 3;
    if (from + 8 <= address.length) {
      return (long) LONGS.get(address, from);
    }
    long value = 0;
    for (int i = address.length - 1; i >= from; i--) {
      value = value << 8 | (address[i] & 0xff);
    }
    return value;
  }

  /** The word of a slot that is zero when the slot is free. */
  private int lengthWord() {
    return lengthWord(shift);
  }

  /** The word that is zero when a slot is free, in layout {@code shift}. */
  private static int lengthWord(int shift) {
    return shift == COMPACT_SHIFT ? 1 : 2;
  }

  /**
   * The slot holding {@code clientId} with exactly these address bytes, or -1.
   *
   * @param clientId the client
   * @param address the address a transfer carries
   * @return the slot, for {@link #handleAt}, or -1
   */
  int find(long clientId, byte[] address) {
    long[] s = slots;
    int m = mask;
    if (shift == COMPACT_SHIFT) {
      if (address.length > COMPACT_MAX_ADDRESS) {
        return -1;
      }
      long length = (address.length + 1L) << HANDLE_BITS;
      for (int index = LongObjectMap.hash(clientId) & m; ; index = (index + 1) & m) {
        int base = PAD + (index << COMPACT_SHIFT);
        long tagged = s[base + 1];
        if (tagged == 0) {
          return -1;
        }
        if (s[base] == clientId) {
          boolean same =
              (tagged & ~HANDLE_MASK) == length
                  && s[base + 2] == word(address, 0)
                  && (address.length <= 8 || s[base + 3] == word(address, 1));
          return same ? index : -1;
        }
      }
    }
    for (int index = LongObjectMap.hash(clientId) & m; ; index = (index + 1) & m) {
      int base = PAD + (index << WIDE_SHIFT);
      long length = s[base + 2];
      if (length == 0) {
        return -1;
      }
      if (s[base] == clientId) {
        if (length != address.length + 1L) {
          return -1;
        }
        for (int w = 0, words = (address.length + 7) >>> 3; w < words; w++) {
          if (s[base + 3 + w] != word(address, w)) {
            return -1;
          }
        }
        return index;
      }
    }
  }

  /**
   * Reads the first slot a client's lookup reads: the word that marks it taken, and in a wide slot
   * its last word too, in case the slot straddles two lines (an array not placed at a line's
   * start). Called in a loop over a batch ({@link PeerTable#warm}), short enough that the loads'
   * cache misses overlap.
   *
   * @param clientId the client
   * @return what was read, for the caller to keep
   */
  long touch(long clientId) {
    int index = LongObjectMap.hash(clientId) & mask;
    if (shift == COMPACT_SHIFT) {
      return slots[PAD + (index << COMPACT_SHIFT) + 1];
    }
    int base = PAD + (index << WIDE_SHIFT);
    return slots[base + 2] + slots[base + 7];
  }

  /**
   * The handle in a slot {@link #find} returned.
   *
   * @param slot the slot
   * @return its handle
   */
  long handleAt(int slot) {
    long word = slots[PAD + (slot << shift) + 1];
    return shift == COMPACT_SHIFT ? word & HANDLE_MASK : word;
  }

  /**
   * Records a client's handle and address, replacing what it had; a client whose address is too
   * long to keep is removed instead, so a slot never outlives the mapping it mirrors.
   *
   * @param clientId the client
   * @param handle its handle
   * @param address its address
   */
  void put(long clientId, long handle, byte[] address) {
    if (address.length > MAX_ADDRESS) {
      remove(clientId);
      return;
    }
    if (shift == COMPACT_SHIFT
        && (address.length > COMPACT_MAX_ADDRESS || (handle & ~HANDLE_MASK) != 0)) {
      rebuild(mask + 1, WIDE_SHIFT);
    }
    long[] words = scratch;
    for (int w = 0; w < WORDS; w++) {
      words[w] = word(address, w);
    }
    if (place(slots, shift, mask, clientId, handle, address.length + 1L, words)
        && ++size * 4 > (mask + 1) * 3) {
      rebuild((mask + 1) * 2, shift);
    }
  }

  /**
   * Writes a slot into {@code s}, over the client's own if it has one; returns whether the client
   * is new there.
   */
  private static boolean place(
      long[] s, int shift, int mask, long clientId, long handle, long lengthPlusOne, long[] words) {
    int lengthWord = lengthWord(shift);
    int index = LongObjectMap.hash(clientId) & mask;
    boolean fresh = true;
    for (; s[PAD + (index << shift) + lengthWord] != 0; index = (index + 1) & mask) {
      if (s[PAD + (index << shift)] == clientId) {
        fresh = false;
        break;
      }
    }
    int base = PAD + (index << shift);
    s[base] = clientId;
    if (shift == COMPACT_SHIFT) {
      s[base + 1] = lengthPlusOne << HANDLE_BITS | handle;
      s[base + 2] = words[0];
      s[base + 3] = words[1];
    } else {
      s[base + 1] = handle;
      s[base + 2] = lengthPlusOne;
      for (int w = 0; w < WORDS; w++) {
        s[base + 3 + w] = words[w];
      }
    }
    return fresh;
  }

  /**
   * Forgets a client.
   *
   * @param clientId the client
   */
  void remove(long clientId) {
    int lengthWord = lengthWord();
    for (int index = LongObjectMap.hash(clientId) & mask;
        slots[PAD + (index << shift) + lengthWord] != 0;
        index = (index + 1) & mask) {
      if (slots[PAD + (index << shift)] == clientId) {
        slots[PAD + (index << shift) + lengthWord] = 0;
        size--;
        shiftBack(index);
        return;
      }
    }
  }

  /** Forgets every client (the layout stays). */
  void clear() {
    Arrays.fill(slots, 0L);
    size = 0;
  }

  /**
   * The clients held.
   *
   * @return the count
   */
  int size() {
    return size;
  }

  /** Closes the gap at {@code hole} by moving later slots of the same probe run back. */
  private void shiftBack(int hole) {
    int lengthWord = lengthWord();
    int slot = 1 << shift;
    for (int index = (hole + 1) & mask;
        slots[PAD + (index << shift) + lengthWord] != 0;
        index = (index + 1) & mask) {
      int home = LongObjectMap.hash(slots[PAD + (index << shift)]) & mask;
      // Move the slot into the hole unless its home lies cyclically in (hole, index].
      boolean homeBetween =
          hole <= index ? (hole < home && home <= index) : (hole < home || home <= index);
      if (!homeBetween) {
        System.arraycopy(slots, PAD + (index << shift), slots, PAD + (hole << shift), slot);
        slots[PAD + (index << shift) + lengthWord] = 0;
        hole = index;
      }
    }
  }

  /** Moves every slot into a new array of {@code capacity} slots in layout {@code newShift}. */
  private void rebuild(int capacity, int newShift) {
    long[] old = slots;
    int oldShift = shift;
    long[] fresh = new long[PAD + (capacity << newShift)];
    int newMask = capacity - 1;
    long[] words = new long[WORDS];
    for (int base = PAD; base < old.length; base += 1 << oldShift) {
      long handle;
      long lengthPlusOne;
      if (oldShift == COMPACT_SHIFT) {
        long tagged = old[base + 1];
        if (tagged == 0) {
          continue;
        }
        handle = tagged & HANDLE_MASK;
        lengthPlusOne = tagged >>> HANDLE_BITS;
        words[0] = old[base + 2];
        words[1] = old[base + 3];
        Arrays.fill(words, 2, WORDS, 0L);
      } else {
        lengthPlusOne = old[base + 2];
        if (lengthPlusOne == 0) {
          continue;
        }
        handle = old[base + 1];
        System.arraycopy(old, base + 3, words, 0, WORDS);
      }
      place(fresh, newShift, newMask, old[base], handle, lengthPlusOne, words);
    }
    slots = fresh;
    shift = newShift;
    mask = newMask;
  }
}
