package dev.dma.bench.jmh;

import dev.dma.api.MemoryKind;
import dev.dma.api.RemoteAccess;
import dev.dma.spi.CompletionSink;
import dev.dma.spi.EndpointInfo;
import dev.dma.spi.ExposedRegion;
import dev.dma.spi.FabricEndpoint;
import java.lang.foreign.MemorySegment;
import java.util.Set;

/**
 * A {@link FabricEndpoint} whose registrations and address-vector entries are counters, so the
 * benchmarks measure the cache and the table, not a provider. Its registration calls are
 * thread-safe enough for one benchmark thread plus deregistration from any thread (it keeps no
 * state per handle). The data path is unsupported.
 */
public final class NullEndpoint implements FabricEndpoint {
  private long nextRegistration = 1;
  private long nextPeer;

  /** A new endpoint that requires local registration. */
  public NullEndpoint() {}

  @Override
  public synchronized long register(long address, long lengthBytes, MemoryKind kind) {
    return nextRegistration++;
  }

  @Override
  public long descriptor(long registration) {
    return registration << 4;
  }

  @Override
  public void deregister(long registration) {}

  @Override
  public long insertPeer(byte[] address) {
    return nextPeer++;
  }

  @Override
  public int removePeer(long handle) {
    return 0;
  }

  @Override
  public boolean requiresLocalRegistration() {
    return true;
  }

  @Override
  public Set<Capability> capabilities() {
    return Set.of();
  }

  @Override
  public byte[] localAddress() {
    return new byte[16];
  }

  @Override
  public int maxTx() {
    return 0;
  }

  @Override
  public void openSlots(int count) {
    throw new UnsupportedOperationException();
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
    throw new UnsupportedOperationException();
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
    throw new UnsupportedOperationException();
  }

  @Override
  public String errorText(int code) {
    return "error " + code;
  }

  @Override
  public int reap(CompletionSink sink, int max) {
    return 0;
  }

  @Override
  public ExposedRegion expose(MemorySegment segment, RemoteAccess access) {
    throw new UnsupportedOperationException();
  }

  @Override
  public void progress() {}

  @Override
  public EndpointInfo describe() {
    throw new UnsupportedOperationException();
  }

  @Override
  public void close() {}
}
