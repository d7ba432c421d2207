package dev.dma.core;

import dev.dma.api.Advertisement;
import dev.dma.api.DmaConfiguration;
import dev.dma.api.DmaException;
import dev.dma.api.MemoryKind;
import dev.dma.api.RemoteAccess;
import dev.dma.spi.Availability;
import dev.dma.spi.CompletionSink;
import dev.dma.spi.EndpointInfo;
import dev.dma.spi.ExposedRegion;
import dev.dma.spi.FabricEndpoint;
import dev.dma.spi.FabricProvider;
import java.lang.foreign.MemorySegment;
import java.util.ArrayDeque;
import java.util.HashMap;
import java.util.Map;
import java.util.Set;

/**
 * A minimal in-memory {@link FabricEndpoint} for dma-core's own worker tests: exposed memory is
 * found by key, a post is queued and, on the next reap, its bytes are copied between the local
 * operand and the exposed region and its completion delivered. Posts to {@link #REFUSED_KEY} are
 * refused with {@code -FI_EINVAL}; posts to {@link #BLACK_HOLE_KEY} never complete; {@link
 * #reset()} discards everything posted. No local registration. Synchronized, so the test thread may
 * expose and inspect while the worker posts and reaps.
 */
class LoopbackTestEndpoint implements FabricEndpoint {
  /** A remote key whose posts are refused outright. */
  static final long REFUSED_KEY = 1_000_001;

  /** A remote key whose posts are accepted and never complete. */
  static final long BLACK_HOLE_KEY = 1_000_002;

  private static final int FI_EINVAL = 22;
  private static final int FI_EACCES = 13;

  private record Posted(
      int slot, boolean write, long local, long lengthBytes, long remote, long key) {}

  private byte[] address = {10, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7};
  private boolean newAddressOnReset;
  private final Map<Long, MemorySegment> regions = new HashMap<>();
  private final ArrayDeque<Posted> posted = new ArrayDeque<>();
  private long nextKey = 1;
  private long nextPeer;
  private int slots;
  private int resets;
  private int closes;
  private int completions;

  LoopbackTestEndpoint() {}

  /** An endpoint whose address ends in {@code id}, so that several are told apart. */
  LoopbackTestEndpoint(int id) {
    address[15] = (byte) id;
  }

  /**
   * Makes every later reset change the address (the second-to-last byte counts resets), as a tcp
   * endpoint that binds a new port does.
   */
  synchronized void newAddressOnReset() {
    newAddressOnReset = true;
  }

  /** A provider whose every open answers this endpoint. */
  FabricProvider provider() {
    LoopbackTestEndpoint endpoint = this;
    return new FabricProvider() {
      @Override
      public String name() {
        return "loopback-test";
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
        return endpoint;
      }
    };
  }

  /** An advertisement for a key this endpoint treats specially (no memory behind it). */
  synchronized Advertisement advertisementFor(long key) {
    return new Advertisement(address.clone(), key, 0, 1 << 20);
  }

  /** Posts accepted and not yet completed or discarded. */
  synchronized int posted() {
    return posted.size();
  }

  /** Resets so far. */
  synchronized int resets() {
    return resets;
  }

  /** Closes so far. */
  synchronized int closes() {
    return closes;
  }

  /** Completions delivered to a sink so far. */
  synchronized int completions() {
    return completions;
  }

  @Override
  public synchronized byte[] localAddress() {
    return address.clone();
  }

  @Override
  public synchronized long insertPeer(byte[] peer) {
    return nextPeer++;
  }

  @Override
  public int removePeer(long handle) {
    return 0;
  }

  @Override
  public int maxTx() {
    return 64;
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
    throw new UnsupportedOperationException("no local registration here");
  }

  @Override
  public long descriptor(long registration) {
    throw new UnsupportedOperationException("no local registration here");
  }

  @Override
  public void deregister(long registration) {
    throw new UnsupportedOperationException("no local registration here");
  }

  @Override
  public synchronized void openSlots(int count) {
    slots = count;
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
    return post(new Posted(slot, true, localAddress, lengthBytes, remoteAddress, remoteKey));
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
    return post(new Posted(slot, false, localAddress, lengthBytes, remoteAddress, remoteKey));
  }

  private synchronized int post(Posted op) {
    if (op.slot < 0 || op.slot >= slots) {
      throw new IllegalStateException("slot " + op.slot + " outside the " + slots + " opened");
    }
    if (op.key == REFUSED_KEY) {
      return -FI_EINVAL;
    }
    posted.addLast(op);
    return POSTED;
  }

  @Override
  public String errorText(int code) {
    return switch (Math.abs(code)) {
      case FI_EINVAL -> "Invalid argument";
      case FI_EACCES -> "Permission denied";
      default -> "error " + code;
    };
  }

  @Override
  @SuppressWarnings("restricted") // the worker's operand addresses, valid while posted
  public synchronized int reap(CompletionSink sink, int max) {
    int delivered = 0;
    // Held ops rotate to the back; every other op completes, copying its bytes first.
    for (int left = posted.size(); left > 0 && delivered < max; left--) {
      Posted op = posted.pollFirst();
      if (op.key == BLACK_HOLE_KEY) {
        posted.addLast(op);
        continue;
      }
      MemorySegment region = regions.get(op.key);
      long offset = region == null ? -1 : op.remote - region.address();
      if (region == null || offset < 0 || offset + op.lengthBytes > region.byteSize()) {
        sink.failed(op.slot, FI_EACCES, 0, "remote key " + op.key + " or range refused");
      } else {
        MemorySegment local = MemorySegment.ofAddress(op.local).reinterpret(op.lengthBytes);
        MemorySegment remote = region.asSlice(offset, op.lengthBytes);
        if (op.write) {
          remote.copyFrom(local);
        } else {
          local.copyFrom(remote);
        }
        sink.completed(op.slot);
      }
      delivered++;
      completions++;
    }
    return delivered;
  }

  @Override
  public synchronized ExposedRegion expose(MemorySegment segment, RemoteAccess access) {
    long key = nextKey++;
    regions.put(key, segment);
    Advertisement ad =
        new Advertisement(address.clone(), key, segment.address(), segment.byteSize());
    return new ExposedRegion() {
      @Override
      public Advertisement advertisement() {
        return ad;
      }

      @Override
      public void close() {
        synchronized (LoopbackTestEndpoint.this) {
          regions.remove(key);
        }
      }
    };
  }

  @Override
  public void progress() {}

  // When set, closing the transport fails, as a provider's fi_close(ep) may: reset and close throw.
  private boolean transportCloseFails;

  /** Makes every later reset and close fail as if the provider refused to close the transport. */
  synchronized void failTransportClose() {
    transportCloseFails = true;
  }

  /**
   * Discards every posted op without a completion, as a transport reopen does; or, after {@link
   * #failTransportClose()}, throws, keeping them posted.
   */
  @Override
  public synchronized void reset() {
    resets++;
    if (transportCloseFails) {
      throw new DmaException(DmaException.Kind.FABRIC, "fi_close(ep): Device or resource busy");
    }
    posted.clear();
    if (newAddressOnReset) {
      address = address.clone();
      address[14]++;
    }
  }

  @Override
  public EndpointInfo describe() {
    return new EndpointInfo("loopback-test", 0, 0, 0, false, true);
  }

  @Override
  public synchronized void close() {
    closes++;
    if (transportCloseFails) {
      throw new DmaException(DmaException.Kind.FABRIC, "fi_close(ep): Device or resource busy");
    }
  }
}
