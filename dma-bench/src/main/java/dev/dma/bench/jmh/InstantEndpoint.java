package dev.dma.bench.jmh;

import dev.dma.api.DmaConfiguration;
import dev.dma.api.MemoryKind;
import dev.dma.api.RemoteAccess;
import dev.dma.spi.Availability;
import dev.dma.spi.CompletionSink;
import dev.dma.spi.EndpointInfo;
import dev.dma.spi.ExposedRegion;
import dev.dma.spi.FabricEndpoint;
import dev.dma.spi.FabricProvider;
import java.lang.foreign.MemorySegment;
import java.util.Set;

/**
 * A {@link FabricEndpoint} that completes every post at once and keeps nothing per peer (an
 * address-vector entry is a counter), so a benchmark over it measures dma's own per-transfer and
 * per-peer costs: no copy, no provider state that grows with peers. Used by the fabric worker's
 * thread only, as every endpoint.
 */
public final class InstantEndpoint implements FabricEndpoint {
  private int[] ring = new int[0];
  private int head;
  private int count;
  private long nextPeer;

  /** A new endpoint. */
  public InstantEndpoint() {}

  /** A provider that opens {@link InstantEndpoint}s. */
  public static final class Provider implements FabricProvider {
    /** A provider. */
    public Provider() {}

    @Override
    public String name() {
      return "fake";
    }

    @Override
    public int priority() {
      return 0;
    }

    @Override
    public Availability availability() {
      return Availability.AVAILABLE;
    }

    @Override
    public FabricEndpoint open(DmaConfiguration configuration) {
      return new InstantEndpoint();
    }
  }

  @Override
  public byte[] localAddress() {
    return new byte[16];
  }

  @Override
  public long insertPeer(byte[] address) {
    return nextPeer++;
  }

  @Override
  public int removePeer(long handle) {
    return 0;
  }

  @Override
  public int maxTx() {
    return 0;
  }

  @Override
  public boolean requiresLocalRegistration() {
    return false;
  }

  @Override
  public Set<Capability> capabilities() {
    return Set.of();
  }

  @Override
  public long register(long address, long lengthBytes, MemoryKind kind) {
    return 1;
  }

  @Override
  public long descriptor(long registration) {
    return 0;
  }

  @Override
  public void deregister(long registration) {}

  @Override
  public void openSlots(int slots) {
    ring = new int[slots];
  }

  @Override
  public int postWrite(
      int slot,
      long peer,
      long localAddress,
      long lengthBytes,
      long descriptor,
      long remoteAddress,
      long remoteKey) {
    ring[(head + count++) % ring.length] = slot;
    return POSTED;
  }

  @Override
  public int postRead(
      int slot,
      long peer,
      long localAddress,
      long lengthBytes,
      long descriptor,
      long remoteAddress,
      long remoteKey) {
    return postWrite(slot, peer, localAddress, lengthBytes, descriptor, remoteAddress, remoteKey);
  }

  @Override
  public String errorText(int code) {
    return "error " + code;
  }

  @Override
  public int reap(CompletionSink sink, int max) {
    int n = Math.min(max, count);
    for (int i = 0; i < n; i++) {
      int slot = ring[head];
      head = (head + 1) % ring.length;
      count--;
      sink.completed(slot);
    }
    return n;
  }

  @Override
  public ExposedRegion expose(MemorySegment segment, RemoteAccess access) {
    throw new UnsupportedOperationException();
  }

  @Override
  public void progress() {}

  @Override
  public EndpointInfo describe() {
    return new EndpointInfo("instant", 0, 0, 0, false, false);
  }

  @Override
  public void close() {}
}
