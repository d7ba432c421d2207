package dev.dma.fake;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.jspecify.annotations.Nullable;

/**
 * The address vector of one {@link FakeEndpoint}: index = peer handle, holding the inserted address
 * and the endpoint that had it when it was inserted (null when none did, so posts to it are
 * unreachable); both null once removed. Handles count from 0 and are never reused, unless the
 * script {@linkplain FakeScript#reuseAddressHandles reuses} the lowest removed one.
 *
 * <p>Threads: guarded by the fabric's lock; only the owning endpoint calls it, with the lock held
 * (its owner inserting, removing, posting or resetting; any thread asking {@link
 * FakeEndpoint#livePeers()} or {@link FakeEndpoint#hasPeer}; a target checking, as bytes move,
 * whether it inserted an initiator).
 */
final class AddressVector {
  private final List<byte[]> addresses = new ArrayList<>();
  private final List<FakeEndpoint> targets = new ArrayList<>();

  /**
   * Adds a peer.
   *
   * @param address the peer's address, a copy this vector keeps
   * @param target the open endpoint with that address, or null
   * @param reuseHandles whether to take the lowest removed handle before a new one
   * @return the peer's handle
   */
  long insert(byte[] address, @Nullable FakeEndpoint target, boolean reuseHandles) {
    if (reuseHandles) {
      int free = addresses.indexOf(null);
      if (free >= 0) {
        addresses.set(free, address);
        targets.set(free, target);
        return free;
      }
    }
    addresses.add(address);
    targets.add(target);
    return addresses.size() - 1L;
  }

  /** Removes a live handle ({@link #problem} is null for it). */
  void remove(long handle) {
    addresses.set((int) handle, null);
    targets.set((int) handle, null);
  }

  /** Removes every peer; the handles stay issued, so a post to one is a violation. */
  void removeAll() {
    for (int handle = 0; handle < addresses.size(); handle++) {
      addresses.set(handle, null);
      targets.set(handle, null);
    }
  }

  /** Why {@code handle} is not a live peer handle, or null. */
  @Nullable String problem(long handle) {
    if (handle < 0 || handle >= addresses.size()) {
      return "peer handle " + handle + " was never inserted";
    }
    if (addresses.get((int) handle) == null) {
      return "peer handle " + handle + " was removed";
    }
    return null;
  }

  /** The address of a live handle, as inserted; callers copy it before handing it out. */
  byte[] address(long handle) {
    return addresses.get((int) handle);
  }

  /** The endpoint a live handle reached when inserted, or null. */
  @Nullable FakeEndpoint target(long handle) {
    return targets.get((int) handle);
  }

  /** Whether a live handle names exactly {@code address}. */
  boolean contains(byte[] address) {
    for (byte[] peer : addresses) {
      if (peer != null && Arrays.equals(peer, address)) {
        return true;
      }
    }
    return false;
  }

  /** How many handles are live. */
  int live() {
    int live = 0;
    for (byte[] peer : addresses) {
      live += peer != null ? 1 : 0;
    }
    return live;
  }
}
