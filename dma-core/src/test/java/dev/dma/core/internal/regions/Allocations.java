package dev.dma.core.internal.regions;

import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;

/**
 * Counts the bytes the current thread allocates, through HotSpot's per-thread counter ({@code
 * com.sun.management.ThreadMXBean#getCurrentThreadAllocatedBytes}). Reached reflectively because
 * test code compiles inside module {@code dev.dma.core}, which does not read {@code
 * java.management}; the tests themselves run on the class path.
 */
public final class Allocations {
  private static final Object THREADS;
  private static final MethodHandle ALLOCATED;

  static {
    try {
      Class<?> factory = Class.forName("java.lang.management.ManagementFactory");
      THREADS = factory.getMethod("getThreadMXBean").invoke(null);
      Class<?> bean = Class.forName("com.sun.management.ThreadMXBean");
      ALLOCATED =
          MethodHandles.publicLookup()
              .findVirtual(
                  bean, "getCurrentThreadAllocatedBytes", MethodType.methodType(long.class))
              .asType(MethodType.methodType(long.class, Object.class));
    } catch (ReflectiveOperationException unavailable) {
      throw new ExceptionInInitializerError(unavailable);
    }
  }

  private Allocations() {}

  /**
   * Bytes allocated so far by the calling thread.
   *
   * @return the count
   */
  public static long allocatedBytes() {
    try {
      return (long) ALLOCATED.invokeExact(THREADS);
    } catch (Throwable failed) {
      throw new AssertionError(failed);
    }
  }

  /**
   * Bytes {@code body} allocates over {@code iterations} runs, after as many runs of warm-up so the
   * JIT has compiled it; the counter's own cost is measured once, empty, and subtracted.
   *
   * @param iterations how many runs to warm up with, then to measure
   * @param body the code under test
   * @return the bytes allocated by the measured runs
   */
  public static long measure(int iterations, Runnable body) {
    for (int i = 0; i < iterations; i++) {
      body.run();
    }
    long baseline = allocatedBytes();
    long overhead = allocatedBytes() - baseline;
    long before = allocatedBytes();
    for (int i = 0; i < iterations; i++) {
      body.run();
    }
    return allocatedBytes() - before - overhead;
  }
}
