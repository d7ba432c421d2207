package dev.dma.libfabric;

import static java.lang.foreign.ValueLayout.JAVA_LONG;

import dev.dma.api.DmaException;
import dev.dma.libfabric.internal.Abi;
import dev.dma.libfabric.internal.Native;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import org.jspecify.annotations.Nullable;

/**
 * The peers of one {@link LibfabricEndpoint}: which {@code fi_addr} handles are live (between
 * {@link #insert} and {@link #remove}), and which of them are shm endpoints of this process ({@link
 * ShmNames}). It refuses malformed peer addresses before {@code fi_av_insert} and lets the data
 * path refuse posts against handles it did not hand out or has removed: libfabric validates
 * neither, and tcp;ofi_rxm dies with SIGSEGV on a bad {@code fi_addr}.
 *
 * <p>Only the endpoint's owner thread calls it. The data path asks {@link #isLive} and {@link
 * #local} on every post: small methods of a final class that allocate nothing and take no lock (a
 * post to a peer endpoint of this process locks that peer's record, see {@link ShmNames}).
 */
final class AddressVector {
  /** Under the endpoint's name, as before peers had a class of their own. */
  private static final System.Logger LOG = System.getLogger(LibfabricEndpoint.class.getName());

  /**
   * Largest {@code fi_addr} kept in the live-peer table ({@code FI_AV_TABLE} hands out indexes).
   */
  private static final long MAX_PEER_HANDLE = 1 << 24;

  private final FabricObjects objects;
  private final EndpointPolicy policy;

  /** {@code fi_av_insert}'s out-parameter and {@code fi_av_remove}'s in-parameter. */
  private final long addressOut;

  // Removals that sockets answered with its 2.5+ EINVAL, confirmed gone (quirkRemovals()).
  private int quirkRemovals;

  /**
   * shm's map slots ({@code SMR_MAX_PEERS}). shm reuses a removed peer's slot with that peer's
   * stale id ({@link Quirks#shmReusesSlotsWithStalePeerIds}), so dma never removes an shm peer:
   * {@link #remove} retires its handle and leaves its slot taken until the endpoint resets.
   */
  static final int SLOTS = 256;

  /**
   * Adds since the address vector opened past which the endpoint asks for a reset ({@link
   * LibfabricEndpoint#wantsQuietReset}): leaves room for the inserts that arrive while the worker
   * waits for what is in flight to complete.
   */
  static final int RECYCLE_GUARD = 192;

  // Whether removals retire instead (shm), with a reset past RECYCLE_GUARD adds.
  private final boolean slotsRecycleStale;

  // Successful inserts since the address vector opened (or was cleared by a reset).
  private int addsSinceOpen;

  // Peers retired (removed from live, left in shm's map) since then.
  private int retiredSinceOpen;

  // How many entries of live are true.
  private int liveCount;
  // live[fi_addr] is true between insert and remove.
  private boolean[] live = new boolean[64];

  // For shm: localPeers[fi_addr] is the record of a peer endpoint this process opened, else null.
  private ShmNames.Local[] localPeers = new ShmNames.Local[64];

  // For shm: shmPids[fi_addr] is the process of the peer's endpoint, from its name, else 0.
  private long[] shmPids = new long[64];

  /**
   * Creates an empty table.
   *
   * @param objects the endpoint's libfabric objects; the address vector must be open to insert
   * @param policy the provider's choices (the identity length)
   * @param arena the endpoint's arena
   */
  AddressVector(FabricObjects objects, EndpointPolicy policy, Arena arena) {
    this.objects = objects;
    this.policy = policy;
    this.slotsRecycleStale =
        Quirks.shmReusesSlotsWithStalePeerIds(policy.providerName(), Native.LIBRARY_VERSION);
    this.addressOut = arena.allocate(JAVA_LONG).address();
  }

  /**
   * A peer's identity: every byte of its address, or the policy's {@link
   * EndpointPolicy#identityLength()} leading bytes.
   *
   * @param address the peer's address, validated as {@link #validate} does
   * @return the identity, a new array
   */
  byte[] identity(byte[] address) {
    validate(address);
    int length = policy.identityLength();
    return length == 0 || length >= address.length
        ? address.clone()
        : Arrays.copyOf(address, length);
  }

  /**
   * Checks what libfabric would not: a socket address must be as long as this endpoint's own and an
   * {@code FI_SOCKADDR_IN}/{@code IN6} address must carry {@code AF_INET}/{@code AF_INET6}; an
   * {@code FI_ADDR_STR} address must be a printable, NUL-terminated {@code scheme://} string of at
   * most {@code FI_NAME_MAX} (64) bytes, whatever its length (shm's grows with the pid).
   */
  private void validate(byte[] address) {
    if (address == null) {
      throw DmaException.fabric(DmaException.Reason.BAD_REQUEST, "peer address is missing");
    }
    int addrFormat = objects.facts.addrFormat();
    if (addrFormat == Abi.FI_ADDR_STR) {
      validateString(address);
      return;
    }
    byte[] localAddress = objects.localAddress;
    if (address.length != localAddress.length) {
      throw DmaException.fabric(
          DmaException.Reason.BAD_REQUEST,
          "peer address is "
              + address.length
              + " bytes, but "
              + objects.facts.providerName()
              + " addresses are "
              + localAddress.length
              + " bytes");
    }
    if (addrFormat == Abi.FI_SOCKADDR_IN || addrFormat == Abi.FI_SOCKADDR_IN6) {
      int expected = addrFormat == Abi.FI_SOCKADDR_IN ? Abi.AF_INET : Abi.AF_INET6;
      // sin_family is a native-endian (little-endian on x86_64 and AArch64) 16-bit field.
      int family =
          (address[(int) Abi.SOCKADDR_FAMILY] & 0xff)
              | (address[(int) Abi.SOCKADDR_FAMILY + 1] & 0xff) << 8;
      if (family != expected) {
        throw DmaException.fabric(
            DmaException.Reason.BAD_REQUEST,
            "peer address is not a socket address: family " + family + ", expected " + expected);
      }
    }
  }

  /**
   * An {@code FI_ADDR_STR} address: printable {@code scheme://...}, one NUL at the end, at most
   * {@code max(FI_NAME_MAX, own length)} bytes. Its length is not the local one: shm's {@code
   * fi_shm://<pid>:<uid>:<index>} grows with the pid's digits and the endpoint index, so a peer
   * with a 4-digit pid is one byte shorter than one with a 5-digit pid. The NUL matters: the
   * provider {@code strdup}s the address.
   */
  private void validateString(byte[] address) {
    int limit = Math.max(Abi.FI_NAME_MAX, objects.localAddress.length);
    if (address.length < 2 || address.length > limit) {
      throw DmaException.fabric(
          DmaException.Reason.BAD_REQUEST,
          "peer address is "
              + address.length
              + " bytes, but "
              + objects.facts.providerName()
              + " address strings are 2 to "
              + limit
              + " bytes, NUL included");
    }
    int end = address.length - 1;
    if (address[end] != 0) {
      throw DmaException.fabric(
          DmaException.Reason.BAD_REQUEST, "peer address is not a NUL-terminated string");
    }
    for (int i = 0; i < end; i++) {
      if (address[i] < 0x20 || address[i] > 0x7e) {
        throw DmaException.fabric(
            DmaException.Reason.BAD_REQUEST, "peer address is not a printable address string");
      }
    }
    if (!new String(address, 0, end, StandardCharsets.US_ASCII).contains("://")) {
      throw DmaException.fabric(
          DmaException.Reason.BAD_REQUEST, "peer address is not an address string (scheme://...)");
    }
  }

  /**
   * Validates an address and inserts it into the address vector; the endpoint is open (its owner
   * thread checked).
   *
   * @param address the peer's address
   * @return the live handle ({@code fi_addr})
   * @throws DmaException of kind FABRIC for a malformed address or a failed insert
   */
  long insert(byte[] address) {
    validate(address);
    // The shm name an FI_ADDR_STR address carries, or null.
    String shmName =
        objects.facts.addrFormat() == Abi.FI_ADDR_STR ? ShmNames.nameOf(address) : null;
    ShmNames.@Nullable Local local = ShmNames.local(shmName);
    if (local != null && !local.open) {
      // shm would map the closed endpoint's unmapped region: the insert or the first post is a
      // SIGSEGV.
      throw DmaException.fabric(
          DmaException.Reason.PEER_UNREACHABLE,
          "peer " + local.name + " is an shm endpoint of this process that was already closed");
    }
    if (Quirks.shmInsertsGonePeers(objects.facts.providerName())
        && objects.facts.addrFormat() == Abi.FI_ADDR_STR) {
      // A peer that is gone is refused on every version, so a stale advertisement fails the same
      // way everywhere. Up to 2.4 it is also a guard: there shm answers the insert of a peer whose
      // region is gone with success, and hands the next insert, of any peer, the same fi_addr
      // (1.x's smr_map_add takes the slot at cur_id, smr_map_to_region's -ENOENT counts as success
      // with the slot's peer id left at -1, and the util AV deduplicates by slot index), so that
      // removing the gone one removes the live one. Seen on 1.17 in dma-bench scale --churn on
      // shm. A peer closing at this very moment can still slip through.
      String gone = PeerLiveness.shmGone(address);
      if (gone != null) {
        throw DmaException.fabric(
            DmaException.Reason.PEER_UNREACHABLE, "peer " + shmName + " is gone: " + gone);
      }
    }
    if (slotsRecycleStale && addsSinceOpen >= SLOTS && retiredSinceOpen > 0) {
      // The reset the endpoint asked for at RECYCLE_GUARD adds has not come yet (transfers still
      // in flight), and retired peers hold the slots this one needs.
      throw new DmaException(
          DmaException.Kind.FABRIC,
          DmaException.Reason.BACKPRESSURE,
          "shm's "
              + SLOTS
              + " peer slots are held by "
              + liveCount
              + " peers and "
              + retiredSinceOpen
              + " that left (shm cannot reuse a slot safely); the endpoint resets to free them once"
              + " its transfers in flight complete: add the peer again shortly",
          0,
          0,
          null);
    }
    // A peer of this process goes in under an alias of its name, so that shm maps it as it maps
    // another process's endpoint, on every version. It then has a mapping of this endpoint's own,
    // which the peer's close does not unmap: under its own name shm points at the peer's mapping,
    // and finishing a transfer the peer served before closing took a lock in unmapped memory
    // (1.17, ShmCloseOrderTest). And on 2.x it runs its CMA check, without which every transfer
    // above 4 KiB between two endpoints of one process goes through bounce buffers (Quirks).
    byte[] inserted = local != null ? ShmNames.aliasOf(local.name) : address;
    try (Arena call = Arena.ofConfined()) {
      MemorySegment bytes = call.allocate(inserted.length, 8);
      MemorySegment.copy(
          inserted, 0, bytes, java.lang.foreign.ValueLayout.JAVA_BYTE, 0, inserted.length);
      Native.MEMORY.set(JAVA_LONG, addressOut, Abi.FI_ADDR_NOTAVAIL);
      int count =
          (int)
              Native.I_LLLLLL.invokeExact(
                  objects.fnAvInsert, objects.av, bytes.address(), 1L, addressOut, 0L, 0L);
      if (count != 1) {
        throw insertFailed(count);
      }
      long handle = Native.word(addressOut);
      if (handle < 0 || handle >= MAX_PEER_HANDLE) {
        // Not an FI_AV_TABLE index: keep it out of the post path rather than trust it.
        throw DmaException.fabric(
            "fi_av_insert returned an unexpected fi_addr " + Long.toUnsignedString(handle));
      }
      if (handle >= live.length) {
        live = Arrays.copyOf(live, (int) Math.max(handle + 1, 2L * live.length));
        localPeers = Arrays.copyOf(localPeers, live.length);
        shmPids = Arrays.copyOf(shmPids, live.length);
      }
      live[(int) handle] = true;
      liveCount++;
      addsSinceOpen++;
      localPeers[(int) handle] = local;
      shmPids[(int) handle] = shmName == null ? 0 : ShmNames.pidOf(shmName);
      return handle;
    } catch (RuntimeException | Error rethrown) {
      throw rethrown;
    } catch (Throwable impossible) {
      throw new AssertionError(impossible);
    }
  }

  /**
   * The failure of an insert that returned {@code inserted} instead of 1: where the provider has a
   * peer limit, a {@link DmaException.Reason#LIMIT} naming it, its value and what raises it.
   */
  private DmaException insertFailed(int inserted) {
    String call =
        inserted < 0
            ? Native.failure("fi_av_insert", inserted)
            : "fi_av_insert inserted " + inserted + " of 1 addresses";
    String limit = ProviderLimits.peerLimit(objects.facts.providerName(), liveCount);
    if (limit != null) {
      return new DmaException(
          DmaException.Kind.FABRIC,
          DmaException.Reason.LIMIT,
          call + ": " + limit,
          inserted < 0 ? -inserted : 0,
          0,
          null);
    }
    return inserted < 0
        ? new DmaException(DmaException.Kind.FABRIC, call, -inserted, 0, null)
        : DmaException.fabric(call);
  }

  /**
   * Removes a live handle; the endpoint is open (its owner thread checked). On shm only the handle
   * is dropped (retired): its slot stays taken until the address vector closes, see {@link
   * #RECYCLE_GUARD}.
   *
   * @param handle the handle
   * @return 0, {@code -FI_ENOENT} for a handle that is not live, or what {@code fi_av_remove}
   *     returned; 0 for sockets' {@code -FI_EINVAL} of a removal that happened (see {@link
   *     Quirks#socketsRemovalAnswersEinval})
   */
  int remove(long handle) {
    if (handle < 0 || handle >= live.length || !live[(int) handle]) {
      return -Abi.FI_ENOENT;
    }
    // Invalidate first: a post against a removed fi_addr crashes tcp;ofi_rxm.
    live[(int) handle] = false;
    liveCount--;
    localPeers[(int) handle] = null;
    shmPids[(int) handle] = 0;
    if (slotsRecycleStale) {
      // Retired, not removed: a freed slot would go to a later peer with this one's stale id. This
      // also keeps fi_av_remove away from a closed shm peer of this process, whose unmapped region
      // it would write into (SIGSEGV in smr_unmap_region).
      retiredSinceOpen++;
      return 0;
    }
    Native.MEMORY.set(JAVA_LONG, addressOut, handle);
    int removed;
    try {
      removed = (int) Native.I_LLLL.invokeExact(objects.fnAvRemove, objects.av, addressOut, 1L, 0L);
    } catch (Throwable impossible) {
      throw new AssertionError(impossible);
    }
    if (removed == -Abi.FI_EINVAL
        && Quirks.socketsRemovalAnswersEinval(objects.facts.providerName(), Native.LIBRARY_VERSION)
        && isGoneFromTheAddressVector(handle)) {
      // The handle was live, so the table half of sock_av_remove found it valid: the EINVAL is the
      // connection half's "no connection to this peer yet", and the entry is removed regardless.
      quirkRemovals++;
      LOG.log(
          System.Logger.Level.DEBUG,
          "sockets answered fi_av_remove of never-connected peer "
              + handle
              + " with -FI_EINVAL; fi_av_lookup confirms the entry is gone");
      return 0;
    }
    return removed;
  }

  /**
   * Whether {@code fi_av_lookup} refuses a handle, that is whether the address vector no longer
   * holds it. False when the provider has no lookup or still resolves the handle.
   */
  private boolean isGoneFromTheAddressVector(long handle) {
    if (objects.fnAvLookup.address() == 0) {
      return false;
    }
    try (Arena call = Arena.ofConfined()) {
      MemorySegment address = call.allocate(Math.max(objects.localAddress.length, 1), 8);
      MemorySegment length = call.allocate(JAVA_LONG);
      length.set(JAVA_LONG, 0, address.byteSize());
      int looked =
          (int)
              Native.I_LLLL.invokeExact(
                  objects.fnAvLookup, objects.av, handle, address.address(), length.address());
      return looked == -Abi.FI_EINVAL;
    } catch (RuntimeException | Error rethrown) {
      throw rethrown;
    } catch (Throwable impossible) {
      throw new AssertionError(impossible);
    }
  }

  /**
   * How many removals answered {@code -FI_EINVAL} under the sockets quirk ({@link
   * Quirks#socketsRemovalAnswersEinval}) and were reported as the success they were. For tests.
   *
   * @return the count since the endpoint opened
   */
  int quirkRemovals() {
    return quirkRemovals;
  }

  /**
   * Whether {@code peer} is a handle this table handed out and has not removed.
   *
   * @param peer the handle
   * @return whether a post may name it
   */
  boolean isLive(long peer) {
    return peer >= 0 && peer < live.length && live[(int) peer];
  }

  /**
   * The record of a live peer that is an shm endpoint of this process, or null: a post to it holds
   * the record's monitor and checks {@link ShmNames.Local#open} under it (see {@link ShmNames}).
   *
   * @param peer a live handle
   * @return the record, or null
   */
  ShmNames.@Nullable Local local(long peer) {
    return localPeers[(int) peer];
  }

  /**
   * Whether the endpoint should be reset before long: on shm, once {@link #RECYCLE_GUARD} peers
   * were added since the address vector opened and at least one of them was retired (see {@link
   * Quirks#shmReusesSlotsWithStalePeerIds}); the reset frees the retired peers' slots.
   */
  boolean wantsQuietReset() {
    return slotsRecycleStale && addsSinceOpen >= RECYCLE_GUARD && retiredSinceOpen > 0;
  }

  /**
   * The process of a live shm peer's endpoint, from its name ({@code fi_shm://<pid>:...}), or 0
   * when its name does not say (a name given with a source node) or it is not an shm peer.
   *
   * @param peer a live handle
   * @return the pid, or 0
   */
  long shmPid(long peer) {
    return shmPids[(int) peer];
  }

  /** Forgets every handle: the address vector they index was closed. */
  void clear() {
    Arrays.fill(live, false);
    Arrays.fill(localPeers, null);
    Arrays.fill(shmPids, 0);
    liveCount = 0;
    addsSinceOpen = 0;
    retiredSinceOpen = 0;
  }
}
