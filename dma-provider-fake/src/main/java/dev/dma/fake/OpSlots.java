package dev.dma.fake;

import java.lang.foreign.MemorySegment;
import org.jspecify.annotations.Nullable;

/**
 * The op slots of one {@link FakeEndpoint}: what each posted op is (kind, peer, operands, target),
 * where its completion is (queued, held, awaiting its target, lost) and how it ends (its errno,
 * provider errno and text once final). Parallel arrays sized once by {@link #open}, so a post
 * allocates nothing; the arrays are fields the owning endpoint reads and writes directly.
 *
 * <p>Threads: guarded by the fabric's lock, like everything an endpoint mutates. Only the owning
 * endpoint touches it, from whichever thread called into the endpoint with the lock held: its owner
 * posting, reaping or removing peers; another endpoint's owner progressing this endpoint's target
 * (which completes ops here); or {@link FakeScript} releasing held completions.
 */
@SuppressWarnings("NullAway.Init") // every array is made by open(), before any other call
final class OpSlots {
  static final byte FREE = 0;
  static final byte POSTED = 1;

  // Where a posted op's completion is; NOT_HELD means it was queued to reap.
  static final byte NOT_HELD = 0;
  static final byte HELD = 1;
  static final byte AWAITING_TARGET = 2;
  // Never completes: FakeScript.loseCompletions.
  static final byte LOST = 3;

  /** How many slots {@link #open} made; 0 before. */
  int count;

  byte[] state;
  byte[] hold;
  boolean[] write;
  boolean[] done; // bytes moved, or failed: the completion status below is final
  boolean[] scribbled;
  long[] index;
  long[] peer;
  long[] local;
  long[] lengthBytes;
  long[] remote;
  long[] key;
  long[] registration;
  FakeEndpoint[] target;
  // The watched operand (FakeFabric.watchOperand) holding the op's local bytes, else null.
  MemorySegment[] operand;
  int[] errno;
  int[] providerErrno;
  String[] text;

  /** Operations accepted and not yet reaped (held ones included). */
  int inFlight;

  /** Sizes the slots; called once, by {@link FakeEndpoint#openSlots}. */
  void open(int slotCount) {
    state = new byte[slotCount];
    hold = new byte[slotCount];
    write = new boolean[slotCount];
    done = new boolean[slotCount];
    scribbled = new boolean[slotCount];
    index = new long[slotCount];
    peer = new long[slotCount];
    local = new long[slotCount];
    lengthBytes = new long[slotCount];
    remote = new long[slotCount];
    key = new long[slotCount];
    registration = new long[slotCount];
    target = new FakeEndpoint[slotCount];
    operand = new MemorySegment[slotCount];
    errno = new int[slotCount];
    providerErrno = new int[slotCount];
    text = new String[slotCount];
    count = slotCount;
  }

  /** Records an accepted op in a free slot: posted, not held, not done, no error yet. */
  void accept(
      int slot,
      long opIndex,
      boolean isWrite,
      long peerHandle,
      long localAddress,
      long length,
      long remoteAddress,
      long remoteKey,
      long registrationId,
      FakeEndpoint opTarget,
      @Nullable MemorySegment watchedOperand) {
    state[slot] = POSTED;
    hold[slot] = NOT_HELD;
    write[slot] = isWrite;
    done[slot] = false;
    index[slot] = opIndex;
    peer[slot] = peerHandle;
    local[slot] = localAddress;
    lengthBytes[slot] = length;
    remote[slot] = remoteAddress;
    key[slot] = remoteKey;
    registration[slot] = registrationId;
    target[slot] = opTarget;
    operand[slot] = watchedOperand;
    errno[slot] = 0;
    providerErrno[slot] = 0;
    text[slot] = null;
    inFlight++;
  }

  /** Makes the op's completion an error; its bytes do not move. */
  void fail(int slot, int opErrno, int opProviderErrno, @Nullable String providerText) {
    errno[slot] = opErrno;
    providerErrno[slot] = opProviderErrno;
    text[slot] = providerText;
    done[slot] = true;
  }

  /** Frees the slot of a reaped op, dropping what it referenced. */
  void free(int slot) {
    state[slot] = FREE;
    target[slot] = null;
    operand[slot] = null;
    text[slot] = null;
    inFlight--;
  }

  /** Names the op in {@code slot} for a violation: {@code op #7 (write of 64 bytes in slot 2)}. */
  String describe(int slot) {
    return "op #"
        + index[slot]
        + " ("
        + (write[slot] ? "write" : "read")
        + " of "
        + lengthBytes[slot]
        + " bytes in slot "
        + slot
        + ")";
  }

  /** How many posted ops are against {@code peerHandle}. */
  int postedTo(long peerHandle) {
    int posted = 0;
    for (int slot = 0; slot < count; slot++) {
      if (state[slot] == POSTED && peer[slot] == peerHandle) {
        posted++;
      }
    }
    return posted;
  }

  /** The lowest slot whose posted op uses local registration {@code registrationId}, or -1. */
  int userOf(long registrationId) {
    for (int slot = 0; slot < count; slot++) {
      if (state[slot] == POSTED && registration[slot] == registrationId) {
        return slot;
      }
    }
    return -1;
  }

  /**
   * Frees every posted slot without completing it, for {@link FakeEndpoint#reset()}.
   *
   * @return how many ops were discarded
   */
  int discardAll() {
    int discarded = 0;
    for (int slot = 0; slot < count; slot++) {
      if (state[slot] == POSTED) {
        state[slot] = FREE;
        hold[slot] = NOT_HELD;
        // Invalidates the slot's entries in targets' awaiting lists (they match on the index).
        index[slot] = -1;
        operand[slot] = null;
        discarded++;
      }
    }
    inFlight = 0;
    return discarded;
  }
}
