package dev.dma.core.internal.regions;

import dev.dma.api.MemoryKind;
import dev.dma.spi.FabricEndpoint;
import java.lang.System.Logger.Level;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.concurrent.atomic.AtomicLong;

/**
 * One local memory registration ({@link FabricEndpoint#register} handle and its descriptor) over
 * {@code [base, end)}, reference-counted by leases.
 *
 * <h2>Ownership</h2>
 *
 * A new registration carries one lease, owned by whoever created it. Each {@link #retain()} adds a
 * lease and each {@link #release()} drops one; the holder of a lease must release it exactly once.
 * The {@link RegionRegistry} holds one lease per entry it tracks, and every operation posted
 * against a registration holds one from post until its completion, so a reclaim that retires the
 * entry never closes a registration whose descriptor is still on the wire (that was a production
 * crash in the crate this ports). {@link FabricEndpoint#deregister} runs exactly once, when the
 * last lease drops, on the thread that drops it; never once the endpoint closed, which closed it
 * ({@link #releaseAfterEndpointClosed}).
 *
 * <h2>Threads</h2>
 *
 * {@link #retain()}, {@link #release()} and the accessors may be called from any thread and never
 * allocate. A release that leaves only the registry's lease on a cached span takes the registry's
 * lock briefly, to put the span on its idle list. The tracking fields are guarded by the registry's
 * lock.
 */
public final class Registration {
  private static final System.Logger LOG = System.getLogger(Registration.class.getName());
  private static final VarHandle LEASES;

  static {
    try {
      LEASES = MethodHandles.lookup().findVarHandle(Registration.class, "leases", int.class);
    } catch (ReflectiveOperationException impossible) {
      throw new ExceptionInInitializerError(impossible);
    }
  }

  private final FabricEndpoint endpoint;
  private final long handle;
  private final long descriptor;
  private final long base;
  private final long end;
  private final boolean evictable;

  /** The kind of memory registered, as the provider's {@code register} was told. */
  private final MemoryKind kind;

  /** The owning endpoint's pinned-byte tally, lowered at deregistration; null when not counted. */
  private final AtomicLong pinnedBytes;

  /** Accessed through {@link #LEASES}. */
  @SuppressWarnings("unused")
  private volatile int leases = 1;

  // Tracking state, guarded by the RegionRegistry's lock: the idle list's links (an entry is on it
  // while nothing but the registry leases it) and the domain map that tracks it.
  Registration lruPrev;
  Registration lruNext;
  boolean tracked;
  boolean idle;
  RegionRegistry.DomainMap map;

  /**
   * The registry that last tracked this registration, told when its lease count drops to the
   * registry's one. Written under that registry's lock before any other thread can hold a lease
   * taken from it (leases come through the lock, or from the thread that tracked it), so a holder's
   * unlocked read in {@link #release()} sees it; never cleared, since a stale value only costs a
   * lock acquisition that finds the entry untracked.
   */
  RegionRegistry registry;

  Registration(
      FabricEndpoint endpoint,
      long handle,
      long descriptor,
      long base,
      long end,
      MemoryKind kind,
      boolean evictable,
      AtomicLong pinnedBytes) {
    this.endpoint = endpoint;
    this.kind = kind;
    this.handle = handle;
    this.descriptor = descriptor;
    this.base = base;
    this.end = end;
    this.evictable = evictable;
    this.pinnedBytes = pinnedBytes;
  }

  /**
   * Registers {@code [base, base + lengthBytes)} of host memory on {@code endpoint} and wraps it,
   * with one lease owned by the caller. Call on the endpoint's owning thread.
   *
   * @param endpoint the endpoint to register on
   * @param base the first byte
   * @param lengthBytes the length, positive, not overflowing
   * @param evictable whether the registry may evict it when no operation leases it (a cached span),
   *     or never (a region pinned through the service's {@code register})
   * @return the registration, holding one lease for the caller
   * @throws dev.dma.api.DmaException whatever the endpoint's {@code register} throws
   */
  public static Registration register(
      FabricEndpoint endpoint, long base, long lengthBytes, boolean evictable) {
    return register(endpoint, base, lengthBytes, MemoryKind.HOST, evictable, null);
  }

  static Registration register(
      FabricEndpoint endpoint,
      long base,
      long lengthBytes,
      MemoryKind kind,
      boolean evictable,
      AtomicLong pinnedBytes) {
    long handle = endpoint.register(base, lengthBytes, kind);
    long descriptor;
    try {
      descriptor = endpoint.descriptor(handle);
    } catch (RuntimeException | Error failed) {
      // Nothing owns the handle yet: close it here, or it stays pinned until the domain closes.
      endpoint.deregister(handle);
      throw failed;
    }
    if (pinnedBytes != null) {
      pinnedBytes.addAndGet(lengthBytes);
    }
    return new Registration(
        endpoint, handle, descriptor, base, base + lengthBytes, kind, evictable, pinnedBytes);
  }

  /**
   * Adds a lease; the caller must {@link #release()} it exactly once. Only a holder of a lease (or
   * the registry, under its lock, for an entry it tracks) may call this: a registration whose last
   * lease dropped is closed for good. Any thread; no allocation.
   *
   * @return this registration
   * @throws IllegalStateException if the registration was already closed (a caller bug)
   */
  public Registration retain() {
    int previous = (int) LEASES.getAndAdd(this, 1);
    if (previous <= 0) {
      LEASES.getAndAdd(this, -1);
      throw new IllegalStateException("retained a registration already closed: " + this);
    }
    return this;
  }

  /**
   * Drops one lease. Dropping the last one deregisters, here, on the calling thread: any thread.
   * Must not be called under the registry's lock (deregistering there would deadlock a re-entrant
   * free that invalidates). No allocation unless it deregisters and the endpoint fails.
   *
   * @throws IllegalStateException if no lease was left (released more often than leased)
   */
  public void release() {
    drop(true);
  }

  /**
   * Drops one lease once the endpoint that registered this has closed: {@link
   * FabricEndpoint#close()} closed the registration with it, so dropping the last lease only gives
   * back the pinned bytes; deregistering there would close a handle twice. The worker calls this at
   * shutdown for the transfers it still held, whose leases it drops only after the endpoint closed
   * (so that no provider touches their operands after their failure is delivered).
   *
   * @throws IllegalStateException if no lease was left (released more often than leased)
   */
  public void releaseAfterEndpointClosed() {
    drop(false);
  }

  private void drop(boolean deregister) {
    int remaining = (int) LEASES.getAndAdd(this, -1) - 1;
    if (remaining > 0) {
      if (remaining == 1 && evictable) {
        RegionRegistry owner = registry;
        if (owner != null) {
          // Possibly only the registry's lease is left: an idle cached span, evictable now. The
          // registry keeps its idle list and idle bytes as leases come and go, so eviction never
          // has to search for idle entries.
          owner.becameIdle(this);
        }
      }
      return;
    }
    if (remaining < 0) {
      LEASES.getAndAdd(this, 1);
      throw new IllegalStateException("released a registration with no lease left: " + this);
    }
    try {
      if (deregister) {
        endpoint.deregister(handle);
      }
    } catch (RuntimeException failed) {
      // A release runs inside invalidate loops and completions: one failed close must not leave
      // the remaining leases of that loop held, nor fail an unrelated transfer.
      LOG.log(
          Level.WARNING,
          () ->
              "deregistering " + (end - base) + " bytes at 0x" + Long.toHexString(base) + " failed",
          failed);
    } finally {
      // Lowered only once the pages are unpinned, so the worker's bound check never counts on room
      // the kernel has not given back yet (it would then see -FI_ENOMEM instead).
      if (pinnedBytes != null) {
        pinnedBytes.addAndGet(-(end - base));
      }
    }
  }

  /**
   * The descriptor to post with ({@code fi_mr_desc}). Valid while the caller holds a lease.
   *
   * @return the descriptor
   */
  public long descriptor() {
    return descriptor;
  }

  /**
   * The endpoint's registration handle.
   *
   * @return the handle
   */
  public long handle() {
    return handle;
  }

  /**
   * The first registered byte.
   *
   * @return the base address
   */
  public long base() {
    return base;
  }

  /**
   * One past the last registered byte.
   *
   * @return the end address
   */
  public long end() {
    return end;
  }

  /**
   * The registered length.
   *
   * @return {@code end() - base()}
   */
  public long lengthBytes() {
    return end - base;
  }

  /**
   * The kind of memory registered.
   *
   * @return the kind the provider's {@code register} was given
   */
  public MemoryKind kind() {
    return kind;
  }

  /**
   * Whether the registry may evict this registration when no operation leases it.
   *
   * @return true for a cached span, false for a pinned region
   */
  public boolean evictable() {
    return evictable;
  }

  /**
   * The current number of leases (the registry's and every holder's); 0 once deregistered. A
   * snapshot, for tests and diagnostics.
   *
   * @return the lease count
   */
  public int leases() {
    return (int) LEASES.getVolatile(this);
  }

  @Override
  public String toString() {
    return "Registration[base=0x"
        + Long.toHexString(base)
        + ", length="
        + (end - base)
        + ", leases="
        + leases()
        + "]";
  }
}
