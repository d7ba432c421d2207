package dev.dma.core.internal.peers;

import dev.dma.core.internal.LongObjectMap;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteOrder;
import java.util.Arrays;

/**
 * Client id to address-vector handle and address bytes, all inline in one 64-byte slot of a flat
 * {@code long[]}: what {@link PeerTable#handle} reads on every post of a known client. The map it
 * mirrors ({@code PeerTable}'s client to entry) costs a post three dependent cache misses once the
 * clients outgrow the cache (the key and value arrays, the entry, the entry's address array); a
 * slot here costs one, read at an index the client id alone gives. Measured with {@code
 * ManyClientsBenchmark}: that chain was two fifths of a transfer's time at 100,000 clients.
 *
 * <p>Slot layout: client id, handle, address length plus one (0 marks a free slot), then the
 * address in up to {@value #WORDS} little-endian words, zero-padded. Addresses longer than {@value
 * #MAX_ADDRESS} bytes are not kept (their posts take the map). Linear probing with backward-shift
 * deletion, power-of-two capacity, at most three quarters full: 85 to 170 bytes a client, paid for
 * the one cache line a lookup reads (measured heap per peer, {@code ManyClientsBenchmark}: about
 * 270 bytes without it, 390 to 470 with it, G1 rounding the large array up to whole regions).
 *
 * <p>Not thread-safe: owned by the fabric worker thread, as the table.
 */
final class HandleIndex {
  /** Address words a slot holds. */
  static final int WORDS = 5;

  /** The longest address kept, in bytes (EFA's are 32, tcp's 16 or 28). */
  static final int MAX_ADDRESS = WORDS * 8;

  private static final int SLOT = 8; // longs: id, handle, length + 1, WORDS words, one spare
  private static final int SHIFT = 3;
  private static final VarHandle LONGS =
      MethodHandles.byteArrayViewVarHandle(long[].class, ByteOrder.LITTLE_ENDIAN);

  private long[] slots = new long[16 * SLOT];
  private int mask = 15;
  private int size;

  HandleIndex() {}

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
    for (int index = LongObjectMap.hash(clientId) & m; ; index = (index + 1) & m) {
      int base = index << SHIFT;
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
   * Reads the first slot each client's lookup reads, in a loop short enough that the loads' cache
   * misses overlap: its length word and its last word, so both cache lines of a slot that straddles
   * two (a large array starts 16 bytes into a line, so every slot does).
   *
   * @param clientIds clients
   * @param count how many of them
   * @return a sum of what was read, for the caller to keep
   */
  long touch(long[] clientIds, int count) {
    long[] s = slots;
    int m = mask;
    long sum = 0;
    for (int i = 0; i < count; i++) {
      int base = (LongObjectMap.hash(clientIds[i]) & m) << SHIFT;
      sum += s[base + 2] + s[base + 7];
    }
    return sum;
  }

  /**
   * The handle in a slot {@link #find} returned.
   *
   * @param slot the slot
   * @return its handle
   */
  long handleAt(int slot) {
    return slots[(slot << SHIFT) + 1];
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
    int index = LongObjectMap.hash(clientId) & mask;
    boolean fresh = true;
    for (; slots[(index << SHIFT) + 2] != 0; index = (index + 1) & mask) {
      if (slots[index << SHIFT] == clientId) {
        fresh = false;
        break;
      }
    }
    int base = index << SHIFT;
    slots[base] = clientId;
    slots[base + 1] = handle;
    slots[base + 2] = address.length + 1L;
    for (int w = 0; w < WORDS; w++) {
      slots[base + 3 + w] = word(address, w);
    }
    if (fresh && ++size * 4 > (mask + 1) * 3) {
      grow();
    }
  }

  /**
   * Forgets a client.
   *
   * @param clientId the client
   */
  void remove(long clientId) {
    for (int index = LongObjectMap.hash(clientId) & mask;
        slots[(index << SHIFT) + 2] != 0;
        index = (index + 1) & mask) {
      if (slots[index << SHIFT] == clientId) {
        slots[(index << SHIFT) + 2] = 0;
        size--;
        shiftBack(index);
        return;
      }
    }
  }

  /** Forgets every client. */
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
    for (int index = (hole + 1) & mask;
        slots[(index << SHIFT) + 2] != 0;
        index = (index + 1) & mask) {
      int home = LongObjectMap.hash(slots[index << SHIFT]) & mask;
      // Move the slot into the hole unless its home lies cyclically in (hole, index].
      boolean homeBetween =
          hole <= index ? (hole < home && home <= index) : (hole < home || home <= index);
      if (!homeBetween) {
        System.arraycopy(slots, index << SHIFT, slots, hole << SHIFT, SLOT);
        slots[(index << SHIFT) + 2] = 0;
        hole = index;
      }
    }
  }

  private void grow() {
    long[] old = slots;
    slots = new long[old.length * 2];
    mask = (slots.length >>> SHIFT) - 1;
    for (int base = 0; base < old.length; base += SLOT) {
      if (old[base + 2] != 0) {
        int index = LongObjectMap.hash(old[base]) & mask;
        while (slots[(index << SHIFT) + 2] != 0) {
          index = (index + 1) & mask;
        }
        System.arraycopy(old, base, slots, index << SHIFT, SLOT);
      }
    }
  }
}
