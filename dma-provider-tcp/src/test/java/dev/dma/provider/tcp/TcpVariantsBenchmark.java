package dev.dma.provider.tcp;

import dev.dma.api.Advertisement;
import dev.dma.api.DmaConfiguration;
import dev.dma.api.RemoteAccess;
import dev.dma.libfabric.EndpointPolicy;
import dev.dma.libfabric.LibfabricEndpoint;
import dev.dma.spi.CompletionSink;
import dev.dma.spi.ExposedRegion;
import dev.dma.spi.FabricEndpoint;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * The measurement behind {@link TcpProvider}'s choice on libfabric 1.x: tcp;ofi_rxm against net,
 * through {@link LibfabricEndpoint}, in one JVM, one thread posting, reaping and progressing the
 * target. Not a test (no timing assertions anywhere): run it by hand, see {@link #main}.
 */
public final class TcpVariantsBenchmark {
  private TcpVariantsBenchmark() {}

  /** Counts completions. */
  static final class Counter implements CompletionSink {
    final int[] free;
    int count;
    long done;

    Counter(int slots) {
      free = new int[slots];
      for (int i = 0; i < slots; i++) {
        free[count++] = i;
      }
    }

    @Override
    public void completed(int slot) {
      free[count++] = slot;
      done++;
    }

    @Override
    public void failed(int slot, int errno, int providerErrno, String message) {
      throw new IllegalStateException(message);
    }
  }

  /**
   * Runs {@code ops} writes of {@code size} through {@code window}; returns elapsed nanoseconds.
   */
  static long run(
      FabricEndpoint initiator,
      FabricEndpoint target,
      long peer,
      MemorySegment local,
      Advertisement ad,
      long size,
      int window,
      long ops) {
    Counter counter = new Counter(window);
    long posted = 0;
    long start = System.nanoTime();
    while (counter.done < ops) {
      while (posted < ops && counter.count > 0) {
        int slot = counter.free[counter.count - 1];
        int rc =
            initiator.postWrite(
                slot, peer, local.address(), size, 0, ad.remoteAddress(), ad.remoteKey());
        if (rc == FabricEndpoint.AGAIN) {
          break;
        }
        if (rc != 0) {
          throw new IllegalStateException("post: " + initiator.errorText(rc));
        }
        counter.count--;
        posted++;
      }
      initiator.reap(counter, window);
      target.progress();
    }
    return System.nanoTime() - start;
  }

  /**
   * Prints, per variant, the median of {@code rounds} runs: 64 B write latency at window 1 and 64
   * KiB write bandwidth at window 64.
   *
   * <p>Run from the repository root (the JDK 25 {@code java}):
   *
   * <pre>
   * ./mvnw -q -B -pl dma-provider-tcp -am test-compile
   * java --enable-native-access=ALL-UNNAMED -cp dma-api/target/classes:dma-core/target/classes:\
   * dma-libfabric/target/classes:dma-provider-tcp/target/classes:dma-provider-tcp/target/test-classes \
   *   dev.dma.provider.tcp.TcpVariantsBenchmark 7
   * </pre>
   *
   * @param args optionally the number of rounds (default 5), then the variants to compare (default
   *     {@code tcp;ofi_rxm} and {@link TcpProvider#libfabricProvider()})
   */
  public static void main(String[] args) {
    int rounds = args.length > 0 ? Integer.parseInt(args[0]) : 5;
    String[] variants =
        args.length > 1
            ? Arrays.copyOfRange(args, 1, args.length)
            : new String[] {"tcp;ofi_rxm", TcpProvider.libfabricProvider()};
    DmaConfiguration configuration = DmaConfiguration.builder().bind("127.0.0.1").build();
    List<List<double[]>> results = new ArrayList<>();
    for (int v = 0; v < variants.length; v++) {
      results.add(new ArrayList<>());
    }
    for (int round = 0; round < rounds; round++) {
      for (int v = 0; v < variants.length; v++) {
        EndpointPolicy policy = EndpointPolicy.of(variants[v]);
        try (Arena arena = Arena.ofShared();
            LibfabricEndpoint initiator = LibfabricEndpoint.open(policy, configuration);
            LibfabricEndpoint target = LibfabricEndpoint.open(policy, configuration)) {
          initiator.openSlots(64);
          long peer = initiator.insertPeer(target.localAddress());
          MemorySegment local = arena.allocate(64 << 10, 4096);
          MemorySegment remote = arena.allocate(64 << 10, 4096);
          try (ExposedRegion region = target.expose(remote, RemoteAccess.READ_WRITE)) {
            Advertisement ad = region.advertisement();
            run(initiator, target, peer, local, ad, 64, 1, 20_000); // warm-up and connect
            long latencyOps = 50_000;
            double latencyUs =
                run(initiator, target, peer, local, ad, 64, 1, latencyOps) / 1e3 / latencyOps;
            run(initiator, target, peer, local, ad, 64 << 10, 64, 2_000);
            long bandwidthOps = 40_000;
            long ns = run(initiator, target, peer, local, ad, 64 << 10, 64, bandwidthOps);
            double mbPerS = bandwidthOps * (64 << 10) / (ns / 1e9) / 1e6;
            results.get(v).add(new double[] {latencyUs, mbPerS});
            System.out.printf(
                "round %d %-12s (%s) 64 B w1 %.2f us, 64 KiB w64 %.0f MB/s%n",
                round, variants[v], initiator.providerName(), latencyUs, mbPerS);
          }
        }
      }
    }
    for (int v = 0; v < variants.length; v++) {
      double[] latency = results.get(v).stream().mapToDouble(r -> r[0]).sorted().toArray();
      double[] bandwidth = results.get(v).stream().mapToDouble(r -> r[1]).sorted().toArray();
      System.out.printf(
          "median %-12s 64 B w1 %.2f us (%.2f..%.2f), 64 KiB w64 %.0f MB/s (%.0f..%.0f)%n",
          variants[v],
          latency[latency.length / 2],
          latency[0],
          latency[latency.length - 1],
          bandwidth[bandwidth.length / 2],
          bandwidth[0],
          bandwidth[bandwidth.length - 1]);
    }
  }
}
