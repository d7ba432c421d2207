package dev.dma.libfabric;

import java.util.Arrays;
import org.jspecify.annotations.Nullable;

/**
 * The outcomes of this endpoint's own operations that {@link LibfabricEndpoint#progress()} read (an
 * endpoint used both as initiator and target), kept in order for the next {@link
 * LibfabricEndpoint#reap}, which delivers them first. A ring of at most one outcome per op slot:
 * each slot has one operation in flight, so it never holds more.
 *
 * <p>Only the endpoint's owner thread uses it. Preallocated at {@code openSlots}; nothing on the
 * data path allocates.
 */
final class OutcomeQueue {
  private int[] slot = new int[0];
  private int[] errno = new int[0];
  private int[] providerErrno = new int[0];
  // Null for a success.
  private @Nullable String[] message = new String[0];
  private int head;
  private int size;

  /** Sizes the ring for {@code count} slots; before any outcome is queued. */
  void open(int count) {
    slot = new int[count];
    errno = new int[count];
    providerErrno = new int[count];
    message = new String[count];
  }

  /** How many outcomes are queued. */
  int size() {
    return size;
  }

  /** How many more fit. */
  int room() {
    return slot.length - size;
  }

  /** Queues an outcome: {@code failure} null for a success (then the numbers are ignored). */
  void add(int opSlot, int error, int providerError, @Nullable String failure) {
    int tail = head + size;
    if (tail >= slot.length) {
      tail -= slot.length;
    }
    slot[tail] = opSlot;
    errno[tail] = error;
    providerErrno[tail] = providerError;
    message[tail] = failure;
    size++;
  }

  /**
   * Takes the oldest outcome: returns its index, to read with {@link #slot(int)}, {@link
   * #errno(int)}, {@link #providerErrno(int)} and {@link #takeMessage(int)}, before the next add.
   */
  int take() {
    int i = head;
    head = i + 1 == slot.length ? 0 : i + 1;
    size--;
    return i;
  }

  int slot(int index) {
    return slot[index];
  }

  int errno(int index) {
    return errno[index];
  }

  int providerErrno(int index) {
    return providerErrno[index];
  }

  /** The failure text at {@code index}, or null for a success; the entry forgets it. */
  @Nullable String takeMessage(int index) {
    String failure = message[index];
    message[index] = null;
    return failure;
  }

  /** Drops every outcome: the operations they name were discarded by a reset. */
  void clear() {
    head = 0;
    size = 0;
    Arrays.fill(message, null);
  }
}
