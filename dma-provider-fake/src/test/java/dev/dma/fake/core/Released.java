package dev.dma.fake.core;

import dev.dma.api.BatchCompleter;
import dev.dma.api.Completion;
import dev.dma.api.Operands;
import dev.dma.fake.FakeFabric;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;

/**
 * A test context whose operand lives in a shared arena of its own, watched by the fake ({@link
 * FakeFabric#watchOperand}) and closed the moment its completion is delivered (through {@link
 * #onDelivery}). Closing it is how the test tells the fake "the caller has this transfer back": any
 * later access by the fake fails and is recorded in {@link FakeFabric#operandViolations()}. What
 * the operand held at delivery is kept in {@link #atDelivery()} so the test can still check the
 * bytes.
 */
final class Released implements Operands {
  final long id;
  private final Arena arena = Arena.ofShared();
  private final MemorySegment segment;
  private volatile byte[] atDelivery;

  /** Every context made, so a test can close the arenas of those never delivered. */
  private final List<Released> made;

  private Released(long id, long size, FakeFabric fabric, List<Released> made) {
    this.id = id;
    // Page-aligned, as the group's striping wants its chunks.
    this.segment = arena.allocate(size, 4096);
    this.made = made;
    fabric.watchOperand(segment);
    made.add(this);
  }

  /** Contexts of one test, tracked so {@link #closeAll()} can free what was never delivered. */
  static final class Factory {
    private final FakeFabric fabric;
    private final List<Released> made = new CopyOnWriteArrayList<>();

    Factory(FakeFabric fabric) {
      this.fabric = fabric;
    }

    /** An operand of {@code size} bytes holding a pattern seeded by {@code seed}. */
    Released filled(long id, long size, int seed) {
      Released context = new Released(id, size, fabric, made);
      for (long i = 0; i < size; i++) {
        context.segment.set(ValueLayout.JAVA_BYTE, i, (byte) (seed + i * 31));
      }
      return context;
    }

    /** A zeroed landing buffer of {@code size} bytes. */
    Released landing(long id, long size) {
      return new Released(id, size, fabric, made);
    }

    /** How many contexts were made and not yet delivered. */
    long undelivered() {
      return made.stream().filter(Released::isOpen).count();
    }

    /** Frees every operand never delivered (a failed test's, or one still in flight). */
    void closeAll() {
      for (Released context : made) {
        context.release();
      }
    }
  }

  /**
   * Wraps a completer so each completion's operand is released before {@code next} sees it: what
   * the fake touches after that line is an access after delivery.
   */
  static BatchCompleter<Released> onDelivery(BatchCompleter<Released> next) {
    return batch -> {
      for (Completion<Released> completion : batch) {
        completion.context().release();
      }
      next.complete(batch);
    };
  }

  @Override
  public MemorySegment source() {
    return segment;
  }

  @Override
  public MemorySegment allocate(long lengthBytes) {
    return segment;
  }

  /** The operand's bytes as they were when the completion was delivered. */
  byte[] atDelivery() {
    byte[] bytes = atDelivery;
    if (bytes == null) {
      throw new AssertionError(this + " was not delivered");
    }
    return bytes;
  }

  /** The pattern {@link Factory#filled} writes, for comparing with what landed. */
  static byte[] pattern(long size, int seed) {
    byte[] bytes = new byte[(int) size];
    for (int i = 0; i < size; i++) {
      bytes[i] = (byte) (seed + i * 31L);
    }
    return bytes;
  }

  private boolean isOpen() {
    return arena.scope().isAlive();
  }

  private synchronized void release() {
    if (arena.scope().isAlive()) {
      atDelivery = segment.toArray(ValueLayout.JAVA_BYTE);
      arena.close();
    }
  }

  @Override
  public String toString() {
    return "Released#" + id;
  }
}
