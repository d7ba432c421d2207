package dev.dma.fake;

import dev.dma.api.DmaException;
import java.util.HexFormat;
import org.jspecify.annotations.Nullable;

/**
 * How the peers of one {@link FakeEndpoint} change: inserting an address into its {@link
 * AddressVector} (refused when malformed or when the script fails the insert), removing a handle
 * (counting a removal with ops outstanding and, under {@link FakeScript#flushOnRemove}, flushing
 * them), and answering whether a peer is gone. The vector itself holds the handles; this class is
 * what the endpoint's peer calls do to it and to the counters.
 *
 * <p>Threads: one per endpoint, called only by it with the fabric's lock held, on its owner's
 * thread (the SPI's peer calls).
 */
final class FakePeers {
  private final FakeFabric fabric;
  private final FakeScript script;
  private final Counts counts;
  private final boolean efa;
  private final AddressVector peers;
  private final OpSlots slots;
  private final ScriptedDecisions decisions;
  private final ParkedOps parked;

  FakePeers(
      FakeFabric fabric,
      FakeScript script,
      Counts counts,
      boolean efa,
      AddressVector peers,
      OpSlots slots,
      ScriptedDecisions decisions,
      ParkedOps parked) {
    this.fabric = fabric;
    this.script = script;
    this.counts = counts;
    this.efa = efa;
    this.peers = peers;
    this.slots = slots;
    this.decisions = decisions;
    this.parked = parked;
  }

  /**
   * Inserts a copy of a well-formed address, with the endpoint that has it now (or none).
   *
   * @return the peer's handle
   * @throws DmaException of kind FABRIC for a malformed address or a scripted failure
   */
  long insert(byte[] peerAddress) {
    String problem = FakeAddresses.problem(peerAddress, efa);
    if (problem != null) {
      counts.increment(Counts.INSERT_FAILURES);
      throw DmaException.fabric(DmaException.Reason.BAD_REQUEST, problem);
    }
    DmaException failure = decisions.insertFailure();
    if (failure != null) {
      counts.increment(Counts.INSERT_FAILURES);
      throw failure;
    }
    byte[] copy = peerAddress.clone();
    FakeEndpoint target = fabric.endpointAt(copy);
    counts.increment(Counts.INSERTS);
    return peers.insert(copy, target, script.reuseAddressHandles);
  }

  /**
   * Removes a live handle, counting it, and flushes its unreaped ops when scripted.
   *
   * @param handle a handle {@link SpiContract#removePeerProblem} found no problem with
   */
  void remove(long handle) {
    peers.remove(handle);
    counts.increment(Counts.REMOVES);
    if (slots.postedTo(handle) > 0) {
      counts.increment(Counts.REMOVES_WITH_OPS_OUTSTANDING);
      if (script.flushOnRemove) {
        parked.flush(handle);
      }
    }
  }

  /**
   * Why the peer at {@code peerAddress} is gone: no open endpoint of this fabric has the address.
   *
   * @return {@code "no open fake endpoint has the address <hex> any more"}, or null
   */
  @Nullable String gone(byte[] peerAddress) {
    counts.increment(Counts.PEER_PROBES);
    FakeEndpoint target = fabric.endpointAt(peerAddress);
    return target == null || target.isClosedUnlocked()
        ? "no open fake endpoint has the address "
            + HexFormat.of().formatHex(peerAddress)
            + " any more"
        : null;
  }
}
