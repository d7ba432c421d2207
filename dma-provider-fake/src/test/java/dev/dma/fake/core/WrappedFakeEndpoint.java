package dev.dma.fake.core;

import dev.dma.api.DmaException;
import dev.dma.api.MemoryKind;
import dev.dma.api.RemoteAccess;
import dev.dma.spi.CompletionSink;
import dev.dma.spi.EndpointInfo;
import dev.dma.spi.ExposedRegion;
import dev.dma.spi.FabricEndpoint;
import java.lang.foreign.MemorySegment;
import java.util.Collections;
import java.util.EnumSet;
import java.util.Set;
import java.util.concurrent.atomic.AtomicLong;
import org.jspecify.annotations.Nullable;

/**
 * A fake endpoint with what the fake's own script does not offer: it declares capabilities the fake
 * never does (such as {@link FabricEndpoint.Capability#STRANDS_OPERATIONS_OF_GONE_PEERS}, shm's),
 * asks for a quiet reset ({@link FabricEndpoint#wantsQuietReset}) when the test says so, can flood
 * every reap with stray completions, as a provider that keeps producing would, take a new address
 * at a reset, and have its probe throw. Everything else is the wrapped endpoint's. Counts its
 * reaps.
 *
 * <p>Threads: the worker's, as the wrapped endpoint's; the setters and counters from any thread.
 */
final class WrappedFakeEndpoint implements FabricEndpoint {
  private final FabricEndpoint endpoint;
  private final Set<Capability> extra;
  private volatile boolean wantsQuietReset;
  private volatile boolean flood;
  private volatile boolean newAddressOnReset;
  private volatile boolean probeThrows;
  private volatile int addressGeneration;
  private final AtomicLong reaps = new AtomicLong();

  WrappedFakeEndpoint(FabricEndpoint endpoint, Set<Capability> extra) {
    this.endpoint = endpoint;
    this.extra = extra.isEmpty() ? Set.of() : EnumSet.copyOf(extra);
  }

  /**
   * Makes {@link #wantsQuietReset} answer true until the next {@link #reset}, as shm asks for one
   * until it gets it.
   */
  void wantQuietReset() {
    wantsQuietReset = true;
  }

  /**
   * Makes every reap from now on deliver {@code max} completions for a slot that holds no operation
   * (slot -1), and nothing else, while {@code value}; the worker ignores such a completion.
   */
  void floodStrayCompletions(boolean value) {
    flood = value;
  }

  /**
   * Makes every reset from now on give the endpoint a new address (the wrapped one's, its last byte
   * changed by the number of resets), as a tcp endpoint bound to a new port would.
   */
  void newAddressOnReset() {
    newAddressOnReset = true;
  }

  /** Makes {@link #peerGone} throw from now on, as a buggy provider's probe would. */
  void probeThrows() {
    probeThrows = true;
  }

  /** How many times the worker reaped. */
  long reaps() {
    return reaps.get();
  }

  @Override
  public Set<Capability> capabilities() {
    EnumSet<Capability> declared = EnumSet.noneOf(Capability.class);
    declared.addAll(endpoint.capabilities());
    declared.addAll(extra);
    return Collections.unmodifiableSet(declared);
  }

  @Override
  public boolean wantsQuietReset() {
    return wantsQuietReset || endpoint.wantsQuietReset();
  }

  @Override
  public @Nullable String peerGone(byte[] address) {
    if (probeThrows) {
      throw new IllegalStateException("the probe broke");
    }
    return endpoint.peerGone(address);
  }

  @Override
  public byte[] localAddress() {
    byte[] address = endpoint.localAddress();
    address[address.length - 1] += (byte) addressGeneration;
    return address;
  }

  @Override
  public byte[] peerIdentity(byte[] address) {
    return endpoint.peerIdentity(address);
  }

  @Override
  public String peerText(byte[] address) {
    return endpoint.peerText(address);
  }

  @Override
  public long insertPeer(byte[] address) {
    return endpoint.insertPeer(address);
  }

  @Override
  public int removePeer(long handle) {
    return endpoint.removePeer(handle);
  }

  @Override
  public int maxTx() {
    return endpoint.maxTx();
  }

  @Override
  public boolean requiresLocalRegistration() {
    return endpoint.requiresLocalRegistration();
  }

  @Override
  public long register(long address, long lengthBytes, MemoryKind kind) {
    return endpoint.register(address, lengthBytes, kind);
  }

  @Override
  public long register(long address, long lengthBytes) {
    return endpoint.register(address, lengthBytes);
  }

  @Override
  public long descriptor(long registration) {
    return endpoint.descriptor(registration);
  }

  @Override
  public void deregister(long registration) {
    endpoint.deregister(registration);
  }

  @Override
  public void openSlots(int count) {
    endpoint.openSlots(count);
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
    return endpoint.postWrite(
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
    return endpoint.postRead(
        slot, peer, localAddress, lengthBytes, descriptor, remoteAddress, remoteKey);
  }

  @Override
  public String errorText(int code) {
    return endpoint.errorText(code);
  }

  @Override
  public DmaException.Reason postFailureReason(int code) {
    return endpoint.postFailureReason(code);
  }

  @Override
  public int reap(CompletionSink sink, int max) {
    reaps.incrementAndGet();
    if (flood) {
      for (int i = 0; i < max; i++) {
        sink.completed(-1);
      }
      return max;
    }
    return endpoint.reap(sink, max);
  }

  @Override
  public ExposedRegion expose(MemorySegment segment, RemoteAccess access) {
    return endpoint.expose(segment, access);
  }

  @Override
  public @Nullable MemorySegment allocateExposable(long lengthBytes) {
    return endpoint.allocateExposable(lengthBytes);
  }

  @Override
  public void progress() {
    endpoint.progress();
  }

  @Override
  public boolean awaitIncoming(long timeoutNanos) {
    return endpoint.awaitIncoming(timeoutNanos);
  }

  @Override
  public boolean incomingPending() {
    return endpoint.incomingPending();
  }

  @Override
  public long incomingServed() {
    return endpoint.incomingServed();
  }

  @Override
  public void wakeup() {
    endpoint.wakeup();
  }

  @Override
  public void reset() {
    wantsQuietReset = false;
    endpoint.reset();
    if (newAddressOnReset) {
      addressGeneration++;
    }
  }

  @Override
  public EndpointInfo describe() {
    return endpoint.describe();
  }

  @Override
  public void close() {
    endpoint.close();
  }
}
