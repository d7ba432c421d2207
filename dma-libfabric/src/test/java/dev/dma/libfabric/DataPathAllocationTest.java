package dev.dma.libfabric;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dma.api.RemoteAccess;
import dev.dma.spi.ExposedRegion;
import dev.dma.spi.FabricEndpoint;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;

/** Posting, reaping and progressing allocate nothing once warm. */
class DataPathAllocationTest {
  @Test
  void postReapAndProgressAllocateNothing() {
    Assumptions.assumeTrue(Libfabric.availability().available(), Libfabric.availability().reason());
    try (Loopback loopback = LoopbackTest.loopback("libfabric:tcp;ofi_rxm")) {
      MemorySegment remote = loopback.arena.allocate(4096, 4096);
      MemorySegment local = loopback.arena.allocate(4096, 4096);
      try (ExposedRegion region = loopback.expose(remote, RemoteAccess.READ_WRITE)) {
        long key = region.advertisement().remoteKey();
        loopback.transfer(true, local.asSlice(0, 64), 0, key); // connect
        Loopback.Recorder sink = loopback.sink;
        cycles(loopback, local, key, 20_000); // warm up: let C2 compile the path
        long baseline = allocatedBytes();
        long overhead = allocatedBytes() - baseline;
        long before = allocatedBytes();
        int done = cycles(loopback, local, key, 20_000);
        long allocated = allocatedBytes() - before - overhead;
        assertEquals(20_000, done);
        assertEquals(0, sink.failed);
        // Any per-operation allocation would be at least 16 B x 20,000 = 320 KB; the margin absorbs
        // one-off allocations (a deoptimization, a class loaded late).
        assertTrue(allocated < 16 * 1024, "the data path allocated " + allocated + " bytes");
      }
    }
  }

  private static final Object THREADS;
  private static final MethodHandle ALLOCATED;

  static {
    // HotSpot's per-thread allocation counter, reached reflectively: test code compiles inside
    // module dev.dma.libfabric, which does not read java.management.
    try {
      THREADS =
          Class.forName("java.lang.management.ManagementFactory")
              .getMethod("getThreadMXBean")
              .invoke(null);
      ALLOCATED =
          MethodHandles.publicLookup()
              .findVirtual(
                  Class.forName("com.sun.management.ThreadMXBean"),
                  "getCurrentThreadAllocatedBytes",
                  MethodType.methodType(long.class))
              .asType(MethodType.methodType(long.class, Object.class));
    } catch (ReflectiveOperationException unavailable) {
      throw new ExceptionInInitializerError(unavailable);
    }
  }

  private static long allocatedBytes() {
    try {
      return (long) ALLOCATED.invokeExact(THREADS);
    } catch (Throwable impossible) {
      throw new AssertionError(impossible);
    }
  }

  private static int cycles(Loopback loopback, MemorySegment local, long key, int ops) {
    FabricEndpoint initiator = loopback.initiator;
    FabricEndpoint target = loopback.target;
    Loopback.Recorder sink = loopback.sink;
    int before = sink.completed;
    for (int i = 0; i < ops; i++) {
      boolean write = (i & 1) == 0;
      int rc;
      do {
        rc =
            write
                ? initiator.postWrite(0, loopback.peer, local.address(), 64, 0, 0, key)
                : initiator.postRead(0, loopback.peer, local.address(), 64, 0, 0, key);
        if (rc == FabricEndpoint.AGAIN) {
          initiator.reap(sink, 4);
          target.progress();
        }
      } while (rc == FabricEndpoint.AGAIN);
      int expected = sink.completed + sink.failed + 1;
      while (sink.completed + sink.failed < expected) {
        initiator.reap(sink, 4);
        target.progress();
      }
    }
    return sink.completed - before;
  }
}
