package dev.dma.fake;

/**
 * The completions of one {@link FakeEndpoint} that are not yet delivered: the ready ring {@link
 * FakeEndpoint#reap} takes from, and the completions the script holds back, in the order their ops
 * were accepted. Both hold slot indexes (each posted slot is in at most one of them, at most once),
 * in arrays sized once by {@link #open}, so queueing and reaping allocate nothing. What a slot's
 * completion says lives in {@link OpSlots}.
 *
 * <p>Threads: guarded by the fabric's lock. Only the owning endpoint touches it, with the lock
 * held: its owner posting, reaping or removing peers; another endpoint's owner progressing this
 * endpoint's target (which queues completions here); or {@link FakeScript} releasing held ones.
 */
@SuppressWarnings("NullAway.Init") // both arrays are made by open(), before any other call
final class CompletionQueue {
  // Completions ready to reap: a ring of slot indexes.
  private int[] ready;
  private int readyHead;
  private int readyCount;
  // Held completions, in the order they were accepted.
  private int[] held;
  private int heldCount;

  /** Sizes the ring and the held list for {@code slotCount} slots; called once. */
  void open(int slotCount) {
    ready = new int[slotCount];
    held = new int[slotCount];
  }

  /** Queues the completion of {@code slot} to be reaped after those already queued. */
  void pushReady(int slot) {
    ready[(readyHead + readyCount) % ready.length] = slot;
    readyCount++;
  }

  /** How many completions are ready to reap. */
  int readyCount() {
    return readyCount;
  }

  /**
   * Takes the next ready completion: the oldest queued, or with {@code newestFirst} the newest.
   * Only when {@link #readyCount()} is positive.
   *
   * @return its slot
   */
  int takeReady(boolean newestFirst) {
    int slot;
    if (newestFirst) {
      slot = ready[(readyHead + readyCount - 1) % ready.length];
    } else {
      slot = ready[readyHead];
      readyHead = (readyHead + 1) % ready.length;
    }
    readyCount--;
    return slot;
  }

  /** Holds the completion of {@code slot} until the script releases it. */
  void hold(int slot) {
    held[heldCount++] = slot;
  }

  /** How many completions are held. */
  int heldCount() {
    return heldCount;
  }

  /** The slot of the {@code i}th held completion, in acceptance order. */
  int held(int i) {
    return held[i];
  }

  /** Forgets every held completion (their slots must be dealt with by the caller). */
  void clearHeld() {
    heldCount = 0;
  }

  /** Stops holding the completion of {@code slot}, keeping the others in order. */
  void removeHeld(int slot) {
    for (int i = 0; i < heldCount; i++) {
      if (held[i] == slot) {
        System.arraycopy(held, i + 1, held, i, heldCount - i - 1);
        heldCount--;
        return;
      }
    }
  }

  /** Forgets everything queued and held, for {@link FakeEndpoint#reset()}. */
  void clear() {
    heldCount = 0;
    readyCount = 0;
    readyHead = 0;
  }
}
