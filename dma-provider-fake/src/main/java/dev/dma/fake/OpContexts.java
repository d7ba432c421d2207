package dev.dma.fake;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * The provider-owned contexts of one {@link FakeEndpoint}'s op slots: {@value
 * FakeEndpoint#CONTEXT_BYTES} bytes of native memory per slot, as libfabric's {@code fi_context2},
 * in one shared arena the endpoint closes when it closes. Under {@link FakeScript#scribbleContexts}
 * the fake writes into a posted op's context what EFA writes, and checks on completion that nobody
 * else wrote there.
 *
 * <p>Threads: guarded by the fabric's lock; only the owning endpoint calls it, with the lock held
 * (posting, reaping, handing out a slot's context, closing). The arena is shared so the memory may
 * be touched by whichever thread holds the lock, and by a test writing into a context it was given.
 */
final class OpContexts {
  // EFA's efa_context.completion_flags for the op kinds (FI_RMA | FI_WRITE, FI_RMA | FI_READ).
  private static final long WRITE_FLAGS = (1L << 2) | (1L << 9);
  private static final long READ_FLAGS = (1L << 2) | (1L << 8);
  private static final int CONTEXT_BYTES = FakeEndpoint.CONTEXT_BYTES;

  private final Arena arena;
  private final MemorySegment contexts;

  /** Allocates the contexts of {@code slotCount} slots. */
  OpContexts(int slotCount) {
    arena = Arena.ofShared();
    contexts = arena.allocate((long) slotCount * CONTEXT_BYTES, 8);
  }

  /** The context of {@code slot}, valid until {@link #close()}. */
  MemorySegment of(int slot) {
    return contexts.asSlice((long) slot * CONTEXT_BYTES, CONTEXT_BYTES);
  }

  /** Writes what EFA writes into a posted op's context, and fills the rest with a pattern. */
  void scribble(int slot, boolean write, long peer, long index) {
    long base = (long) slot * CONTEXT_BYTES;
    contexts.set(ValueLayout.JAVA_LONG, base, write ? WRITE_FLAGS : READ_FLAGS);
    contexts.set(ValueLayout.JAVA_LONG, base + 8, peer);
    contexts.asSlice(base + 16, CONTEXT_BYTES - 16).fill(pattern(index));
  }

  /** Whether the context of {@code slot} still holds exactly what {@link #scribble} wrote. */
  boolean intact(int slot, boolean write, long peer, long index) {
    long base = (long) slot * CONTEXT_BYTES;
    boolean intact =
        contexts.get(ValueLayout.JAVA_LONG, base) == (write ? WRITE_FLAGS : READ_FLAGS)
            && contexts.get(ValueLayout.JAVA_LONG, base + 8) == peer;
    byte pattern = pattern(index);
    for (long i = 16; intact && i < CONTEXT_BYTES; i++) {
      intact = contexts.get(ValueLayout.JAVA_BYTE, base + i) == pattern;
    }
    return intact;
  }

  /** Frees the contexts; every segment {@link #of} handed out becomes invalid. */
  void close() {
    arena.close();
  }

  private static byte pattern(long index) {
    return (byte) (0xA5 ^ index);
  }
}
