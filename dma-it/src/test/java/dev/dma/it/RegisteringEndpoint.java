package dev.dma.it;

import dev.dma.api.MemoryKind;
import dev.dma.api.RemoteAccess;
import dev.dma.spi.CompletionSink;
import dev.dma.spi.EndpointInfo;
import dev.dma.spi.ExposedRegion;
import dev.dma.spi.FabricEndpoint;
import java.lang.foreign.MemorySegment;
import java.util.Set;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * A real endpoint that claims to need local registration, so the registration cache runs its EFA
 * path against a real libfabric domain (tcp needs none by itself): every register and deregister is
 * a real {@code fi_mr_reg} and {@code fi_close}, counted here.
 */
final class RegisteringEndpoint implements FabricEndpoint {
  private final FabricEndpoint real;
  final AtomicInteger registrations = new AtomicInteger();
  final AtomicInteger deregistrations = new AtomicInteger();

  RegisteringEndpoint(FabricEndpoint real) {
    this.real = real;
  }

  @Override
  public boolean requiresLocalRegistration() {
    return true;
  }

  @Override
  public Set<Capability> capabilities() {
    return real.capabilities();
  }

  @Override
  public long register(long address, long lengthBytes, MemoryKind kind) {
    long handle = real.register(address, lengthBytes, kind);
    registrations.incrementAndGet();
    return handle;
  }

  @Override
  public void deregister(long registration) {
    real.deregister(registration);
    deregistrations.incrementAndGet();
  }

  @Override
  public long descriptor(long registration) {
    return real.descriptor(registration);
  }

  @Override
  public byte[] localAddress() {
    return real.localAddress();
  }

  @Override
  public byte[] peerIdentity(byte[] address) {
    return real.peerIdentity(address);
  }

  @Override
  public long insertPeer(byte[] address) {
    return real.insertPeer(address);
  }

  @Override
  public int removePeer(long handle) {
    return real.removePeer(handle);
  }

  @Override
  public int maxTx() {
    return real.maxTx();
  }

  @Override
  public void openSlots(int count) {
    real.openSlots(count);
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
    return real.postWrite(
        slot, peer, localAddress, lengthBytes, descriptor, remoteAddress, remoteKey);
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
    return real.postRead(
        slot, peer, localAddress, lengthBytes, descriptor, remoteAddress, remoteKey);
  }

  @Override
  public String errorText(int code) {
    return real.errorText(code);
  }

  @Override
  public int reap(CompletionSink sink, int max) {
    return real.reap(sink, max);
  }

  @Override
  public ExposedRegion expose(MemorySegment segment, RemoteAccess access) {
    return real.expose(segment, access);
  }

  @Override
  public void progress() {
    real.progress();
  }

  @Override
  public EndpointInfo describe() {
    return real.describe();
  }

  @Override
  public void close() {
    real.close();
  }
}
