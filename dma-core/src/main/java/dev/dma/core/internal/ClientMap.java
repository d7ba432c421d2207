package dev.dma.core.internal;

/**
 * Client id to object, for the few clients with work outstanding on a worker (at most its in-flight
 * cap plus its queue), which change on nearly every transfer: a direct-mapped array (one slot per
 * hash, no probing) in front of a {@link LongObjectMap} that takes only the clients whose slot
 * another client holds.
 *
 * <p>Why not the {@code LongObjectMap} alone: a transfer to a client with nothing else outstanding
 * costs it a missed lookup, an insert and a removal, and with many distinct clients the length of
 * each probe (and of the backward shift after each removal) is different every time: measured with
 * {@code ManyClientsBenchmark}, that made a transfer about 30 ns (a third) dearer at 100,000
 * clients than at 1,000, where the same ids come round again. Here the common case reads one slot
 * and does not branch on what it finds beyond "this client or not".
 *
 * <p>Each key is in exactly one place: its slot, or the overflow map. Not thread-safe: owned by the
 * fabric worker thread.
 *
 * @param <V> the value type; values are never null
 */
final class ClientMap<V> {
  private final long[] keys;
  private final Object[] values;
  private final int mask;
  private final LongObjectMap<V> overflow = new LongObjectMap<>();
  private int inFront;

  /**
   * An empty map.
   *
   * @param slots the direct-mapped slots, a power of two; with {@code n} clients at once, about
   *     {@code n * n / 2 / slots} of them land in the overflow map
   */
  ClientMap(int slots) {
    if (slots <= 0 || Integer.bitCount(slots) != 1) {
      throw new IllegalArgumentException("slots must be a power of two: " + slots);
    }
    keys = new long[slots];
    values = new Object[slots];
    mask = slots - 1;
  }

  /**
   * Direct-mapped slots for a worker with {@code cap} transfers in flight at most: 64 per transfer
   * (so about one client in 128 overflows), at least 256, at most 16,384 (192 KiB).
   *
   * @param cap the worker's in-flight cap
   * @return a power of two
   */
  static int slotsFor(int cap) {
    long wanted = Math.max(256L, Math.min(16_384L, 64L * Math.max(1, cap)));
    return Integer.highestOneBit((int) wanted);
  }

  /**
   * The value for a key.
   *
   * @param key the key
   * @return the value, or {@code null}
   */
  @SuppressWarnings("unchecked")
  V get(long key) {
    int index = LongObjectMap.hash(key) & mask;
    Object value = values[index];
    if (value != null && keys[index] == key) {
      return (V) value;
    }
    return overflow.isEmpty() ? null : overflow.get(key);
  }

  /**
   * Maps a key to a value, replacing the value it had.
   *
   * @param key the key
   * @param value the value, not null
   */
  void put(long key, V value) {
    if (value == null) {
      throw new NullPointerException("value");
    }
    int index = LongObjectMap.hash(key) & mask;
    Object held = values[index];
    if (held != null && keys[index] == key) {
      values[index] = value;
    } else if (held == null) {
      // Its slot is free: it belongs there, even if it overflowed while another client held it.
      if (!overflow.isEmpty()) {
        overflow.remove(key);
      }
      keys[index] = key;
      values[index] = value;
      inFront++;
    } else {
      overflow.put(key, value);
    }
  }

  /**
   * Removes a key.
   *
   * @param key the key
   * @return the removed value, or {@code null}
   */
  @SuppressWarnings("unchecked")
  V remove(long key) {
    int index = LongObjectMap.hash(key) & mask;
    Object value = values[index];
    if (value != null && keys[index] == key) {
      values[index] = null;
      inFront--;
      return (V) value;
    }
    return overflow.isEmpty() ? null : overflow.remove(key);
  }

  /**
   * The number of entries.
   *
   * @return the size
   */
  int size() {
    return inFront + overflow.size();
  }
}
