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
 * <h2>Cost</h2>
 *
 * A lookup costs O(log n) in a domain of n entries; an insertion, a removal and an eviction move at
 * most a few hundred entries (see {@code DomainMap}), whatever n; and the bytes eviction could give
 * back are known in O(1): each domain keeps its idle entries (the evictable ones nothing but the
 * registry leases) on a list of their own, with their byte total, updated as leases come and go
 * (see {@link Registration#release()}). So a miss past the bound costs the same with 256 cached
 * spans as with 100,000.
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
    // The caller holds a lease, so the count is positive and this cannot resurrect it; the count
    // is now at least 2, so the new entry is not idle until the caller's lease drops.
    registration.retain();
    registration.registry = this;
    return map.put(registration);
  }

  /**
   * Told by {@link Registration#release()} when a lease drop left a cached span with possibly only
   * the registry's lease: puts it at the tail of its domain's idle list, unless it is no longer
   * tracked or a {@link #covering} leased it again meanwhile. Takes the lock; never allocates.
   *
   * @param entry the registration whose lease count dropped to 1
   */
  void becameIdle(Registration entry) {
    lock.lock();
    try {
      // Under the lock only covering raises a tracked entry's count from 1, and it takes an idle
      // entry off the list; so a tracked entry is on the list exactly when its count is 1 (or a
      // release that made it 1 is on its way here).
      if (entry.tracked && !entry.idle && entry.registry == this && entry.leases() == 1) {
        entry.map.linkIdle(entry);
      }
    } finally {
      lock.unlock();
    }
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
      Registration entry = map.floor(start);
      if (entry == null || end > entry.end()) {
        return null;
      }
      // The registry's own lease keeps the count positive while we hold the lock.
      entry.retain();
      if (entry.idle) {
        map.unlinkIdle(entry); // leased now; back on the list, most recent, when released
      }
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
    List<Registration> removed;
    lock.lock();
    try {
      DomainMap map = domains.remove(domain);
      removed = map == null ? List.of() : map.untrackAll();
    } finally {
      lock.unlock();
    }
    return releaseAll(removed);
  }

  /**
   * Evicts a domain's least recently released idle entries (evictable, nothing but the registry
   * leasing them) until at least {@code wantedBytes} of them are gone or none is left. Their leases
   * drop after the lock is released, which deregisters them on this thread. An entry an operation
   * leases is never touched: it is not on the idle list, and under the lock nobody can add a lease
   * to an idle entry but {@link #covering}, which also takes the lock and takes it off the list.
   * Costs the same per evicted entry whatever the number of entries and of leased ones.
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
        evicted = map.evictIdle(wantedBytes);
      }
    } finally {
      lock.unlock();
    }
    return releaseAll(evicted);
  }

  /**
   * The bytes of a domain's idle entries (evictable, nothing but the registry leasing them): what
   * {@link #evict} could give back right now. Kept as leases come and go, so O(1). Any thread.
   *
   * @param domain the domain key
   * @return the byte count, never negative
   */
  long idleBytes(Object domain) {
    lock.lock();
    try {
      DomainMap map = domains.get(domain);
      return map == null ? 0 : map.idleBytes;
    } finally {
      lock.unlock();
    }
  }

  /**
   * A domain's idle entries, least recently released first; for tests. Any thread.
   *
   * @param domain the domain key
   * @return a snapshot
   */
  List<Registration> idleEntries(Object domain) {
    List<Registration> idle = new ArrayList<>();
    lock.lock();
    try {
      DomainMap map = domains.get(domain);
      for (Registration entry = map == null ? null : map.idleHead;
          entry != null;
          entry = entry.lruNext) {
        idle.add(entry);
      }
      return idle;
    } finally {
      lock.unlock();
    }
  }

  /**
   * What is wrong with a domain's layout, or null when nothing is; for tests.
   *
   * @param domain the domain key
   * @return a description of the first fault found, or null
   */
  String layoutFault(Object domain) {
    lock.lock();
    try {
      DomainMap map = domains.get(domain);
      return map == null ? null : map.layoutFault();
    } finally {
      lock.unlock();
    }
  }

  /**
   * How many chunks a domain's map uses; for tests of its bound.
   *
   * @param domain the domain key
   * @return the count
   */
  int chunkCount(Object domain) {
    lock.lock();
    try {
      DomainMap map = domains.get(domain);
      return map == null ? 0 : map.chunkCount();
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
   * One domain's entries, ordered by base in a two-level sorted array (a B+-tree of height two):
   * chunks of at most {@value #CHUNK} parallel bases and entries, and an array of each chunk's
   * first base. A lookup is two binary searches over contiguous {@code long}s with no boxing, so a
   * hit allocates nothing and stays cache-friendly; an insertion or removal moves at most one
   * chunk's worth of entries, plus, when a chunk splits or two merge, the chunk index. Adjacent
   * chunks always hold more than half a chunk between them (removals merge them otherwise), so
   * there are at most {@code 4 n / CHUNK + 1} chunks, and since a split needs half a chunk of
   * insertions since the chunk was made, the index moves cost O(n / CHUNK²) amortized: a few
   * entries a miss at 100,000 entries. Also the intrusive list of the domain's idle entries, least
   * recently released first, with their byte total. Guarded by the registry's lock.
   */
  static final class DomainMap {
    /** Entries a chunk holds at most; even. */
    static final int CHUNK = 256;

    /** The first base of each chunk in use, ascending. */
    private long[] firsts = new long[4];

    private Chunk[] chunks = new Chunk[4];
    private int chunkCount;
    int size;

    /** The longest entry ever held since the map was last empty: bounds invalidate's scan. */
    long maxLengthBytes;

    /** The idle entry released longest ago: the next to evict. */
    Registration idleHead;

    /** The idle entry released last. */
    Registration idleTail;

    /** The bytes of the idle entries. */
    long idleBytes;

    /** Up to {@link #CHUNK} entries, sorted by base, never empty while in the map. */
    private static final class Chunk {
      final long[] bases = new long[CHUNK];
      final Registration[] entries = new Registration[CHUNK];
      int size;

      /** The index of the greatest base at or below {@code address}, or -1. */
      int floor(long address) {
        int low = 0;
        int high = size - 1;
        while (low <= high) {
          int mid = (low + high) >>> 1;
          if (bases[mid] <= address) {
            low = mid + 1;
          } else {
            high = mid - 1;
          }
        }
        return high;
      }
    }

    /** The index of the chunk with the greatest first base at or below {@code address}, or -1. */
    private int floorChunk(long address) {
      int low = 0;
      int high = chunkCount - 1;
      while (low <= high) {
        int mid = (low + high) >>> 1;
        if (firsts[mid] <= address) {
          low = mid + 1;
        } else {
          high = mid - 1;
        }
      }
      return high;
    }

    /** The entry with the greatest base at or below {@code address}, or null. */
    Registration floor(long address) {
      int c = floorChunk(address);
      if (c < 0) {
        return null;
      }
      Chunk chunk = chunks[c];
      return chunk.entries[chunk.floor(address)]; // its first base is at or below address
    }

    /** Inserts, returning the entry it replaced at the same base (still leased), or null. */
    Registration put(Registration registration) {
      long base = registration.base();
      registration.tracked = true;
      registration.map = this;
      maxLengthBytes = Math.max(maxLengthBytes, registration.lengthBytes());
      int c = floorChunk(base);
      if (c >= 0) {
        Chunk chunk = chunks[c];
        int index = chunk.floor(base);
        if (chunk.bases[index] == base) {
          Registration replaced = chunk.entries[index];
          untrack(replaced);
          chunk.entries[index] = registration;
          return replaced;
        }
        insertAt(c, index + 1, registration);
      } else {
        if (chunkCount == 0) {
          addChunk(0, new Chunk());
        }
        insertAt(0, 0, registration); // below every base: the front of the first chunk
      }
      size++;
      return null;
    }

    List<Registration> removeOverlapping(long start, long end, List<Registration> retired) {
      // Entries at or above `end` cannot overlap; below it, walk down while an entry could still
      // reach past `start`: none longer than maxLengthBytes exists, so a base that far below
      // `start` ends at or before it, as does every lower one.
      Registration entry = floor(end - 1);
      while (entry != null) {
        long base = entry.base();
        if (start - base >= maxLengthBytes && base <= start) {
          break;
        }
        if (start < entry.end()) {
          if (retired == null) {
            retired = new ArrayList<>();
          }
          retired.add(entry);
          remove(entry);
        }
        entry = base == Long.MIN_VALUE ? null : floor(base - 1);
      }
      return retired;
    }

    List<Registration> evictIdle(long wantedBytes) {
      List<Registration> evicted = null;
      long freed = 0;
      while (idleHead != null && freed < wantedBytes) {
        Registration entry = idleHead;
        if (evicted == null) {
          evicted = new ArrayList<>();
        }
        evicted.add(entry);
        freed += entry.lengthBytes();
        remove(entry); // unlinks it from the idle list too
      }
      return evicted;
    }

    /** Untracks every entry and returns them, leaving the map empty. */
    List<Registration> untrackAll() {
      List<Registration> all = new ArrayList<>(size);
      for (int c = 0; c < chunkCount; c++) {
        Chunk chunk = chunks[c];
        for (int i = 0; i < chunk.size; i++) {
          untrack(chunk.entries[i]);
          all.add(chunk.entries[i]);
        }
        chunks[c] = null;
      }
      chunkCount = 0;
      size = 0;
      maxLengthBytes = 0;
      return all;
    }

    void linkIdle(Registration entry) {
      entry.idle = true;
      entry.lruPrev = idleTail;
      entry.lruNext = null;
      if (idleTail == null) {
        idleHead = entry;
      } else {
        idleTail.lruNext = entry;
      }
      idleTail = entry;
      idleBytes += entry.lengthBytes();
    }

    void unlinkIdle(Registration entry) {
      if (entry.lruPrev == null) {
        idleHead = entry.lruNext;
      } else {
        entry.lruPrev.lruNext = entry.lruNext;
      }
      if (entry.lruNext == null) {
        idleTail = entry.lruPrev;
      } else {
        entry.lruNext.lruPrev = entry.lruPrev;
      }
      entry.lruPrev = null;
      entry.lruNext = null;
      entry.idle = false;
      idleBytes -= entry.lengthBytes();
    }

    /**
     * What is wrong with the layout (order, chunk index, sizes, the pair rule), or null; for tests.
     */
    String layoutFault() {
      long previous = Long.MIN_VALUE;
      int counted = 0;
      for (int c = 0; c < chunkCount; c++) {
        Chunk chunk = chunks[c];
        if (chunk.size == 0 || chunk.size > CHUNK) {
          return "chunk " + c + " holds " + chunk.size;
        }
        if (firsts[c] != chunk.bases[0]) {
          return "chunk " + c + " is indexed at " + firsts[c] + ", starts at " + chunk.bases[0];
        }
        if (c > 0 && chunks[c - 1].size + chunk.size <= CHUNK / 2) {
          return "chunks " + (c - 1) + " and " + c + " hold half a chunk between them";
        }
        for (int i = 0; i < chunk.size; i++) {
          if ((counted > 0 && chunk.bases[i] <= previous)
              || chunk.entries[i].base() != chunk.bases[i]
              || !chunk.entries[i].tracked) {
            return "entry " + i + " of chunk " + c + " is out of place: " + chunk.entries[i];
          }
          previous = chunk.bases[i];
          counted++;
        }
      }
      return counted == size ? null : counted + " entries counted, size says " + size;
    }

    int chunkCount() {
      return chunkCount;
    }

    /** Removes a tracked entry of this map (and from the idle list) and untracks it. */
    private void remove(Registration entry) {
      long base = entry.base();
      int c = floorChunk(base);
      Chunk chunk = chunks[c];
      int index = chunk.floor(base);
      if (chunk.entries[index] != entry) {
        throw new IllegalStateException("not in this domain's map: " + entry);
      }
      System.arraycopy(chunk.bases, index + 1, chunk.bases, index, chunk.size - index - 1);
      System.arraycopy(chunk.entries, index + 1, chunk.entries, index, chunk.size - index - 1);
      chunk.entries[--chunk.size] = null;
      untrack(entry);
      if (--size == 0) {
        maxLengthBytes = 0;
      }
      if (chunk.size == 0) {
        removeChunk(c);
        // Its neighbours are now adjacent: they may hold too little between them.
        if (c > 0) {
          mergeIfSmall(c - 1);
        }
        return;
      }
      firsts[c] = chunk.bases[0];
      // Keeps every adjacent pair above half a chunk, which bounds the number of chunks: merging
      // c+1 into c first leaves c's index valid for its left neighbour.
      mergeIfSmall(c);
      if (c > 0) {
        mergeIfSmall(c - 1);
      }
    }

    private void untrack(Registration entry) {
      entry.tracked = false;
      if (entry.idle) {
        unlinkIdle(entry);
      }
    }

    /** Inserts at {@code at} in chunk {@code c}, splitting it first when full. */
    private void insertAt(int c, int at, Registration registration) {
      Chunk chunk = chunks[c];
      if (chunk.size == CHUNK) {
        // The upper half moves to a new chunk right after this one.
        int half = CHUNK / 2;
        Chunk upper = new Chunk();
        System.arraycopy(chunk.bases, half, upper.bases, 0, CHUNK - half);
        System.arraycopy(chunk.entries, half, upper.entries, 0, CHUNK - half);
        Arrays.fill(chunk.entries, half, CHUNK, null);
        upper.size = CHUNK - half;
        chunk.size = half;
        addChunk(c + 1, upper);
        if (at > half) {
          c++;
          at -= half;
          chunk = upper;
        }
      }
      System.arraycopy(chunk.bases, at, chunk.bases, at + 1, chunk.size - at);
      System.arraycopy(chunk.entries, at, chunk.entries, at + 1, chunk.size - at);
      chunk.bases[at] = registration.base();
      chunk.entries[at] = registration;
      chunk.size++;
      firsts[c] = chunk.bases[0];
    }

    /** Merges chunk {@code c + 1} into chunk {@code c} when they hold half a chunk or less. */
    private void mergeIfSmall(int c) {
      if (c + 1 >= chunkCount) {
        return;
      }
      Chunk left = chunks[c];
      Chunk right = chunks[c + 1];
      if (left.size + right.size > CHUNK / 2) {
        return;
      }
      System.arraycopy(right.bases, 0, left.bases, left.size, right.size);
      System.arraycopy(right.entries, 0, left.entries, left.size, right.size);
      left.size += right.size;
      removeChunk(c + 1);
    }

    private void addChunk(int index, Chunk chunk) {
      if (chunkCount == chunks.length) {
        firsts = Arrays.copyOf(firsts, chunkCount * 2);
        chunks = Arrays.copyOf(chunks, chunkCount * 2);
      }
      System.arraycopy(firsts, index, firsts, index + 1, chunkCount - index);
      System.arraycopy(chunks, index, chunks, index + 1, chunkCount - index);
      firsts[index] = chunk.size == 0 ? 0 : chunk.bases[0];
      chunks[index] = chunk;
      chunkCount++;
    }

    private void removeChunk(int index) {
      System.arraycopy(firsts, index + 1, firsts, index, chunkCount - index - 1);
      System.arraycopy(chunks, index + 1, chunks, index, chunkCount - index - 1);
      chunks[--chunkCount] = null;
    }
  }
}
