package dev.dma.core.internal.regions;

import dev.dma.api.CacheableSpan;
import dev.dma.api.DmaException;
import dev.dma.api.Errno;
import dev.dma.api.MemoryKind;
import dev.dma.api.Operands;
import dev.dma.spi.FabricEndpoint;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.concurrent.atomic.AtomicLong;

/**
 * One endpoint's local registrations: leases for the operands of posts (through the process-wide
 * {@link RegionRegistry}), regions pinned through the service's {@code register}, and a bound on
 * the bytes this endpoint keeps registered.
 *
 * <h2>Threads and ownership</h2>
 *
 * Owned by the fabric worker of its endpoint: {@link #lease}, {@link #pin} and {@link #close()} run
 * on that thread only, because they call the endpoint. The counters ({@link #hits()}, {@link
 * #misses()}, {@link #evictions()}, {@link #pinnedBytes()}) may be read from any thread; {@link
 * RegionRegistry#invalidate} reaches this endpoint's entries from any thread. The worker calls
 * {@link #close()} before closing the endpoint, so every cached registration is deregistered while
 * its domain is still open.
 *
 * <h2>The pinned-bytes bound</h2>
 *
 * {@code maxPinnedBytes} caps the bytes this endpoint keeps registered: cached spans, pinned
 * regions and the one-off registrations of in-flight operations. A registration that would exceed
 * it first evicts this domain's least recently released cached spans that no operation leases
 * (never a leased one, never a pinned region), at a cost that does not grow with their number; if
 * that is not enough, a widened span falls back to the operand's own extent. If even that cannot
 * fit, the leases operations hold fill the bound: the lease answers {@link #noRoomYet()} and the
 * worker holds the operation until a release makes room (or fails it as retryable, {@link
 * #noRoomError}). Only an operand longer than the bound itself, or a pinned region that does not
 * fit, fails at once naming {@code max_pinned_bytes} and {@code ulimit -l}. A registration the
 * kernel refuses with {@code -FI_ENOMEM} likewise evicts idle spans and retries before failing. The
 * public constructor derives the bound from the configuration and {@code RLIMIT_MEMLOCK} ({@link
 * PinnedMemoryLimit#bound(long)}); the bound is per endpoint.
 */
public final class LocalRegions implements AutoCloseable {
  private static final VarHandle HITS;
  private static final VarHandle MISSES;
  private static final VarHandle EVICTIONS;

  static {
    try {
      MethodHandles.Lookup lookup = MethodHandles.lookup();
      HITS = lookup.findVarHandle(LocalRegions.class, "hits", long.class);
      MISSES = lookup.findVarHandle(LocalRegions.class, "misses", long.class);
      EVICTIONS = lookup.findVarHandle(LocalRegions.class, "evictions", long.class);
    } catch (ReflectiveOperationException impossible) {
      throw new ExceptionInInitializerError(impossible);
    }
  }

  private final FabricEndpoint endpoint;
  private final RegionRegistry registry;
  private final long maxPinnedBytes;
  private final boolean required;

  /**
   * The one registration in progress (worker thread only, so one suffices and a miss allocates no
   * claim): lets an overlapping invalidate stop it from being cached.
   */
  private final RegionRegistry.Claim claim = new RegionRegistry.Claim();

  /**
   * What {@link #lease} returns when the operand fits under the bound only once operations release
   * their leases. Never deregisters: it carries an extra lease no one drops.
   */
  private final Registration noRoomYet;

  /** Lowered by whichever thread deregisters, so atomic. */
  private final AtomicLong pinnedBytes = new AtomicLong();

  // Written by the worker only; read with getOpaque by readers on other threads.
  private long hits;
  private long misses;
  private long evictions;

  /**
   * Local registrations for one endpoint, bounded as configured. Construct on (or before handing it
   * to) the worker.
   *
   * @param endpoint the endpoint, owned by the caller; this class registers and deregisters on it
   * @param registry where cached registrations are tracked: {@link RegionRegistry#global()} in
   *     production, so {@code invalidate} reaches them
   * @param maxPinnedBytes {@code DmaConfiguration.maxPinnedBytes()}: 0 for the default (as much as
   *     {@code RLIMIT_MEMLOCK} allows, unbounded when unlimited), else a positive bound, itself
   *     lowered to {@code RLIMIT_MEMLOCK} when that is finite; see {@link
   *     PinnedMemoryLimit#bound(long)}
   * @throws IllegalArgumentException if {@code maxPinnedBytes} is negative
   */
  public LocalRegions(FabricEndpoint endpoint, RegionRegistry registry, long maxPinnedBytes) {
    this(PinnedMemoryLimit.bound(maxPinnedBytes), endpoint, registry);
  }

  /**
   * Local registrations bounded at exactly {@code boundBytes}, whatever {@code RLIMIT_MEMLOCK}
   * says: for tests and benchmarks that need the same bound on every machine.
   *
   * @param endpoint the endpoint, owned by the caller
   * @param registry where cached registrations are tracked
   * @param boundBytes the most bytes this endpoint keeps registered, positive ({@link
   *     Long#MAX_VALUE} for no bound)
   * @return the local regions
   * @throws IllegalArgumentException if {@code boundBytes} is not positive
   */
  public static LocalRegions withExactBound(
      FabricEndpoint endpoint, RegionRegistry registry, long boundBytes) {
    return new LocalRegions(boundBytes, endpoint, registry);
  }

  private LocalRegions(long boundBytes, FabricEndpoint endpoint, RegionRegistry registry) {
    if (endpoint == null) {
      throw new NullPointerException("endpoint");
    }
    if (registry == null) {
      throw new NullPointerException("registry");
    }
    if (boundBytes <= 0) {
      throw new IllegalArgumentException(
          "the pinned-bytes bound must be positive, not " + boundBytes);
    }
    this.endpoint = endpoint;
    this.registry = registry;
    this.maxPinnedBytes = boundBytes;
    this.required = endpoint.requiresLocalRegistration();
    this.noRoomYet = new Registration(endpoint, 0, 0, 0, 0, MemoryKind.HOST, false, null).retain();
  }

  /**
   * A lease on a registration covering {@code [address, address + lengthBytes)}, for one post. The
   * caller holds the lease from post until the operation's completion is produced (or drops it
   * right away when the post is refused) and must {@link Registration#release()} it exactly once,
   * on any thread. Worker thread only.
   *
   * <p>A cache hit retains the covering registration without allocating and without asking the
   * context. A miss asks {@code context.cacheableSpan()} once; a span that contains the operand is
   * registered and tracked, so later operands inside it hit; a span that does not is ignored. If a
   * widened registration fails, the operand's own extent is registered instead (and still tracked,
   * at its real extent, since the caller promised to invalidate the span around it). An {@link
   * RegionRegistry#invalidate} overlapping the span between the miss and the tracking wins: the new
   * registration is returned for this operation but not cached, and deregisters when its lease
   * drops.
   *
   * @param address the operand's first byte
   * @param lengthBytes the operand's length, not negative
   * @param context the caller context, asked for its cacheable span only on a miss
   *     <p>A miss that would not fit under the bound even after evicting every idle cached span,
   *     while the operand alone is within the bound, registers nothing, does not ask the context
   *     and returns {@link #noRoomYet()}: the leases operations hold are what fill the bound, so
   *     the same lease may succeed once one of them is released. The caller either holds the
   *     operation and leases again later, or fails it with {@link #noRoomError}.
   * @param address the operand's first byte
   * @param lengthBytes the operand's length, not negative
   * @param context the caller context, asked for its cacheable span and its {@linkplain
   *     Operands#memoryKind() memory kind} only on a miss (its kind on every lease when the
   *     endpoint needs no local registration); {@code null} for host memory with no span
   * @return a retained registration; {@code null} when the endpoint needs no local registration and
   *     the operand is system memory (nothing is registered); or {@link #noRoomYet()}, which holds
   *     no registration and must not be released
   * @throws DmaException {@code local operand range overflows}; whatever the endpoint's {@code
   *     register} throws (a kind it cannot register among them); the context's {@link
   *     Operands#kindOf} refusal; or, when memory cannot be pinned (an operand longer than the
   *     bound, or the kernel refusing), a message naming {@code max_pinned_bytes} and {@code ulimit
   *     -l}
   */
  public Registration lease(long address, long lengthBytes, Operands context) {
    MemoryKind kind = null;
    if (!required) {
      // Memory other than system memory is registered even where host operands need no
      // registration (libfabric's FI_MR_HMEM), so here the kind is asked on every lease.
      kind = kindOf(context);
      if (kind.systemMemory()) {
        return null;
      }
    }
    long end = address + lengthBytes;
    if (address < 0 || lengthBytes < 0 || end < address) {
      throw DmaException.fabric(DmaException.Reason.BAD_REQUEST, "local operand range overflows");
    }
    Registration hit = registry.covering(this, address, end, claim);
    if (hit != null) {
      HITS.setOpaque(this, hits + 1);
      return hit;
    }
    if (lengthBytes <= maxPinnedBytes && !fitsAfterEviction(lengthBytes)) {
      // Even the operand's own extent cannot fit until an operation releases its lease. Checked
      // before the context is asked or a miss counted, since a held operation leases again on
      // every pass of its worker until it fits. An operand longer than the bound goes on, to fail
      // below with a message that says so.
      return noRoomYet;
    }
    MISSES.setOpaque(this, misses + 1);
    if (kind == null) {
      kind = kindOf(context);
    }
    CacheableSpan span = spanAround(context, address, end);
    if (span == null) {
      checkLength(lengthBytes);
      return register(address, lengthBytes, kind, true);
    }
    // The span contains the operand, so one claim over it covers the fallback registration too.
    registry.open(claim, span.base(), span.end(), true);
    try {
      Registration registration = null;
      if (span.base() != address || span.end() != end) {
        try {
          registration = register(span.base(), span.lengthBytes(), kind, true);
        } catch (DmaException widenedFailed) {
          // Pinning the whole span is an optimisation: the operand alone may still register (and
          // fit under the bound), so this one transfer need not fail.
          registration = null;
        }
      }
      if (registration == null) {
        checkLength(lengthBytes);
        registration = register(address, lengthBytes, kind, true);
      }
      // False when an invalidate overlapped the span since the miss: the pages may be freed and
      // reused, so this registration serves this operation only and deregisters with its lease.
      registry.trackClaimed(this, registration, claim);
      return registration;
    } finally {
      registry.abandon(claim); // a no-op unless a registration threw
    }
  }

  /**
   * Registers {@code [base, base + lengthBytes)} and tracks it with the registry as its sole holder
   * (behind the service's {@code register}): operands inside it hit, and it lives until the
   * region's owner invalidates it or this endpoint closes. Never evicted. An invalidate overlapping
   * it while it registers wins: it is deregistered before this returns. Worker thread only; a no-op
   * when the endpoint needs no local registration.
   *
   * @param base the first byte
   * @param lengthBytes the length, positive
   * @throws DmaException {@code pinned region range overflows}; {@code cannot register 0 bytes};
   *     whatever the endpoint's {@code register} throws; or, when memory cannot be pinned, a
   *     message naming {@code max_pinned_bytes} and {@code ulimit -l}
   */
  public void pin(long base, long lengthBytes) {
    pin(base, lengthBytes, MemoryKind.HOST);
  }

  /**
   * {@link #pin(long, long)} for memory of the given kind: registered even when the endpoint needs
   * no local registration, unless it is system memory.
   *
   * @param base the first byte
   * @param lengthBytes the length, positive
   * @param kind the memory's kind, handed to the endpoint's {@code register}
   * @throws DmaException as {@link #pin(long, long)}
   */
  public void pin(long base, long lengthBytes, MemoryKind kind) {
    if (!required && kind.systemMemory()) {
      return;
    }
    if (base < 0 || lengthBytes < 0 || base + lengthBytes < base) {
      throw DmaException.fabric(DmaException.Reason.BAD_REQUEST, "pinned region range overflows");
    }
    checkLength(lengthBytes);
    registry.open(claim, base, base + lengthBytes, false);
    try {
      Registration registration = register(base, lengthBytes, kind, false);
      // Untracked when the region's owner invalidated it meanwhile: then the release below is the
      // last lease and deregisters at once, as the invalidate would have.
      registry.trackClaimed(this, registration, claim);
      // The registry's lease is now the only one: the region's invalidate or close deregisters.
      registration.release();
    } finally {
      registry.abandon(claim); // a no-op unless the registration threw
    }
  }

  /**
   * Removes this endpoint's entries from the registry, deregistering each one no operation still
   * leases (the rest deregister when their last lease drops). Call on the worker before the
   * endpoint closes its domain. Idempotent.
   */
  @Override
  public void close() {
    registry.clearDomain(this);
  }

  /**
   * The placeholder {@link #lease} returns when an operand cannot be registered under the bound
   * until operations release their leases: compare by identity; never release it, never post its
   * descriptor.
   *
   * @return the placeholder, the same for every call on this instance
   */
  public Registration noRoomYet() {
    return noRoomYet;
  }

  /**
   * The failure of an operation whose lease kept answering {@link #noRoomYet()} and that its caller
   * will not hold any longer: {@link DmaException.Reason#BACKPRESSURE}, so retryable, with a
   * message naming {@code max_pinned_bytes}, its value and the setting that raises it. Any thread;
   * allocates (a cold path).
   *
   * @param lengthBytes the operand's length
   * @param why why the caller stopped holding it, e.g. {@code "no transfer in flight to release
   *     one"}
   * @return the exception, not thrown
   */
  public DmaException noRoomError(long lengthBytes, String why) {
    long pinned = pinnedBytes.get();
    return new DmaException(
        DmaException.Kind.FABRIC,
        DmaException.Reason.BACKPRESSURE,
        "registering the "
            + lengthBytes
            + "-byte operand would pin "
            + (pinned + lengthBytes)
            + " bytes on this endpoint, above max_pinned_bytes ("
            + maxPinnedBytes
            + " bytes; "
            + pinned
            + " are held by operations in flight and registered regions, none idle), and it was"
            + " held "
            + why
            + "; retry it, or raise the max_pinned_bytes configuration key"
            + " (DmaConfiguration.Builder.maxPinnedBytes), and ulimit -l (RLIMIT_MEMLOCK) when"
            + " that caps it",
        Errno.FI_ENOMEM,
        DmaException.UNKNOWN_ERRNO,
        null);
  }

  /**
   * Whether this endpoint needs local registrations at all.
   *
   * @return {@link FabricEndpoint#requiresLocalRegistration()}, read once at construction
   */
  public boolean required() {
    return required;
  }

  /**
   * Cache hits so far. Any thread.
   *
   * @return the count
   */
  public long hits() {
    return (long) HITS.getOpaque(this);
  }

  /**
   * Cache misses so far. Any thread.
   *
   * @return the count
   */
  public long misses() {
    return (long) MISSES.getOpaque(this);
  }

  /**
   * Cached spans evicted for the pinned-bytes bound so far. Any thread.
   *
   * @return the count
   */
  public long evictions() {
    return (long) EVICTIONS.getOpaque(this);
  }

  /**
   * Bytes this endpoint has registered right now. Any thread.
   *
   * @return the byte count
   */
  public long pinnedBytes() {
    return pinnedBytes.get();
  }

  /**
   * The bound on {@link #pinnedBytes()}.
   *
   * @return the bound; {@link Long#MAX_VALUE} when unbounded
   */
  public long maxPinnedBytes() {
    return maxPinnedBytes;
  }

  /** The context's kind; host memory for a null context (tests lease without one). */
  private static MemoryKind kindOf(Operands context) {
    return context == null ? MemoryKind.HOST : Operands.kindOf(context);
  }

  private static CacheableSpan spanAround(Operands context, long address, long end) {
    CacheableSpan span;
    try {
      span = context == null ? null : context.cacheableSpan();
    } catch (Throwable callerBug) {
      // An Error included (the caller's code may run out of memory or stack): it fails this
      // transfer only, as a bad operand would.
      throw new DmaException(
          DmaException.Kind.FABRIC,
          DmaException.Reason.BAD_REQUEST,
          "the caller context's cacheableSpan() threw: " + callerBug,
          0,
          0,
          callerBug);
    }
    if (span == null) {
      return null;
    }
    // A span that does not contain the operand would register memory the operand is not in.
    return span.contains(address, end) ? span : null;
  }

  private static void checkLength(long lengthBytes) {
    if (lengthBytes == 0) {
      // fi_mr_reg rejects an empty range; saying so is clearer than its EINVAL.
      throw DmaException.fabric(DmaException.Reason.BAD_REQUEST, "cannot register 0 bytes");
    }
  }

  /**
   * Registers within the bound, evicting idle cached spans first when needed and once more when the
   * kernel refuses with -FI_ENOMEM.
   */
  private Registration register(long base, long lengthBytes, MemoryKind kind, boolean evictable) {
    makeRoom(lengthBytes);
    while (true) {
      try {
        Registration registration =
            Registration.register(endpoint, base, lengthBytes, kind, evictable, pinnedBytes);
        return registration;
      } catch (DmaException failed) {
        if (!outOfPinnableMemory(failed)) {
          throw failed;
        }
        // The kernel's limit (RLIMIT_MEMLOCK, device page caps) is lower than our bound: give back
        // idle spans and retry, failing only when there is nothing left to give.
        if (evictIdle(lengthBytes) == 0) {
          throw new DmaException(
              DmaException.Kind.FABRIC,
              failed.getMessage()
                  + ": cannot pin "
                  + lengthBytes
                  + " more bytes ("
                  + pinnedBytes.get()
                  + " bytes already registered by this endpoint, none of them idle); raise ulimit"
                  + " -l (RLIMIT_MEMLOCK), or set max_pinned_bytes below it so idle cached spans"
                  + " are evicted sooner",
              failed.fabricErrno(),
              failed.providerErrno(),
              failed);
        }
      }
    }
  }

  private void makeRoom(long lengthBytes) {
    // Only the worker raises pinnedBytes, so a concurrent change can only make more room. Written
    // as a subtraction so an unbounded maxPinnedBytes (Long.MAX_VALUE) cannot overflow.
    if (lengthBytes <= maxPinnedBytes - pinnedBytes.get()) {
      return;
    }
    long excess = pinnedBytes.get() + lengthBytes - maxPinnedBytes;
    // Evict only when that makes it fit: emptying the cache for a widened span that cannot fit
    // anyway would cost every later operand a registration, for nothing.
    if (lengthBytes <= maxPinnedBytes && excess <= registry.idleBytes(this)) {
      evictIdle(excess);
    }
    long pinned = pinnedBytes.get();
    if (lengthBytes > maxPinnedBytes - pinned) {
      // Longer than the bound itself: no amount of waiting helps, the request or the bound must
      // change. Otherwise the bound is full of pinned regions and leased spans.
      throw new DmaException(
          DmaException.Kind.FABRIC,
          lengthBytes > maxPinnedBytes
              ? DmaException.Reason.BAD_REQUEST
              : DmaException.Reason.PROVIDER,
          "registering "
              + lengthBytes
              + " bytes would pin "
              + (pinned + lengthBytes)
              + " bytes on this endpoint, above max_pinned_bytes ("
              + maxPinnedBytes
              + " bytes; "
              + pinned
              + " bytes are held by in-flight operations and registered regions); raise the"
              + " max_pinned_bytes configuration key (DmaConfiguration.Builder.maxPinnedBytes),"
              + " and ulimit -l (RLIMIT_MEMLOCK) when that caps it",
          Errno.FI_ENOMEM,
          DmaException.UNKNOWN_ERRNO,
          null);
    }
  }

  /** Whether {@code lengthBytes} more fit under the bound once every idle cached span is gone. */
  private boolean fitsAfterEviction(long lengthBytes) {
    // Only the worker raises pinnedBytes, so a concurrent change can only make more room. Written
    // as subtractions so an unbounded maxPinnedBytes (Long.MAX_VALUE) cannot overflow.
    long room = maxPinnedBytes - pinnedBytes.get();
    return lengthBytes <= room || lengthBytes - registry.idleBytes(this) <= room;
  }

  private int evictIdle(long wantedBytes) {
    int evicted = registry.evict(this, wantedBytes);
    EVICTIONS.setOpaque(this, evictions + evicted);
    return evicted;
  }

  /**
   * Whether a registration failed because the kernel would not pin more pages (RLIMIT_MEMLOCK or
   * device limits): {@code FI_ENOMEM}, which {@link FabricEndpoint#register} carries as the
   * exception's fabric errno.
   */
  private static boolean outOfPinnableMemory(DmaException failed) {
    return failed.fabricErrno() == Errno.FI_ENOMEM;
  }
}
