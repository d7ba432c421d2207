package dev.dma.fake;

import dev.dma.api.RemoteAccess;
import dev.dma.spi.ExposedRegion;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * A test fixture: a fresh fabric with an initiator (slots opened, target inserted) and a passive
 * target exposing {@code targetBytes} of native memory. Owned by one test; close it.
 */
final class Pair implements AutoCloseable {
  private static final AtomicInteger NAMES = new AtomicInteger();

  final FakeFabric fabric;
  final FakeEndpoint initiator;
  final FakeEndpoint target;
  final Arena arena = Arena.ofShared();
  final MemorySegment targetMemory;
  final ExposedRegion region;
  final long peer;
  final long remoteBase;

  Pair(int slots, long targetBytes) {
    this(slots, targetBytes, script -> {});
  }

  Pair(int slots, long targetBytes, java.util.function.Consumer<FakeScript> setUp) {
    fabric = FakeFabric.create("pair-" + NAMES.incrementAndGet());
    setUp.accept(fabric.script());
    initiator = fabric.openEndpoint();
    target = fabric.openEndpoint();
    initiator.openSlots(slots);
    targetMemory = arena.allocate(targetBytes, 64);
    region = target.expose(targetMemory, RemoteAccess.READ_WRITE);
    peer = initiator.insertPeer(target.localAddress());
    remoteBase = region.advertisement().remoteAddress();
  }

  /** Native memory for a local operand, filled with a pattern seeded by {@code seed}. */
  MemorySegment local(long bytes, int seed) {
    MemorySegment segment = arena.allocate(bytes, 64);
    for (long i = 0; i < bytes; i++) {
      segment.set(java.lang.foreign.ValueLayout.JAVA_BYTE, i, (byte) (i * 31 + seed));
    }
    return segment;
  }

  int write(int slot, MemorySegment local, long remoteOffset) {
    return initiator.postWrite(
        slot,
        peer,
        local.address(),
        local.byteSize(),
        0,
        remoteBase + remoteOffset,
        region.advertisement().remoteKey());
  }

  int read(int slot, MemorySegment local, long remoteOffset) {
    return initiator.postRead(
        slot,
        peer,
        local.address(),
        local.byteSize(),
        0,
        remoteBase + remoteOffset,
        region.advertisement().remoteKey());
  }

  RecordingSink reapAll() {
    RecordingSink sink = new RecordingSink();
    initiator.reap(sink, 1_000);
    return sink;
  }

  FakeCounters counters() {
    return fabric.counters();
  }

  @Override
  public void close() {
    fabric.close();
    arena.close();
  }
}
