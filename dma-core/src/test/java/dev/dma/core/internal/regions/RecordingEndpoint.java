package dev.dma.core.internal.regions;

import dev.dma.api.DmaException;
import dev.dma.api.MemoryKind;
import dev.dma.api.RemoteAccess;
import dev.dma.spi.CompletionSink;
import dev.dma.spi.EndpointInfo;
import dev.dma.spi.ExposedRegion;
import dev.dma.spi.FabricEndpoint;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

/**
 * A hand-written {@link FabricEndpoint} for the registration cache and peer table tests: hands out
 * registration handles and fi_addrs, records every register, deregister, insert and remove, and
 * knows which handles are live. Registration calls are thread-safe (deregistration runs on any
 * thread); the peer calls are for one thread. Data-path methods are not supported.
 */
public final class RecordingEndpoint implements FabricEndpoint {
  /** Test settings: set before use. */
  public volatile boolean requiresLocalRegistration = true;

  /** Identity rule: every byte (opaque formats), or EFA's (32 bytes, GID + QPN). */
  public volatile boolean efa;

  /** Registrations longer than this fail with -FI_EINVAL (a widened span the device refuses). */
  public volatile long failRegistrationsLongerThan = Long.MAX_VALUE;

  /** A simulated RLIMIT_MEMLOCK: registering past it fails with -FI_ENOMEM, like ibv_reg_mr. */
  public volatile long memlockBytes = Long.MAX_VALUE;

  /**
   * Runs at the start of every {@link #register} call, on the registering thread, when set: lets a
   * test hold a registration in progress (on a latch) while another thread invalidates.
   */
  public volatile Runnable beforeRegister;

  /** What {@link #removePeer} returns. */
  public volatile int removePeerCode;

  /** Thrown by {@link #descriptor} when set, after the handle it was asked for was registered. */
  public volatile RuntimeException descriptorFailure;

  /** Thrown by {@link #deregister} when set, after the registration was closed. */
  public volatile RuntimeException deregisterFailure;

  /** Thrown by {@link #insertPeer} when set, as a provider's refused insert would be. */
  public volatile RuntimeException insertFailure;

  private final AtomicLong nextRegistration = new AtomicLong(1);
  private final Map<Long, long[]> liveRegistrations = new ConcurrentHashMap<>();
  private final AtomicLong liveBytes = new AtomicLong();
  private final AtomicInteger registerCalls = new AtomicInteger();
  private final AtomicInteger deregisterCalls = new AtomicInteger();
  // Not copy-on-write: a test registers 100,000 times, and copying on each add is quadratic.
  private final List<long[]> registered = Collections.synchronizedList(new ArrayList<>());
  private final List<String> faults = new CopyOnWriteArrayList<>();
  private volatile MemoryKind lastKind;

  private long nextPeer;
  private final Map<Long, byte[]> livePeers = new ConcurrentHashMap<>();
  private final List<byte[]> inserted = new ArrayList<>();
  private final List<Long> removed = new ArrayList<>();

  @Override
  public long register(long address, long lengthBytes, MemoryKind kind) {
    lastKind = kind;
    Runnable hook = beforeRegister;
    if (hook != null) {
      hook.run();
    }
    registerCalls.incrementAndGet();
    if (lengthBytes <= 0) {
      faults.add("registered " + lengthBytes + " bytes");
    }
    if (lengthBytes > failRegistrationsLongerThan) {
      throw new DmaException(
          DmaException.Kind.FABRIC, "fi_mr_reg(operand): Invalid argument (-22)", 22, 0, null);
    }
    if (liveBytes.addAndGet(lengthBytes) > memlockBytes) {
      liveBytes.addAndGet(-lengthBytes);
      throw new DmaException(
          DmaException.Kind.FABRIC,
          "fi_mr_reg(operand): Cannot allocate memory (-12)",
          12,
          0,
          null);
    }
    long handle = nextRegistration.getAndIncrement();
    liveRegistrations.put(handle, new long[] {address, lengthBytes});
    registered.add(new long[] {address, lengthBytes});
    return handle;
  }

  @Override
  public long descriptor(long registration) {
    RuntimeException failure = descriptorFailure;
    if (failure != null) {
      throw failure;
    }
    if (!liveRegistrations.containsKey(registration)) {
      faults.add("descriptor of closed registration " + registration);
    }
    return descriptorOf(registration);
  }

  /** The descriptor this endpoint hands out for a handle. */
  public static long descriptorOf(long registration) {
    return 0xD000_0000L + registration;
  }

  @Override
  public void deregister(long registration) {
    deregisterCalls.incrementAndGet();
    long[] range = liveRegistrations.remove(registration);
    if (range == null) {
      faults.add("deregistered " + registration + " twice, or one never registered");
    } else {
      liveBytes.addAndGet(-range[1]);
    }
    RuntimeException failure = deregisterFailure;
    if (failure != null) {
      throw failure;
    }
  }

  /** Whether a registration handle is live (registered, not yet deregistered). */
  public boolean isLive(long registration) {
    return liveRegistrations.containsKey(registration);
  }

  /** The kind the latest register call named; null before the first. */
  public MemoryKind lastKind() {
    return lastKind;
  }

  /** Register calls, including failed ones. */
  public int registerCalls() {
    return registerCalls.get();
  }

  /** Successful registrations as {base, length}, in order. */
  public List<long[]> registered() {
    synchronized (registered) {
      return List.copyOf(registered);
    }
  }

  /** Deregister calls. */
  public int deregisterCalls() {
    return deregisterCalls.get();
  }

  /** Live registrations. */
  public int liveRegistrations() {
    return liveRegistrations.size();
  }

  /** Bytes live registrations cover. */
  public long liveBytes() {
    return liveBytes.get();
  }

  /** Contract violations seen (double deregistration, descriptor of a closed handle...). */
  public List<String> faults() {
    return faults;
  }

  @Override
  public byte[] peerIdentity(byte[] address) {
    if (!efa) {
      return address.clone();
    }
    if (address.length != 32) {
      throw DmaException.fabric("efa address is " + address.length + " bytes, not 32");
    }
    return Arrays.copyOf(address, 18);
  }

  /** Forgets every peer, as closing and reopening the address vector does. */
  @Override
  public void reset() {
    livePeers.clear();
  }

  @Override
  public long insertPeer(byte[] address) {
    RuntimeException failure = insertFailure;
    if (failure != null) {
      throw failure;
    }
    long handle = nextPeer++;
    livePeers.put(handle, address.clone());
    inserted.add(address.clone());
    return handle;
  }

  @Override
  public int removePeer(long handle) {
    removed.add(handle);
    if (livePeers.remove(handle) == null) {
      faults.add("removed peer " + handle + " twice, or one never inserted");
    }
    return removePeerCode;
  }

  /** Addresses inserted, in order. */
  public List<byte[]> inserted() {
    return inserted;
  }

  /** Handles removed, in order. */
  public List<Long> removed() {
    return removed;
  }

  /** Whether a peer handle is in the address vector. */
  public boolean isLivePeer(long handle) {
    return livePeers.containsKey(handle);
  }

  /** Live peers. */
  public int livePeers() {
    return livePeers.size();
  }

  @Override
  public boolean requiresLocalRegistration() {
    return requiresLocalRegistration;
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
