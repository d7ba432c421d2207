package dev.dma.libfabric;

import dev.dma.api.Advertisement;
import dev.dma.api.DmaConfiguration;
import dev.dma.api.RemoteAccess;
import dev.dma.spi.ExposedRegion;
import dev.dma.spi.FabricEndpoint;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * A measurement, not a test: a burst of mixed RMA writes and reads through a window, to count how
 * often completions stop for good (udp;ofi_rxd stalled under contention; sockets once lost
 * completions in dma-it's two-direction burst). One initiator driven by the main thread (post,
 * reap) and one passive target progressed by its own thread, as {@code PassiveTarget} does, in one
 * JVM. A try "stalls" when no completion arrives for {@code stallSeconds} while operations are in
 * flight; the endpoints are then closed (on a helper thread, bounded) and the next try starts.
 *
 * <pre>
 *   java --enable-native-access=ALL-UNNAMED -cp ... dev.dma.libfabric.BurstProbe \
 *       udp;ofi_rxd 10 600 64 16384 5
 * </pre>
 *
 * Arguments: provider, tries, operations per try, window, size in bytes, stall seconds. Prints one
 * line per try and a summary {@code stalls S of N}. Environment variables such as {@code
 * FI_OFI_RXD_MAX_UNACKED} apply as usual (libfabric reads them when it initializes).
 */
public final class BurstProbe {
  private BurstProbe() {}

  /**
   * Runs the probe.
   *
   * @param args see the class documentation
   * @throws Exception on a setup failure
   */
  public static void main(String[] args) throws Exception {
    String provider = args.length > 0 ? args[0] : "udp;ofi_rxd";
    int tries = args.length > 1 ? Integer.parseInt(args[1]) : 10;
    int operations = args.length > 2 ? Integer.parseInt(args[2]) : 600;
    int window = args.length > 3 ? Integer.parseInt(args[3]) : 64;
    int size = args.length > 4 ? Integer.parseInt(args[4]) : 16384;
    int stallSeconds = args.length > 5 ? Integer.parseInt(args[5]) : 5;
    DmaConfiguration configuration =
        DmaConfiguration.builder()
            .providers("libfabric:" + provider)
            .bind(provider.equals("shm") ? null : "127.0.0.1")
            .build();
    EndpointPolicy policy = LibfabricProvider.policyFor("libfabric:" + provider);
    int stalls = 0;
    for (int t = 1; t <= tries; t++) {
      String outcome = once(policy, configuration, operations, window, size, stallSeconds);
      if (outcome.startsWith("STALL")) {
        stalls++;
      }
      System.out.println("try " + t + ": " + outcome);
      System.out.flush();
    }
    System.out.println(
        "stalls "
            + stalls
            + " of "
            + tries
            + " ("
            + provider
            + ", "
            + operations
            + " ops of "
            + size
            + " B, window "
            + window
            + ", libfabric "
            + Libfabric.versionText(Libfabric.version())
            + ")");
    System.exit(0); // a provider thread stuck in a close must not keep the JVM alive
  }

  private static String once(
      EndpointPolicy policy,
      DmaConfiguration configuration,
      int operations,
      int window,
      int size,
      int stallSeconds)
      throws InterruptedException {
    Arena arena = Arena.ofShared();
    LibfabricEndpoint initiator = LibfabricEndpoint.open(policy, configuration);
    LibfabricEndpoint target = LibfabricEndpoint.open(policy, configuration);
    initiator.openSlots(window);
    // Two halves per slot: writes land in the first, reads come from the second.
    MemorySegment remote = arena.allocate(2L * window * size, 4096);
    MemorySegment local = arena.allocate((long) window * size, 4096).fill((byte) 3);
    ExposedRegion region = target.expose(remote, RemoteAccess.READ_WRITE);
    Advertisement ad = region.advertisement();
    long peer = initiator.insertPeer(target.localAddress());
    long localDescriptor = 0;
    long localRegistration = 0;
    if (initiator.requiresLocalRegistration()) {
      localRegistration = initiator.register(local.address(), local.byteSize());
      localDescriptor = initiator.descriptor(localRegistration);
    }
    AtomicBoolean stop = new AtomicBoolean();
    Thread progress =
        Thread.ofPlatform()
            .daemon()
            .start(
                () -> {
                  while (!stop.get()) {
                    target.progress();
                    Thread.yield();
                  }
                });
    FreeSlots sink = new FreeSlots(window);
    int posted = 0;
    long lastCompletion = System.nanoTime();
    long start = lastCompletion;
    String outcome;
    while (true) {
      int before = sink.reaped();
      while (posted < operations && sink.any()) {
        int slot = sink.peek();
        boolean write = (posted & 1) == 0;
        long remoteAddress =
            ad.remoteAddress() + (long) slot * size + (write ? 0 : (long) window * size);
        long at = local.address() + (long) slot * size;
        int rc =
            write
                ? initiator.postWrite(
                    slot, peer, at, size, localDescriptor, remoteAddress, ad.remoteKey())
                : initiator.postRead(
                    slot, peer, at, size, localDescriptor, remoteAddress, ad.remoteKey());
        if (rc == FabricEndpoint.AGAIN) {
          break;
        }
        if (rc != FabricEndpoint.POSTED) {
          throw new IllegalStateException("post failed: " + rc + " " + initiator.errorText(rc));
        }
        sink.take();
        posted++;
      }
      initiator.reap(sink, 16);
      int now = sink.reaped();
      if (now != before) {
        lastCompletion = System.nanoTime();
      }
      if (now == operations) {
        outcome =
            "ok in "
                + TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start)
                + " ms ("
                + sink.failed
                + " failed)";
        break;
      }
      if (System.nanoTime() - lastCompletion > TimeUnit.SECONDS.toNanos(stallSeconds)) {
        outcome =
            "STALL after "
                + now
                + " completions ("
                + sink.failed
                + " failed), "
                + (posted - now)
                + " in flight, nothing for "
                + stallSeconds
                + " s";
        break;
      }
    }
    stop.set(true);
    progress.join(10_000);
    long registration = localRegistration;
    Thread closer =
        Thread.ofPlatform()
            .daemon()
            .start(
                () -> {
                  region.close();
                  if (registration != 0) {
                    initiator.deregister(registration);
                  }
                  initiator.close();
                  target.close();
                  arena.close();
                });
    closer.join(30_000);
    if (closer.isAlive()) {
      outcome += "; close still running after 30 s";
    }
    return outcome;
  }
}
