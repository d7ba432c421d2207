package dev.dma.core.internal.regions;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.concurrent.locks.ReentrantLock;

/**
 * The process-wide index of cached local registrations: one map per domain, ordered by base
 * address, each entry holding a lease on its {@link Registration}.
 *
 * <h2>Why process-wide</h2>
 *
 * A caller that answered a {@link dev.dma.api.CacheableSpan}, or whose registered region is
 * dropped, calls {@link #invalidate(long, long)} with an address range and no endpoint: every
 * domain's overlapping entries must go at once, before the memory is given back (EFA has no
 * on-demand paging, so a registration over freed pages would pin or corrupt them).
 *
 * <h2>Threads and ownership</h2>
 *
 * Thread-safe: one lock guards every domain's map. Leases the registry drops (replaced, retired,
 * evicted or cleared entries) are released only after the lock is released, because dropping the
 * last lease deregisters, and deregistering under the lock would deadlock a re-entrant free (an
 * allocator callback that invalidates). Domains are keyed by identity; each {@link LocalRegions}
 * uses itself as its key.
 *
 * <h2>Policy</h2>
 *
 * Registrations are exact byte ranges, never rounded to pages. {@link #covering} looks only at the
 * entry with the greatest base at or below the start, so a nested entry with a higher base can hide
 * a wider one: that costs an extra registration, never a wrong descriptor. An entry lives until
 * invalidated, its domain is cleared, another entry replaces it at the same base, or (evictable
 * entries only) {@link LocalRegions} evicts it to respect its pinned-bytes bound.
 *
 * <h2>Registrations in progress</h2>
 *
 * A miss is registered outside the lock (a system call; a re-entrant free must not deadlock on it)
 * and tracked afterwards. An {@code invalidate} in that window would find nothing to retire, and
 * the registration, over pages the owner has since given back, would then be cached and served. So
 * the registering side holds a {@link Claim} over the range it registers, from the miss until it
 * tracks: every invalidate overlapping an open claim marks it, and {@link #trackClaimed} refuses to
 * cache a marked one (the registration then serves its one operation and deregisters when that
 * lease drops). An invalidate between the miss and the claim's opening (the context's {@code
 * cacheableSpan()} call) is caught by an invalidation count recorded at the miss: any invalidate in
 * that short gap marks the claim, overlapping or not.
 */
public final class RegionRegistry {
  private static final RegionRegistry GLOBAL = new RegionRegistry();

  private final ReentrantLock lock = new ReentrantLock();
  private final IdentityHashMap<Object, DomainMap> domains = new IdentityHashMap<>();

  /** Calls of {@link #invalidate} so far. Guarded by the lock. */
  private long invalidations;

  /** The open claims, linked through {@link Claim#next}. Guarded by the lock. */
  private Claim openClaims;

  /**
   * A registration in progress over {@code [start, end)}: marked by every {@link #invalidate} that
   * overlaps it while open. Owned by one registering thread (a {@link LocalRegions} keeps one and
   * reuses it, on its worker), so it never allocates; its fields are guarded by the registry's
   * lock, except that only the owner writes {@code open}, so the owner may read it unlocked.
   */
  static final class Claim {
    long start;
    long end;

    /** {@link #invalidations} at the miss that led to this claim. */
    long invalidationsAtMiss;

    boolean invalidated;
    boolean open;
    Claim next;
    Claim prev;
  }

  /** An empty registry, for tests; production code uses {@link #global()}. */
  public RegionRegistry() {}

  /**
   * The process-wide registry that {@code invalidate} reaches.
   *
   * @return the registry
   */
  public static RegionRegistry global() {
    return GLOBAL;
  }

  /**
   * Tracks a registration in a domain: the registry takes its own lease (the caller keeps its own).
   * Replaces any entry at the same base in that domain; the replaced entry's lease is dropped after
   * the lock is released, so it deregisters only if no operation still leases it. Any thread.
   *
   * @param domain the domain key (compared by identity)
   * @param registration a registration the caller holds a lease on
   */
  public void track(Object domain, Registration registration) {
    Registration replaced;
    lock.lock();
    try {
      replaced = trackLocked(domain, registration);
    } finally {
      lock.unlock();
    }
    if (replaced != null) {
      replaced.release();
    }
  }

  /**
   * Opens a claim over {@code [start, end)} before registering that range outside the lock. Call
   * {@link #trackClaimed} or {@link #abandon} afterwards. Any thread; never allocates.
   *
   * @param claim the caller's claim, not open
   * @param start the first byte to be registered
   * @param end one past the last
   * @param sinceMiss true when {@code claim} went through {@link #covering(Object, long, long,
   *     Claim)}: any invalidate since that miss marks the claim (its range is not known, so overlap
   *     is assumed); false to start the claim now
   */
  void open(Claim claim, long start, long end, boolean sinceMiss) {
    lock.lock();
    try {
      claim.start = start;
      claim.end = end;
      claim.invalidated = sinceMiss && invalidations != claim.invalidationsAtMiss;
      claim.open = true;
      claim.prev = null;
      claim.next = openClaims;
      if (openClaims != null) {
        openClaims.prev = claim;
      }
      openClaims = claim;
    } finally {
      lock.unlock();
    }
  }

  /**
   * Closes a claim and tracks the registration made under it, unless an invalidate overlapped the
   * claim while it was open: then nothing is tracked and the caller's lease stays the only one, so
   * the registration deregisters when it drops. Any thread; never allocates.
   *
   * @param domain the domain key
   * @param registration a registration the caller holds a lease on, inside the claim's range
   * @param claim the open claim it was registered under
   * @return whether it was tracked (false: an invalidate won)
   */
  boolean trackClaimed(Object domain, Registration registration, Claim claim) {
    Registration replaced;
    lock.lock();
    try {
      unlink(claim);
      if (claim.invalidated) {
        return false;
      }
      replaced = trackLocked(domain, registration);
    } finally {
      lock.unlock();
    }
    if (replaced != null) {
      replaced.release();
    }
    return true;
  }

  /**
   * Closes a claim whose registration failed. A no-op when not open. Any thread.
   *
   * @param claim the claim
   */
  void abandon(Claim claim) {
    if (!claim.open) {
      return; // only the owner opens and closes it, so this unlocked read is its own write
    }
    lock.lock();
    try {
      unlink(claim);
    } finally {
      lock.unlock();
    }
  }

  private void unlink(Claim claim) {
    if (claim.prev == null) {
      openClaims = claim.next;
    } else {
      claim.prev.next = claim.next;
    }
    if (claim.next != null) {
      claim.next.prev = claim.prev;
    }
    claim.prev = null;
    claim.next = null;
    claim.open = false;
  }

  private Registration trackLocked(Object domain, Registration registration) {
    if (registration.tracked) {
      // Already the registry's (in this or another domain): a second lease would never drop.
      return null;
    }
    DomainMap map = domains.get(domain);
    if (map == null) {
      map = new DomainMap();
      domains.put(domain, map);
    }
    // The caller holds a lease, so the count is positive and this cannot resurrect it.
    registration.retain();
    return map.put(registration);
  }

  /**
   * A new lease on the registration covering {@code [start, end)} in a domain, or {@code null}:
   * only the entry with the greatest base at or below {@code start} is considered, a hit when
   * {@code end} is at or below its end. A hit becomes the domain's most recently used entry. Any
   * thread; never allocates.
   *
   * @param domain the domain key
   * @param start the first byte of the operand
   * @param end one past its last byte
   * @return a retained registration the caller must release exactly once, or {@code null}
   */
  public Registration covering(Object domain, long start, long end) {
    return covering(domain, start, end, null);
  }

  /**
   * As {@link #covering(Object, long, long)}, and on a miss records in {@code onMiss} how many
   * invalidates there have been, so {@link #open} can tell whether one ran before it. Never
   * allocates.
   *
   * @param domain the domain key
   * @param start the first byte of the operand
   * @param end one past its last byte
   * @param onMiss the caller's claim, or {@code null}
   * @return a retained registration, or {@code null}
   */
  Registration covering(Object domain, long start, long end, Claim onMiss) {
    lock.lock();
    try {
      if (onMiss != null) {
        // Written on hits too: cheaper than a branch, and only a miss reads it.
        onMiss.invalidationsAtMiss = invalidations;
      }
      DomainMap map = domains.get(domain);
      if (map == null) {
        return null;
      }
      int index = map.floor(start);
      if (index < 0) {
        return null;
      }
      Registration entry = map.entries[index];
      if (end > entry.end()) {
        return null;
      }
      // The registry's own lease keeps the count positive while we hold the lock.
      entry.retain();
      map.touch(entry);
      return entry;
    } finally {
      lock.unlock();
    }
  }

  /**
   * Retires every entry, in every domain, overlapping {@code [start, end)} ({@code base < end &&
   * start < entry end}). Retirement is immediate: no operand can bind to a retired entry once this
   * returns, or even once it takes the lock. Deregistration follows when the last lease drops,
   * which may be after in-flight transfers complete. A registration still in progress over the
   * range (see the class comment) is marked so it is never cached. Any thread, including allocator
   * callbacks.
   *
   * @param start the first byte of the range
   * @param end one past its last byte
   * @return how many entries were retired
   */
  public int invalidate(long start, long end) {
    List<Registration> retired = null;
    lock.lock();
    try {
      invalidations++;
      for (Claim claim = openClaims; claim != null; claim = claim.next) {
        if (claim.start < end && start < claim.end) {
          claim.invalidated = true;
        }
      }
      for (DomainMap map : domains.values()) {
        retired = map.removeOverlapping(start, end, retired);
      }
    } finally {
      lock.unlock();
    }
    return releaseAll(retired);
  }

  /**
   * Removes one domain's map whole, dropping its leases after the lock is released. The owning
   * {@link LocalRegions} calls it before its endpoint closes its domain; other domains are
   * untouched. Any thread.
   *
   * @param domain the domain key
   * @return how many entries were removed
   */
  public int clearDomain(Object domain) {
    DomainMap map;
    lock.lock();
    try {
      map = domains.remove(domain);
      if (map != null) {
        map.untrackAll();
      }
    } finally {
      lock.unlock();
    }
    if (map == null) {
      return 0;
    }
    int released = 0;
    for (int i = 0; i < map.size; i++) {
      map.entries[i].release();
      released++;
    }
    return released;
  }

  /**
   * Evicts a domain's least recently used evictable entries that nothing but the registry leases,
   * until at least {@code wantedBytes} of them are gone or none is left. Their leases drop after
   * the lock is released, which deregisters them on this thread. An entry an operation leases is
   * never touched: its count exceeds 1, and under the lock nobody can add a lease to an entry with
   * count 1 but {@link #covering}, which also takes the lock.
   *
   * @param domain the domain key
   * @param wantedBytes how many registered bytes to give back
   * @return how many entries were evicted
   */
  int evict(Object domain, long wantedBytes) {
    List<Registration> evicted = null;
    lock.lock();
    try {
      DomainMap map = domains.get(domain);
      if (map != null) {
        evicted = map.evictLeastRecentlyUsed(wantedBytes);
      }
    } finally {
      lock.unlock();
    }
    return releaseAll(evicted);
  }

  /**
   * The bytes of a domain's evictable entries that nothing but the registry leases: what {@link
   * #evict} could give back right now. Any thread.
   *
   * @param domain the domain key
   * @return the byte count
   */
  long idleBytes(Object domain) {
    lock.lock();
    try {
      DomainMap map = domains.get(domain);
      long idle = 0;
      for (Registration entry = map == null ? null : map.lruHead;
          entry != null;
          entry = entry.lruNext) {
        if (entry.leases() == 1) {
          idle += entry.lengthBytes();
        }
      }
      return idle;
    } finally {
      lock.unlock();
    }
  }

  /**
   * The number of entries a domain holds; for tests and statistics. Any thread.
   *
   * @param domain the domain key
   * @return the count
   */
  public int size(Object domain) {
    lock.lock();
    try {
      DomainMap map = domains.get(domain);
      return map == null ? 0 : map.size;
    } finally {
      lock.unlock();
    }
  }

  private static int releaseAll(List<Registration> registrations) {
    if (registrations == null) {
      return 0;
    }
    for (Registration registration : registrations) {
      registration.release();
    }
    return registrations.size();
  }

  /**
   * One domain's entries: parallel arrays sorted by base (binary search with no boxing, so a hit
   * allocates nothing), and an intrusive least-recently-used list of the evictable ones. Guarded by
   * the registry's lock.
   */
  private static final class DomainMap {
    long[] bases = new long[16];
    Registration[] entries = new Registration[16];
    int size;

    /** The longest entry ever held since the map was last empty: bounds invalidate's scan. */
    long maxLengthBytes;

    /** Least recently used evictable entry. */
    Registration lruHead;

    /** Most recently used evictable entry. */
    Registration lruTail;

    /** The index of the greatest base at or below {@code address}, or -1. */
    int floor(long address) {
      int low = 0;
      int high = size - 1;
      while (low <= high) {
        int mid = (low + high) >>> 1;
        long base = bases[mid];
        if (base <= address) {
          low = mid + 1;
        } else {
          high = mid - 1;
        }
      }
      return high;
    }

    /** Inserts, returning the entry it replaced at the same base (still leased), or null. */
    Registration put(Registration registration) {
      registration.tracked = true;
      maxLengthBytes = Math.max(maxLengthBytes, registration.lengthBytes());
      if (registration.evictable()) {
        linkTail(registration);
      }
      int index = floor(registration.base());
      if (index >= 0 && bases[index] == registration.base()) {
        Registration replaced = entries[index];
        untrack(replaced);
        entries[index] = registration;
        return replaced;
      }
      int at = index + 1;
      if (size == bases.length) {
        bases = Arrays.copyOf(bases, size * 2);
        entries = Arrays.copyOf(entries, size * 2);
      }
      System.arraycopy(bases, at, bases, at + 1, size - at);
      System.arraycopy(entries, at, entries, at + 1, size - at);
      bases[at] = registration.base();
      entries[at] = registration;
      size++;
      return null;
    }

    List<Registration> removeOverlapping(long start, long end, List<Registration> retired) {
      // Entries at or above `end` cannot overlap; below it, walk down while an entry could still
      // reach past `start`: none longer than maxLengthBytes exists, so a base that far below
      // `start` ends at or before it, as does every lower one.
      for (int index = floor(end - 1); index >= 0; index--) {
        if (start - bases[index] >= maxLengthBytes && bases[index] <= start) {
          break;
        }
        Registration entry = entries[index];
        if (entry.base() < end && start < entry.end()) {
          if (retired == null) {
            retired = new ArrayList<>();
          }
          retired.add(entry);
          removeAt(index);
        }
      }
      return retired;
    }

    List<Registration> evictLeastRecentlyUsed(long wantedBytes) {
      List<Registration> evicted = null;
      long freed = 0;
      Registration next;
      for (Registration entry = lruHead; entry != null && freed < wantedBytes; entry = next) {
        next = entry.lruNext;
        // Count 1 means only the registry holds it; under the lock nothing can raise it.
        if (entry.leases() == 1) {
          int index = floor(entry.base());
          if (evicted == null) {
            evicted = new ArrayList<>();
          }
          evicted.add(entry);
          removeAt(index);
          freed += entry.lengthBytes();
        }
      }
      return evicted;
    }

    void touch(Registration entry) {
      if (entry.evictable() && entry != lruTail) {
        unlink(entry);
        linkTail(entry);
      }
    }

    void untrackAll() {
      for (int i = 0; i < size; i++) {
        untrack(entries[i]);
      }
    }

    private void removeAt(int index) {
      untrack(entries[index]);
      System.arraycopy(bases, index + 1, bases, index, size - index - 1);
      System.arraycopy(entries, index + 1, entries, index, size - index - 1);
      entries[--size] = null;
      if (size == 0) {
        maxLengthBytes = 0;
      }
    }

    private void untrack(Registration entry) {
      entry.tracked = false;
      if (entry.evictable()) {
        unlink(entry);
      }
    }

    private void linkTail(Registration entry) {
      entry.lruPrev = lruTail;
      entry.lruNext = null;
      if (lruTail == null) {
        lruHead = entry;
      } else {
        lruTail.lruNext = entry;
      }
      lruTail = entry;
    }

    private void unlink(Registration entry) {
      if (entry.lruPrev == null) {
        lruHead = entry.lruNext;
      } else {
        entry.lruPrev.lruNext = entry.lruNext;
      }
      if (entry.lruNext == null) {
        lruTail = entry.lruPrev;
      } else {
        entry.lruNext.lruPrev = entry.lruPrev;
      }
      entry.lruPrev = null;
      entry.lruNext = null;
    }
  }
}
