package dev.dma.core.internal;

import java.util.Arrays;
import java.util.function.Consumer;

/**
 * An open-addressing hash map from primitive {@code long} keys to objects, so per-transfer lookups
 * by client id neither box the key nor allocate. Linear probing with backward-shift deletion (no
 * tombstones), power-of-two capacity, load factor at most one half.
 *
 * <p>Not thread-safe: owned by one thread (the fabric worker).
 *
 * @param <V> the value type; values are never null
 */
public final class LongObjectMap<V> {
  private long[] keys;
  private Object[] values;
  private int size;
  private int mask;

  /** An empty map. */
  public LongObjectMap() {
    this(16);
  }

  /**
   * An empty map sized for about {@code expected} entries before it grows.
   *
   * @param expected the expected number of entries
   */
  public LongObjectMap(int expected) {
    int capacity = Integer.highestOneBit(Math.max(8, expected * 2 - 1)) << 1;
    keys = new long[capacity];
    values = new Object[capacity];
    mask = capacity - 1;
  }

  /**
   * Murmur3's 64-bit finalizer: client ids are often sequential, and linear probing needs them
   * spread. Shared with the peer table's handle index, which probes by client id too.
   *
   * @param key a client id
   * @return its hash
   */
  public static int hash(long key) {
    key ^= key >>> 33;
    key *= 0xff51afd7ed558ccdL;
    key ^= key >>> 33;
    key *= 0xc4ceb9fe1a85ec53L;
    key ^= key >>> 33;
    return (int) key;
  }

  /**
   * The value for a key.
   *
   * @param key the key
   * @return the value, or {@code null}
   */
  @SuppressWarnings("unchecked")
  public V get(long key) {
    for (int index = hash(key) & mask; ; index = (index + 1) & mask) {
      Object value = values[index];
      if (value == null) {
        return null;
      }
      if (keys[index] == key) {
        return (V) value;
      }
    }
  }

  /**
   * Maps a key to a value.
   *
   * @param key the key
   * @param value the value, not null
   * @return the previous value, or {@code null}
   */
  @SuppressWarnings("unchecked")
  public V put(long key, V value) {
    if (value == null) {
      throw new NullPointerException("value");
    }
    int index = hash(key) & mask;
    for (; values[index] != null; index = (index + 1) & mask) {
      if (keys[index] == key) {
        V previous = (V) values[index];
        values[index] = value;
        return previous;
      }
    }
    keys[index] = key;
    values[index] = value;
    if (++size * 2 > keys.length) {
      grow();
    }
    return null;
  }

  /**
   * Removes a key.
   *
   * @param key the key
   * @return the removed value, or {@code null}
   */
  @SuppressWarnings("unchecked")
  public V remove(long key) {
    int index = hash(key) & mask;
    for (; values[index] != null; index = (index + 1) & mask) {
      if (keys[index] == key) {
        V removed = (V) values[index];
        values[index] = null;
        size--;
        shiftBack(index);
        return removed;
      }
    }
    return null;
  }

  /**
   * The number of entries.
   *
   * @return the size
   */
  public int size() {
    return size;
  }

  /**
   * Whether the map is empty.
   *
   * @return {@code size() == 0}
   */
  public boolean isEmpty() {
    return size == 0;
  }

  /** Removes every entry. */
  public void clear() {
    Arrays.fill(values, null);
    size = 0;
  }

  /**
   * Calls {@code action} with each value; the map must not change meanwhile.
   *
   * @param action what to do with each value
   */
  @SuppressWarnings("unchecked")
  public void forEachValue(Consumer<? super V> action) {
    for (Object value : values) {
      if (value != null) {
        action.accept((V) value);
      }
    }
  }

  /** Closes the gap at {@code hole} by moving later entries of the same probe run back. */
  private void shiftBack(int hole) {
    for (int index = (hole + 1) & mask; values[index] != null; index = (index + 1) & mask) {
      int home = hash(keys[index]) & mask;
      // Move the entry into the hole unless its home lies cyclically in (hole, index].
      boolean homeBetween =
          hole <= index ? (hole < home && home <= index) : (hole < home || home <= index);
      if (!homeBetween) {
        keys[hole] = keys[index];
        values[hole] = values[index];
        values[index] = null;
        hole = index;
      }
    }
  }

  private void grow() {
    long[] oldKeys = keys;
    Object[] oldValues = values;
    keys = new long[oldKeys.length * 2];
    values = new Object[oldValues.length * 2];
    mask = keys.length - 1;
    for (int i = 0; i < oldKeys.length; i++) {
      if (oldValues[i] != null) {
        int index = hash(oldKeys[i]) & mask;
        while (values[index] != null) {
          index = (index + 1) & mask;
        }
        keys[index] = oldKeys[i];
        values[index] = oldValues[i];
      }
    }
  }
}
