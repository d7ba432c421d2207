package dev.dma.fake;

import dev.dma.api.DmaException;
import dev.dma.api.RemoteAccess;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;

/**
 * The simulated remote memory of one {@link FakeEndpoint}: the {@link Region}s it exposed and not
 * yet closed. Exposing gives a region the fabric's next key and adds it to the fabric's index,
 * where an initiator's {@link Rma} finds it by key; closing removes it from both. The checks an
 * access must pass are the region's ({@link Region#refusal}).
 *
 * <p>Threads: one per endpoint, called with the fabric's lock held: by its owner exposing, by any
 * thread closing a region ({@link Region#close()} takes the lock), and by whichever thread closes
 * the endpoint, which closes the regions still open.
 */
final class ExposedRegions {
  private final FakeEndpoint owner;
  private final FakeFabric fabric;
  private final FakeScript script;
  private final Counts counts;
  private final List<Region> exposed = new ArrayList<>();

  ExposedRegions(FakeEndpoint owner, FakeFabric fabric, FakeScript script, Counts counts) {
    this.owner = owner;
    this.fabric = fabric;
    this.script = script;
    this.counts = counts;
  }

  /**
   * Exposes native memory under the fabric's next key, with virtual addressing as the script says
   * now.
   *
   * @throws DmaException of kind FABRIC for a heap segment
   */
  Region expose(MemorySegment segment, RemoteAccess access) {
    if (!segment.isNative()) {
      throw DmaException.fabric(
          FiErrno.callMessage("fi_mr_reg", FiErrno.EINVAL)
              + ": a heap segment cannot be registered; allocate it from an Arena");
    }
    long key = fabric.nextKey();
    Region region = new Region(owner, key, segment, script.virtualAddressing, access);
    fabric.addRegion(region);
    exposed.add(region);
    counts.increment(Counts.EXPOSES);
    counts.increment(Counts.LIVE_EXPOSES);
    return region;
  }

  /** Forgets a region that just closed. */
  void closed(Region region) {
    fabric.removeRegion(region.key);
    exposed.remove(region);
    counts.add(Counts.LIVE_EXPOSES, -1);
  }

  /** Closes every region still open, as the endpoint closes. */
  void closeAll() {
    for (Region region : List.copyOf(exposed)) {
      region.closeUnlocked();
    }
  }
}
