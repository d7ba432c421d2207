package dev.dma.bench;

import dev.dma.api.DmaConfiguration;
import dev.dma.api.RemoteAccess;
import dev.dma.core.PassiveTarget;
import dev.dma.core.TargetRegion;
import dev.dma.spi.FabricProvider;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;

/**
 * The passive side in this process: {@code count} {@link PassiveTarget}s, each with its own
 * endpoint and progress thread, each exposing one buffer of {@code lengthBytes} for remote read and
 * write (the C anchor's target exposes one buffer the same way).
 *
 * <p>Ownership: {@link #close()} closes the regions, the targets and the memory, in that order.
 * Threads: {@link #close()} is idempotent and may be called from two threads at once (a child's
 * {@link ParentWatch} and its main thread); the second waits for the first.
 */
final class LocalTargets implements AutoCloseable {
  private final List<PassiveTarget> targets = new ArrayList<>();
  private final List<TargetRegion> regions = new ArrayList<>();
  private final List<Control.TargetAd> ads = new ArrayList<>();
  private final String fabric;
  private boolean closed;

  LocalTargets(
      DmaConfiguration configuration, FabricProvider provider, int count, long lengthBytes) {
    // Each target idles as the configuration's target_idle says (run --target-idle): by default it
    // spins while transfers come and sleeps on its endpoint's wait object once they stop.
    try {
      for (int i = 0; i < count; i++) {
        PassiveTarget target = PassiveTarget.builder(configuration).provider(provider).start();
        targets.add(target);
        // Through the target: the one way to get memory every provider can expose (local can
        // share only memory it made); freed when its region closes.
        MemorySegment memory = target.allocate(lengthBytes);
        memory.fill((byte) 0x5a);
        TargetRegion region = target.expose(memory, RemoteAccess.READ_WRITE);
        regions.add(region);
        ads.add(new Control.TargetAd(region.advertisement(), lengthBytes));
      }
      fabric = targets.getFirst().endpointInfo().provider();
    } catch (RuntimeException e) {
      close();
      throw e;
    }
  }

  /** The advertisements, one per target. */
  List<Control.TargetAd> ads() {
    return List.copyOf(ads);
  }

  /** The libfabric provider the targets' endpoints run on. */
  String fabric() {
    return fabric;
  }

  /** Inserts a server's address on every target (efa-direct needs it before the server's RMA). */
  void insertPeer(byte[] serverAddress) {
    for (PassiveTarget target : targets) {
      target.insertPeer(serverAddress);
    }
  }

  @Override
  public synchronized void close() {
    if (closed) {
      return;
    }
    closed = true;
    for (TargetRegion region : regions) {
      region.close();
    }
    regions.clear();
    for (PassiveTarget target : targets) {
      target.close();
    }
    targets.clear();
  }
}
