package dev.dma.core.internal.peers;

import dev.dma.api.DmaException;
import dev.dma.api.Peer;
import dev.dma.core.internal.LongObjectMap;
import dev.dma.spi.FabricEndpoint;
import java.lang.System.Logger.Level;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.IdentityHashMap;
import java.util.Iterator;
import java.util.Set;
import java.util.function.LongPredicate;
import org.jspecify.annotations.Nullable;

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
 *
 * <h2>Every removal waits for the operations posted against it</h2>
 *
 * An entry can lose its last holder while clients still have operations posted against its handle:
 * a client re-advertised another address, or a newer incarnation of its endpoint slot evicted it.
 * Such a client lingers on the entry until it has nothing outstanding (the worker's {@link
 * #deferRemovalWhile} predicate), and an entry with a lingering client waits, retired, for {@link
 * #removeRetired()}. Only {@link #release} of a client that is itself busy removes at once: the
 * worker does that on purpose, to have the provider flush a dead peer's operations.
 *
 * <h2>The newest address wins; an older one fails its transfer</h2>
 *
 * A client's current address is the newest one seen for it, from {@link #advertise} (the
 * application's {@code addPeer}, which always wins) or from a transfer whose request carries an
 * address never seen for it. A transfer carrying one of the client's previous addresses, or a
 * previous incarnation of the endpoint slot whose newer incarnation is known, was queued before the
 * change: {@link #handle} fails it with {@link DmaException.Reason#BAD_REQUEST} and touches
 * nothing. Letting it re-insert its old address instead evicted the live one, whose next transfer
 * evicted the old one back, a warning each time, for as long as both kinds of transfer kept coming.
 *
 * <h2>A peer the table vouches for is posted without a lookup</h2>
 *
 * A {@link BoundPeer} (what {@code addPeer} returns) that the table has matched to the client's
 * current entry is remembered, with the entry's handle, in two arrays indexed by the client id; a
 * post whose request carries that same peer object gets the handle with one reference compare and
 * no hashing, no address compare, and no read of the peer itself. Twelve bytes a client instead of
 * the index's 32 to 64: at 100,000 clients the index outgrows the caches, and its slot was a cache
 * miss on every post (issue 21). The table stops vouching for a peer whenever the client's entry
 * changes in any way (another address, a release, an eviction, a reset, the table's clear); the
 * peer then takes the lookup, with the lookup's outcomes, and is vouched for again once a lookup
 * matches it. Client ids that are negative, past {@link #DENSE_LIMIT}, or too sparse to index
 * directly (see {@link #vouchable}) always take the lookup.
 */
public final class PeerTable {
  private static final System.Logger LOG = System.getLogger(PeerTable.class.getName());

  /** The identity index's first sweep threshold, and its floor. */
  static final int SWEEP_FLOOR = 64;

  /** How many previous addresses are remembered per client, and previous incarnations per slot. */
  static final int HISTORY = 4;

  /** Client ids the vouched-for arrays reach: below 2^20, so they hold at most 12 MiB. */
  static final int DENSE_LIMIT = 1 << 20;

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
   * {@link #byClient}'s handles and addresses inline, one cache line a client, for {@link #handle}:
   * every change to {@code byClient} goes through {@link #hold}, {@link #drop} or both maps' clear,
   * and an entry's address and handle never change, so a client found here with equal bytes holds
   * exactly that handle in {@code byClient}.
   */
  private final HandleIndex handles = new HandleIndex();

  /**
   * The peer this table vouches for, indexed by client id (null for none), and its handle in {@link
   * #handleById}: changed only with {@link #byClient}'s entry for the client (see {@link #vouch}
   * and {@link #withdraw}).
   */
  private @Nullable Object[] vouchedById = new Object[0];

  private long[] handleById = new long[0];
  private int vouchedCount;

  /**
   * Identity to entry: a dedup index that does not hold. Entries whose last holder left stay here,
   * dead, until replaced or swept; releasing a client thus needs no hashing of its address.
   */
  private final HashMap<Identity, Entry> byIdentity = new HashMap<>();

  /**
   * Entries whose last holder left while a former holder still had operations outstanding: removing
   * them from the address vector then would pull the peer from under posted operations (EFA never
   * completes them; tcp;ofi_rxm crashes on a later post), so they wait here for {@link
   * #removeRetired()}. A retired entry may be held again before that (see {@link #revive}).
   */
  private final ArrayList<Entry> retired = new ArrayList<>();

  /**
   * Each client's previous addresses, newest first, at most {@link #HISTORY}: what makes a transfer
   * queued before a re-advertisement stale. Dropped when the client is released.
   */
  private final LongObjectMap<byte[][]> previous = new LongObjectMap<>();

  private LongPredicate busy = clientId -> false;

  // What warm() read, kept so the JIT cannot drop the loads.
  @SuppressWarnings("unused")
  private long warmth;

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
   * The handle ({@code fi_addr_t}) to post a client's transfer against, inserting the address when
   * needed. Worker thread only.
   *
   * <p>Fast path, taken on every post of a known client: when the client already holds an entry
   * with exactly these bytes, its handle is returned with no allocation and no hashing of the
   * address. Otherwise, a stale address (one the client has since replaced, or an older incarnation
   * of a slot whose newer incarnation is known) fails the transfer; any other is the client's new
   * address, as if {@linkplain #advertise advertised}.
   *
   * <p>A request that carries a {@link Peer} the table vouches for the client gets that handle,
   * found by comparing references (the peer is not read). Otherwise the lookup, after which a
   * {@link BoundPeer} is vouched for: the request guarantees that its client and address are {@code
   * clientId} and {@code address}, so the handle the lookup found is its handle.
   *
   * @param clientId the client
   * @param address the peer address the transfer's request carries; not modified, and copied when
   *     stored
   * @param peer the request's peer, or null
   * @return the live handle, valid until the client is {@linkplain #release released} or its
   *     address changes
   * @throws DmaException of reason {@link DmaException.Reason#BAD_REQUEST} for a stale address
   *     (nothing changes), from {@link FabricEndpoint#peerIdentity} for a malformed address (the
   *     client keeps its previous entry), or from {@link FabricEndpoint#insertPeer} (the client
   *     then holds nothing)
   */
  public long handle(long clientId, byte[] address, @Nullable Peer peer) {
    if (peer == null) {
      return lookUp(clientId, address);
    }
    @Nullable Object[] byId = vouchedById;
    if (clientId >= 0 && clientId < byId.length && byId[(int) clientId] == peer) {
      return handleById[(int) clientId];
    }
    long handle = lookUp(clientId, address);
    // The id first: for an id the arrays never reach, reading the peer's class would be a cache
    // miss on every post for nothing.
    if (vouchable(clientId) && peer instanceof BoundPeer bound) {
      vouch(clientId, bound, handle);
    }
    return handle;
  }

  private long lookUp(long clientId, byte[] address) {
    int slot = handles.find(clientId, address);
    if (slot >= 0) {
      return handles.handleAt(slot);
    }
    Entry current = byClient.get(clientId);
    if (current != null && Arrays.equals(current.address, address)) {
      return current.handle;
    }
    return slowHandle(clientId, address, current, false);
  }

  /**
   * Whether {@code address} is one the client has since left for another (a transfer carrying it
   * would fail as stale). Worker thread only; off the per-transfer path.
   *
   * @param clientId the client
   * @param address an address
   * @return true for one of the client's remembered previous addresses
   */
  public boolean isPreviousAddress(long clientId, byte[] address) {
    return contains(previous.get(clientId), address);
  }

  /**
   * Whether {@code address} is the client's current address, or the client holds none (it was never
   * inserted, released, or its insert failed). Worker thread only; off the per-transfer path.
   *
   * @param clientId the client
   * @param address an address
   * @return false only when the client holds an entry for another address
   */
  public boolean isCurrentOrUnknown(long clientId, byte[] address) {
    Entry current = byClient.get(clientId);
    return current == null || Arrays.equals(current.address, address);
  }

  /**
   * Makes the peer's address the client's current address, as the application's {@code addPeer}
   * says: it wins over anything seen before, even an address the client had earlier. Then vouches
   * for the peer (in place of any other peer of the client) until the client's entry changes.
   * Worker thread only.
   *
   * @param peer the peer {@code addPeer} returns; its address is not modified, and copied when
   *     stored
   * @return the live handle
   * @throws DmaException from {@link FabricEndpoint#peerIdentity} or {@link
   *     FabricEndpoint#insertPeer}, as {@link #handle}; nothing is vouched for then
   */
  public long advertise(BoundPeer peer) {
    long handle = advertised(peer.clientId(), peer.addressBytes());
    if (vouchable(peer.clientId())) {
      vouch(peer.clientId(), peer, handle);
    }
    return handle;
  }

  /** Makes {@code address} the client's current address, winning over anything seen before. */
  private long advertised(long clientId, byte[] address) {
    Entry current = byClient.get(clientId);
    if (current != null && Arrays.equals(current.address, address)) {
      return current.handle;
    }
    return slowHandle(clientId, address, current, true);
  }

  /**
   * Whether the vouched-for arrays reach {@code clientId} or may grow to: below {@link
   * #DENSE_LIMIT}, and past their length only below twice the clients vouched for plus 1,024, so a
   * server whose ids are sparse (hashes, or a few large ones) spends no memory on them; those
   * clients take the lookup.
   */
  private boolean vouchable(long clientId) {
    return clientId >= 0
        && clientId < DENSE_LIMIT
        && (clientId < vouchedById.length || clientId < 2L * vouchedCount + 1024);
  }

  /**
   * Remembers {@code peer} as the client's, with the handle of the client's current entry, so its
   * posts skip the lookup; {@code clientId} is {@link #vouchable}.
   */
  private void vouch(long clientId, BoundPeer peer, long handle) {
    int at = (int) clientId;
    if (at >= vouchedById.length) {
      int length = Math.min(DENSE_LIMIT, Math.max(1024, Integer.highestOneBit(at) << 1));
      vouchedById = Arrays.copyOf(vouchedById, length);
      handleById = Arrays.copyOf(handleById, length);
    }
    if (vouchedById[at] == null) {
      vouchedCount++;
    }
    vouchedById[at] = peer;
    handleById[at] = handle;
  }

  /** Stops vouching for the client's peer, if any: its entry is changing. */
  private void withdraw(long clientId) {
    if (clientId >= 0 && clientId < vouchedById.length && vouchedById[(int) clientId] != null) {
      vouchedById[(int) clientId] = null;
      vouchedCount--;
    }
  }

  /** Stops vouching for every peer: every entry is going. */
  private void withdrawAll() {
    Arrays.fill(vouchedById, null);
    vouchedCount = 0;
  }

  private long slowHandle(long clientId, byte[] address, Entry current, boolean advertised) {
    // Validates too: a malformed address must fail before anything is released or inserted.
    Identity identity = new Identity(endpoint.peerIdentity(address));
    Entry known = byIdentity.get(identity);
    if (!advertised) {
      if (current != null && contains(previous.get(clientId), address)) {
        throw stale(clientId, address, current.address, false);
      }
      if (known != null
          && !Arrays.equals(known.address, address)
          && contains(known.older, address)) {
        throw stale(clientId, address, known.address, true);
      }
    }
    if (known != null
        && Arrays.equals(known.address, address)
        && !known.removed
        && (known.holders > 0 || known.retired)) {
      // Live, or retired but still in the vector: share it (never a second entry for one address).
      if (known.holders == 0) {
        revive(known);
      }
      known.hold(clientId);
      Entry before = hold(clientId, known);
      if (before != null) {
        moved(clientId, before);
      }
      forgetPrevious(clientId, address);
      return known.handle;
    }
    byte[][] older = null;
    if (known != null && !Arrays.equals(known.address, address)) {
      // A new incarnation of the slot: the known one is dead for every client holding it.
      older = pushFront(known.older, known.address);
      if (known.holders > 0) {
        evictIncarnation(clientId, known);
        current = byClient.get(clientId);
      }
    } else if (known != null) {
      older = known.older;
    }
    if (current != null) {
      // A re-advertised, different address: the old one leaves the vector once this was its last
      // holder and its operations are done, so a client that moved does not pin its dead
      // endpoint's slot, and does not lose what it posted there either.
      drop(clientId);
      moved(clientId, current);
    }
    byte[] stored = address.clone();
    long handle = endpoint.insertPeer(stored);
    Entry entry = new Entry(stored, handle);
    entry.older = older;
    entry.hold(clientId);
    INSERTS.setOpaque(this, inserts + 1);
    liveEntries++;
    if (byIdentity.size() >= sweepThreshold) {
      sweep();
    }
    byIdentity.put(identity, entry);
    hold(clientId, entry);
    forgetPrevious(clientId, address);
    return handle;
  }

  /**
   * Loads, all at once, where {@link #handle(long, byte[], Peer)} will find these clients, so the
   * cache misses of a batch of posts overlap instead of each stalling its own post; changes
   * nothing. For a request that carries its peer and whose id the vouched-for arrays reach, their
   * entries; for any other, the index slot. Worker thread only.
   *
   * @param clientIds the clients about to be posted to
   * @param carriesPeer for each, whether its request carries a peer
   * @param count how many of {@code clientIds} to load
   */
  public void warm(long[] clientIds, boolean[] carriesPeer, int count) {
    @Nullable Object[] byId = vouchedById;
    long[] byIdHandles = handleById;
    long sum = 0;
    for (int i = 0; i < count; i++) {
      long clientId = clientIds[i];
      if (carriesPeer[i] && clientId >= 0 && clientId < byId.length) {
        sum += byIdHandles[(int) clientId] + (byId[(int) clientId] == null ? 0 : 1);
      } else {
        sum += handles.touch(clientId);
      }
    }
    warmth = sum;
  }

  /** Makes {@code entry} the client's, in both maps; returns the one it held before, or null. */
  private @Nullable Entry hold(long clientId, Entry entry) {
    handles.put(clientId, entry.handle, entry.address);
    Entry before = byClient.put(clientId, entry);
    if (before != entry) {
      withdraw(clientId);
    }
    return before;
  }

  /** Takes the client's entry out of both maps; returns it, or null when it held none. */
  private @Nullable Entry drop(long clientId) {
    handles.remove(clientId);
    withdraw(clientId);
    return byClient.remove(clientId);
  }

  /** The client left {@code entry} for another address: remember it as stale, and leave it. */
  private void moved(long clientId, Entry entry) {
    previous.put(clientId, pushFront(forget(previous.get(clientId), entry.address), entry.address));
    leave(entry, clientId);
  }

  private void forgetPrevious(long clientId, byte[] address) {
    byte[][] past = previous.get(clientId);
    if (contains(past, address)) {
      // Forgetting the history's only address leaves none: the map holds no null values.
      byte[][] kept = forget(past, address);
      if (kept == null) {
        previous.remove(clientId);
      } else {
        previous.put(clientId, kept);
      }
    }
  }

  /**
   * The failure of a transfer whose request carries an address replaced since it was queued; what
   * to do about it is the application's: the client's current advertisement is the one to use.
   */
  private static DmaException stale(
      long clientId, byte[] address, byte[] current, boolean incarnation) {
    HexFormat hex = HexFormat.of();
    String why =
        incarnation
            ? " is an older incarnation of the endpoint now at "
                + hex.formatHex(current)
                + " (its device reused the slot for a new endpoint)"
            : " is no longer client "
                + clientId
                + "'s address: it has moved to "
                + hex.formatHex(current);
    return new DmaException(
        DmaException.Kind.TRANSFER,
        DmaException.Reason.BAD_REQUEST,
        "client "
            + clientId
            + ": the transfer's peer address "
            + hex.formatHex(address)
            + why
            + ", seen after this transfer was queued; it was not posted. Submit it again with the"
            + " client's current advertisement, or addPeer the old address if it is the right one"
            + " after all",
        0,
        0,
        null);
  }

  /**
   * Releases every client holding {@code stale}, a previous incarnation of an endpoint slot that a
   * client just advertised with new bytes: posting to it would reach nothing (or the wrong
   * endpoint), and it would otherwise stay in the vector as long as any client held it. Holders
   * with operations outstanding linger on it, so it leaves the vector once they are done.
   */
  private void evictIncarnation(long clientId, Entry stale) {
    long[] holders = Arrays.copyOf(stale.clients, stale.holders);
    for (long holder : holders) {
      drop(holder);
    }
    for (long holder : holders) {
      leave(stale, holder);
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
   * Releases a client's entry; the last holder out removes it from the address vector, unless a
   * client that left it earlier still has operations posted against it (it is then retired). A
   * client that is itself still busy removes it at once: the worker releases such a client only to
   * have the provider flush its operations. Releasing a client that holds nothing (or twice) is
   * harmless; the client's previous addresses are forgotten too. Worker thread only.
   *
   * @param clientId the client
   */
  public void release(long clientId) {
    previous.remove(clientId);
    Entry entry = drop(clientId);
    if (entry == null) {
      return;
    }
    if (busy.test(clientId)) {
      entry.unhold(clientId);
      if (entry.holders == 0) {
        retired.remove(entry);
        remove(entry);
      }
    } else {
      leave(entry, clientId);
    }
  }

  /**
   * One client stops holding {@code entry}. When it still has operations outstanding it lingers,
   * and the entry, once nobody holds it, waits for its lingering clients before leaving the vector.
   */
  private void leave(Entry entry, long clientId) {
    entry.unhold(clientId);
    if (busy.test(clientId)) {
      entry.linger(clientId);
    }
    entry.pruneLingering(busy);
    if (entry.holders > 0) {
      return;
    }
    if (entry.lingering > 0) {
      if (!entry.retired) {
        entry.retired = true;
        retired.add(entry);
      }
    } else {
      if (entry.retired) {
        entry.retired = false;
        retired.remove(entry);
      }
      remove(entry);
    }
  }

  /** A retired entry held again before its removal: it stays in the vector. */
  private void revive(Entry entry) {
    if (entry.retired) {
      entry.retired = false;
      retired.remove(entry);
    }
  }

  /**
   * Whether a removal waits for operations outstanding.
   *
   * @return whether {@link #removeRetired()} has work
   */
  public boolean hasRetired() {
    return !retired.isEmpty();
  }

  /**
   * Removes from the address vector each retired entry none of whose former holders has operations
   * outstanding any more. Worker thread only; the worker calls it when a client's last operation
   * finishes.
   */
  public void removeRetired() {
    for (Iterator<Entry> each = retired.iterator(); each.hasNext(); ) {
      Entry candidate = each.next();
      candidate.pruneLingering(busy);
      if (candidate.lingering == 0) {
        each.remove();
        candidate.retired = false;
        remove(candidate);
      }
    }
  }

  /**
   * After {@link FabricEndpoint#reset()}: every handle is void and the new address vector is empty.
   * Forgets every entry without removing it (nothing is posted against the old vector any more, and
   * it closed with the endpoint), then inserts again the address of every client that {@code keep}
   * accepts; the others (dead peers) hold nothing and are inserted afresh by their next transfer or
   * {@code addPeer}. What makes an address stale (each client's previous addresses, each slot's
   * previous incarnations) survives the reset. A client whose insert fails holds nothing; its next
   * transfer tries again and fails with the reason. Worker thread only.
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
    handles.clear();
    withdrawAll();
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
          // Its own address, so advertised: current by definition, never stale.
          advertised(clientId, entry.address);
          Entry fresh = byClient.get(clientId);
          if (fresh != null && fresh.older == null) {
            fresh.older = entry.older;
          }
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
    handles.clear();
    withdrawAll();
    byIdentity.clear();
    retired.clear();
    previous.clear();
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

  /** Whether the peer's handle is this table's to post without a lookup; for tests. */
  boolean vouchesFor(BoundPeer peer) {
    long clientId = peer.clientId();
    return clientId >= 0 && clientId < vouchedById.length && vouchedById[(int) clientId] == peer;
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
      Entry entry = entries.next();
      // A retired entry stays findable: a client coming back to it shares it rather than
      // inserting its address a second time.
      if (entry.holders == 0 && !entry.retired) {
        entries.remove();
      }
    }
    sweepThreshold = Math.max(SWEEP_FLOOR, 2 * byIdentity.size());
  }

  /** Puts a dead entry straight into the index, as a released one would be; for tests. */
  void indexDead(byte[] identity) {
    Entry dead = new Entry(identity.clone(), 0);
    dead.removed = true;
    byIdentity.put(new Identity(identity.clone()), dead);
  }

  private static boolean contains(byte[] @Nullable [] addresses, byte[] address) {
    if (addresses != null) {
      for (byte[] each : addresses) {
        if (Arrays.equals(each, address)) {
          return true;
        }
      }
    }
    return false;
  }

  /** {@code addresses} without {@code address}. */
  private static byte[] @Nullable [] forget(byte[] @Nullable [] addresses, byte[] address) {
    if (!contains(addresses, address)) {
      return addresses;
    }
    ArrayList<byte[]> kept = new ArrayList<>(addresses.length);
    for (byte[] each : addresses) {
      if (!Arrays.equals(each, address)) {
        kept.add(each);
      }
    }
    return kept.isEmpty() ? null : kept.toArray(new byte[0][]);
  }

  /** {@code address} in front of {@code addresses}, keeping at most {@link #HISTORY}. */
  private static byte[][] pushFront(byte[] @Nullable [] addresses, byte[] address) {
    int kept = addresses == null ? 0 : Math.min(addresses.length, HISTORY - 1);
    byte[][] result = new byte[kept + 1][];
    result[0] = address;
    if (kept > 0) {
      System.arraycopy(addresses, 0, result, 1, kept);
    }
    return result;
  }

  /** Removes an entry whose last holder left from the address vector. */
  private void remove(Entry entry) {
    entry.removed = true;
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

    /** Clients that left while operations were outstanding, posted against this handle. */
    long[] lingerers = new long[0];

    int lingering;

    /** Waiting in {@link #retired} for its lingering clients. */
    boolean retired;

    /** Gone from the address vector: its handle is never posted against again. */
    boolean removed;

    /** The slot's previous incarnations, newest first: addresses that are stale on sight. */
    byte[] @Nullable [] older;

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

    void linger(long clientId) {
      for (int i = 0; i < lingering; i++) {
        if (lingerers[i] == clientId) {
          return;
        }
      }
      if (lingering == lingerers.length) {
        lingerers = Arrays.copyOf(lingerers, Math.max(2, lingering * 2));
      }
      lingerers[lingering++] = clientId;
    }

    /** Forgets the lingering clients whose operations are all done. */
    void pruneLingering(LongPredicate busy) {
      for (int i = 0; i < lingering; ) {
        if (busy.test(lingerers[i])) {
          i++;
        } else {
          lingerers[i] = lingerers[--lingering];
        }
      }
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
