package dev.dma.core.internal.peers;

import dev.dma.core.internal.LongObjectMap;
import dev.dma.spi.FabricEndpoint;
import java.lang.System.Logger.Level;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashMap;
import java.util.IdentityHashMap;
import java.util.Iterator;
import java.util.Set;
import java.util.function.LongPredicate;

/**
 * The address-vector entries of one endpoint's peers, shared by identity and counted per client.
 *
 * <h2>Model</h2>
 *
 * Each client holds at most one entry; an entry is held by every client that advertised its address
 * and is removed from the address vector ({@link FabricEndpoint#removePeer}) when its last holder
 * is released. Entries are shared by the endpoint's {@linkplain FabricEndpoint#peerIdentity(byte[])
 * identity} of the address (all bytes, or EFA's GID and QPN), because the EFA device reuses a
 * closed endpoint's QPN for the next one on the card: a new address with a known identity but
 * different bytes is a new incarnation of that slot, and the old incarnation's entry is dead for
 * every client that held it.
 *
 * <h2>Threads and ownership</h2>
 *
 * Owned and used by the fabric worker thread only (it calls the endpoint), except the counters,
 * which any thread may read. The worker calls {@link #handle} on every post, and defers {@link
 * #release} until the client has no operation outstanding: removing an address-vector entry with
 * operations in flight flushes the queue pair, and a queued transfer would re-insert the peer.
 * {@link #clear()} runs right before the endpoint closes, and leaves the entries to the address
 * vector's close.
 */
public final class PeerTable {
  private static final System.Logger LOG = System.getLogger(PeerTable.class.getName());

  /** The identity index's first sweep threshold, and its floor. */
  static final int SWEEP_FLOOR = 64;

  private static final VarHandle INSERTS;
  private static final VarHandle REMOVES;
  private static final VarHandle EVICTIONS;

  static {
    try {
      MethodHandles.Lookup lookup = MethodHandles.lookup();
      INSERTS = lookup.findVarHandle(PeerTable.class, "inserts", long.class);
      REMOVES = lookup.findVarHandle(PeerTable.class, "removes", long.class);
      EVICTIONS = lookup.findVarHandle(PeerTable.class, "evictions", long.class);
    } catch (ReflectiveOperationException impossible) {
      throw new ExceptionInInitializerError(impossible);
    }
  }

  private final FabricEndpoint endpoint;

  /** Owns the holdings: client id to the entry it holds. */
  private final LongObjectMap<Entry> byClient = new LongObjectMap<>();

  /**
   * Identity to entry: a dedup index that does not hold. Entries whose last holder left stay here,
   * dead, until replaced or swept; releasing a client thus needs no hashing of its address.
   */
  private final HashMap<Identity, Entry> byIdentity = new HashMap<>();

  /**
   * Stale incarnations evicted while a former holder still had operations outstanding: removing
   * them from the address vector then would pull the peer from under posted operations (EFA never
   * completes them; tcp;ofi_rxm crashes on a later post), so they wait here for {@link
   * #removeRetired()}.
   */
  private final ArrayList<Retired> retired = new ArrayList<>();

  private LongPredicate busy = clientId -> false;

  private int sweepThreshold = SWEEP_FLOOR;
  private int liveEntries;

  // Written by the worker only; read with getOpaque by other threads.
  private long inserts;
  private long removes;
  private long evictions;

  /**
   * An empty table over an endpoint's address vector.
   *
   * @param endpoint the endpoint, owned by the caller; this table inserts and removes its peers
   */
  public PeerTable(FabricEndpoint endpoint) {
    if (endpoint == null) {
      throw new NullPointerException("endpoint");
    }
    this.endpoint = endpoint;
  }

  /**
   * Tells the table which clients still have operations outstanding, so a removal that would pull a
   * peer from under them is deferred. Set once by the worker, before the first call.
   *
   * @param value true for a client with operations queued or in flight
   */
  public void deferRemovalWhile(LongPredicate value) {
    busy = value;
  }

  /**
   * The handle ({@code fi_addr_t}) to post against for a client's peer address, inserting the
   * address when needed. Worker thread only.
   *
   * <p>Fast path, taken on every post of a known client: when the client already holds an entry
   * with exactly these bytes, its handle is returned with no allocation and no hashing of the
   * address. Otherwise the address's identity decides: an entry with the same identity and bytes is
   * shared; one with the same identity but other bytes is a dead incarnation, so every client
   * holding it is released (with a warning); the client's previous, different entry is released;
   * and the address is inserted unless shared.
   *
   * @param clientId the client
   * @param address the client's current peer address; not modified, and copied when stored
   * @return the live handle, valid until the client is {@linkplain #release released} or its
   *     address changes
   * @throws dev.dma.api.DmaException from {@link FabricEndpoint#peerIdentity} for a malformed
   *     address (the client keeps its previous entry), or from {@link FabricEndpoint#insertPeer}
   *     (the client then holds nothing)
   */
  public long handle(long clientId, byte[] address) {
    Entry current = byClient.get(clientId);
    if (current != null && Arrays.equals(current.address, address)) {
      return current.handle;
    }
    return slowHandle(clientId, address, current);
  }

  private long slowHandle(long clientId, byte[] address, Entry current) {
    // Validates too: a malformed address must fail before anything is released or inserted.
    Identity identity = new Identity(endpoint.peerIdentity(address));
    Entry known = byIdentity.get(identity);
    if (known != null && known.holders > 0) {
      if (Arrays.equals(known.address, address)) {
        known.hold(clientId);
        Entry previous = byClient.put(clientId, known);
        if (previous != null) {
          drop(previous, clientId);
        }
        return known.handle;
      }
      evictIncarnation(clientId, known);
      current = byClient.get(clientId);
    }
    if (current != null) {
      // A re-advertised, different address: the old one leaves the vector if this was its last
      // holder, so a client that moved does not pin its dead endpoint's slot.
      byClient.remove(clientId);
      drop(current, clientId);
    }
    byte[] stored = address.clone();
    long handle = endpoint.insertPeer(stored);
    Entry entry = new Entry(stored, handle);
    entry.hold(clientId);
    INSERTS.setOpaque(this, inserts + 1);
    liveEntries++;
    if (byIdentity.size() >= sweepThreshold) {
      sweep();
    }
    byIdentity.put(identity, entry);
    byClient.put(clientId, entry);
    return handle;
  }

  /**
   * Releases every client holding {@code stale}, a previous incarnation of an endpoint slot that a
   * client just re-advertised with new bytes: posting to it would reach nothing (or the wrong
   * endpoint), and it would otherwise stay in the vector as long as any client held it.
   */
  private void evictIncarnation(long clientId, Entry stale) {
    long[] holders = Arrays.copyOf(stale.clients, stale.holders);
    boolean deferred = false;
    for (long holder : holders) {
      byClient.remove(holder);
      deferred |= busy.test(holder);
    }
    if (deferred) {
      // Their in-flight operations were posted against the stale handle: it leaves the vector
      // only once they are done (removeRetired), like any other removal the worker defers.
      stale.holders = 0;
      retired.add(new Retired(stale, holders));
    } else {
      for (long holder : holders) {
        drop(stale, holder);
      }
    }
    EVICTIONS.setOpaque(this, evictions + 1);
    LOG.log(
        Level.WARNING,
        "client "
            + clientId
            + " advertised a recycled id; released the stale endpoint and "
            + holders.length
            + " clients");
  }

  /**
   * Releases a client's entry; the last holder out removes it from the address vector. Releasing a
   * client that holds nothing (or twice) is harmless. Worker thread only, and only when the client
   * has no operation outstanding.
   *
   * @param clientId the client
   */
  public void release(long clientId) {
    Entry entry = byClient.remove(clientId);
    if (entry != null) {
      drop(entry, clientId);
    }
  }

  /**
   * Whether an evicted incarnation waits for its former holders' operations.
   *
   * @return whether {@link #removeRetired()} has work
   */
  public boolean hasRetired() {
    return !retired.isEmpty();
  }

  /**
   * Removes from the address vector each evicted incarnation none of whose former holders has
   * operations outstanding any more. Worker thread only; the worker calls it when a client's last
   * operation finishes.
   */
  public void removeRetired() {
    for (Iterator<Retired> each = retired.iterator(); each.hasNext(); ) {
      Retired candidate = each.next();
      boolean stillBusy = false;
      for (long holder : candidate.formerHolders()) {
        stillBusy |= busy.test(holder);
      }
      if (!stillBusy) {
        each.remove();
        remove(candidate.entry());
      }
    }
  }

  /**
   * After {@link FabricEndpoint#reset()}: every handle is void and the new address vector is empty.
   * Forgets every entry without removing it, then inserts again the address of every client that
   * {@code keep} accepts; the others (dead peers) hold nothing and are inserted afresh by their
   * next transfer or {@code addPeer}. A client whose insert fails holds nothing; its next transfer
   * tries again and fails with the reason. Worker thread only.
   *
   * @param keep which clients to insert again
   * @return how many clients were inserted again
   */
  public int reinsertAfterReset(LongPredicate keep) {
    ArrayList<Entry> held = new ArrayList<>();
    Set<Entry> seen = Collections.newSetFromMap(new IdentityHashMap<>());
    byClient.forEachValue(
        entry -> {
          if (seen.add(entry)) {
            held.add(entry);
          }
        });
    byClient.clear();
    byIdentity.clear();
    retired.clear();
    liveEntries = 0;
    sweepThreshold = SWEEP_FLOOR;
    int inserted = 0;
    for (Entry entry : held) {
      for (int i = 0; i < entry.holders; i++) {
        long clientId = entry.clients[i];
        if (!keep.test(clientId)) {
          continue;
        }
        try {
          handle(clientId, entry.address);
          inserted++;
        } catch (RuntimeException refused) {
          LOG.log(
              Level.WARNING,
              "re-inserting client " + clientId + " after an endpoint reset failed: " + refused);
        }
      }
    }
    return inserted;
  }

  /**
   * Forgets every client and entry without removing anything from the address vector, and empties
   * the index. Worker thread only, right before the endpoint closes (and with it its address
   * vector, which releases every entry at once).
   *
   * <p>Why no {@link FabricEndpoint#removePeer}: at shutdown a peer's endpoint may already be
   * closed, and removing such an entry can crash the process. shm maps a peer opened by the same
   * process by pointing at that endpoint's own region, which {@code fi_close} of the peer unmaps;
   * {@code fi_av_remove} then writes into the unmapped region ({@code smr_unmap_region}, SIGSEGV on
   * libfabric 2.1 whenever a passive target closed before the service). Closing the address vector
   * after the endpoint skips that write, so leaving the entries to it is both safe and sufficient.
   */
  public void clear() {
    byClient.clear();
    byIdentity.clear();
    liveEntries = 0;
    sweepThreshold = SWEEP_FLOOR;
  }

  /**
   * Live entries: distinct peer addresses in the address vector. Worker thread.
   *
   * @return the count
   */
  public int entries() {
    return liveEntries;
  }

  /**
   * Clients holding an entry. Worker thread.
   *
   * @return the count
   */
  public int clients() {
    return byClient.size();
  }

  /**
   * Addresses inserted into the address vector so far. Any thread.
   *
   * @return the count
   */
  public long inserts() {
    return (long) INSERTS.getOpaque(this);
  }

  /**
   * Addresses removed from the address vector so far (including failed removals). Any thread.
   *
   * @return the count
   */
  public long removes() {
    return (long) REMOVES.getOpaque(this);
  }

  /**
   * Stale incarnations evicted because a client advertised a recycled id. Any thread.
   *
   * @return the count
   */
  public long evictions() {
    return (long) EVICTIONS.getOpaque(this);
  }

  /** How many clients hold {@code clientId}'s entry (0 when it holds none); for tests. */
  int holders(long clientId) {
    Entry entry = byClient.get(clientId);
    return entry == null ? 0 : entry.holders;
  }

  /** The identity index's size, dead entries included; for tests. */
  int indexSize() {
    return byIdentity.size();
  }

  int sweepThreshold() {
    return sweepThreshold;
  }

  void sweepThreshold(int threshold) {
    sweepThreshold = threshold;
  }

  /**
   * Drops dead entries from the index and resets the threshold to twice what remains (at least
   * {@link #SWEEP_FLOOR}): bounds the index on a server that meets many hosts over its life, at
   * amortized constant cost per insert.
   */
  void sweep() {
    for (Iterator<Entry> entries = byIdentity.values().iterator(); entries.hasNext(); ) {
      if (entries.next().holders == 0) {
        entries.remove();
      }
    }
    sweepThreshold = Math.max(SWEEP_FLOOR, 2 * byIdentity.size());
  }

  /** Puts a dead entry straight into the index, as a released one would be; for tests. */
  void indexDead(byte[] identity) {
    Entry dead = new Entry(identity.clone(), 0);
    byIdentity.put(new Identity(identity.clone()), dead);
  }

  private void drop(Entry entry, long clientId) {
    if (entry.unhold(clientId) == 0) {
      remove(entry);
    }
  }

  /** Removes an entry whose last holder left from the address vector. */
  private void remove(Entry entry) {
    liveEntries--;
    REMOVES.setOpaque(this, removes + 1);
    int code = endpoint.removePeer(entry.handle);
    if (code != 0) {
      // Never fatal: the handle is not posted against again either way.
      LOG.log(Level.WARNING, "fi_av_remove failed releasing a peer address: " + code);
    }
  }

  /**
   * One address-vector entry, counted by the clients holding it. Knows its holders' ids, so a dead
   * incarnation can release them all without a scan of every client. Worker thread only.
   */
  private static final class Entry {
    final byte[] address;
    final long handle;
    long[] clients = new long[2];
    int holders;

    Entry(byte[] address, long handle) {
      this.address = address;
      this.handle = handle;
    }

    void hold(long clientId) {
      if (holders == clients.length) {
        clients = Arrays.copyOf(clients, holders * 2);
      }
      clients[holders++] = clientId;
    }

    /** Removes one holding of {@code clientId}; returns the holders left. */
    int unhold(long clientId) {
      for (int i = 0; i < holders; i++) {
        if (clients[i] == clientId) {
          clients[i] = clients[--holders];
          return holders;
        }
      }
      throw new IllegalStateException("client " + clientId + " does not hold " + this);
    }
  }

  /** An evicted incarnation and the clients that held it when it was evicted. */
  private record Retired(Entry entry, long[] formerHolders) {}

  /** Identity bytes as a hash key. */
  private record Identity(byte[] bytes) {
    @Override
    public boolean equals(Object other) {
      return other instanceof Identity(byte[] otherBytes) && Arrays.equals(bytes, otherBytes);
    }

    @Override
    public int hashCode() {
      return Arrays.hashCode(bytes);
    }

    @Override
    public String toString() {
      return "Identity" + Arrays.toString(bytes);
    }
  }
}
