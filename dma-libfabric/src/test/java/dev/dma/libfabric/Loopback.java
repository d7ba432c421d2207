package dev.dma.libfabric;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.fail;

import dev.dma.api.Advertisement;
import dev.dma.api.RemoteAccess;
import dev.dma.spi.CompletionSink;
import dev.dma.spi.ExposedRegion;
import dev.dma.spi.FabricEndpoint;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;

/**
 * Two endpoints in one JVM, driven by the calling thread: an initiator with op slots and a passive
 * target that exposes a segment and is progressed on every pass. Every wait is bounded (a hang
 * fails the test instead of the build); nothing asserts on timing. Shared with dma-provider-tcp's
 * tests through this module's test jar.
 */
public final class Loopback implements AutoCloseable {
  public static final long DEADLINE_NS = TimeUnit.SECONDS.toNanos(60);
  public static final int SLOTS = 64;

  public final Arena arena = Arena.ofShared();
  public final FabricEndpoint initiator;
  public final FabricEndpoint target;
  public final long peer;
  public final Recorder sink = new Recorder(SLOTS);

  public Loopback(Supplier<FabricEndpoint> opener) {
    FabricEndpoint first = opener.get();
    FabricEndpoint second;
    try {
      second = opener.get();
    } catch (RuntimeException e) {
      first.close();
      throw e;
    }
    initiator = first;
    target = second;
    initiator.openSlots(SLOTS);
    peer = initiator.insertPeer(target.localAddress());
  }

  /** Records completions per slot. */
  public static final class Recorder implements CompletionSink {
    public final int[] state; // 0 idle/pending, 1 ok, 2 failed
    public final String[] message;
    public final int[] errno;
    public int completed;
    public int failed;

    public Recorder(int slots) {
      state = new int[slots];
      message = new String[slots];
      errno = new int[slots];
    }

    @Override
    public void completed(int slot) {
      state[slot] = 1;
      completed++;
    }

    @Override
    public void failed(int slot, int errno, int providerErrno, String message) {
      state[slot] = 2;
      this.errno[slot] = errno;
      this.message[slot] = message;
      failed++;
    }
  }

  /** One pass: reap the initiator, progress the target. */
  public int pump() {
    int n = initiator.reap(sink, SLOTS);
    target.progress();
    return n;
  }

  /** Posts one operation on {@code slot}, reaping on AGAIN; returns the post's final code. */
  public int post(
      boolean write, int slot, long peer, MemorySegment local, long remoteAddress, long key) {
    long deadline = System.nanoTime() + DEADLINE_NS;
    sink.state[slot] = 0;
    while (true) {
      int rc =
          write
              ? initiator.postWrite(
                  slot, peer, local.address(), local.byteSize(), 0, remoteAddress, key)
              : initiator.postRead(
                  slot, peer, local.address(), local.byteSize(), 0, remoteAddress, key);
      if (rc != FabricEndpoint.AGAIN) {
        return rc;
      }
      pump();
      if (System.nanoTime() > deadline) {
        fail("post stayed at -FI_EAGAIN for 60 s");
      }
    }
  }

  /** Waits until {@code slot} completed or failed; returns its state (1 ok, 2 failed). */
  public int await(int slot) {
    long deadline = System.nanoTime() + DEADLINE_NS;
    while (sink.state[slot] == 0) {
      pump();
      if (System.nanoTime() > deadline) {
        fail("slot " + slot + " did not complete within 60 s");
      }
    }
    return sink.state[slot];
  }

  /** One transfer that must succeed. */
  public void transfer(boolean write, MemorySegment local, long remoteAddress, long key) {
    int rc = post(write, 0, peer, local, remoteAddress, key);
    assertEquals(FabricEndpoint.POSTED, rc, () -> "post: " + initiator.errorText(rc));
    int state = await(0);
    assertEquals(1, state, () -> "transfer failed: " + sink.message[0]);
  }

  public ExposedRegion expose(MemorySegment segment, RemoteAccess access) {
    return target.expose(segment, access);
  }

  public static long remote(Advertisement advertisement, long offset) {
    return advertisement.remoteAddress() + offset;
  }

  /** Fills with a deterministic pseudo-random pattern (xorshift), fast for 64 MiB. */
  public static void fill(MemorySegment segment, long seed) {
    long x = seed | 1;
    long longs = segment.byteSize() / 8;
    for (long i = 0; i < longs; i++) {
      x ^= x << 13;
      x ^= x >>> 7;
      x ^= x << 17;
      segment.setAtIndex(ValueLayout.JAVA_LONG_UNALIGNED, i, x);
    }
    for (long i = longs * 8; i < segment.byteSize(); i++) {
      segment.set(ValueLayout.JAVA_BYTE, i, (byte) (x >>> (i & 7)));
    }
  }

  /** An arena as a resource, for tests that need memory but no loopback pair. */
  public static final class Arena2 implements AutoCloseable {
    public final Arena arena = Arena.ofShared();

    @Override
    public void close() {
      arena.close();
    }
  }

  @Override
  public void close() {
    try {
      initiator.close();
    } finally {
      try {
        target.close();
      } finally {
        arena.close();
      }
    }
  }
}
