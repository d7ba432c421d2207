package dev.dma.bench.jmh;

import dev.dma.api.Operands;
import dev.dma.core.internal.regions.LocalRegions;
import dev.dma.core.internal.regions.RegionRegistry;
import dev.dma.core.internal.regions.Registration;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;

/**
 * The registration cache's per-post cost: {@code lease} + {@code release} on a cache hit (what the
 * worker pays on every post over a cached span or registered region), and on a miss with no span
 * (register + deregister of the operand's own extent, over an endpoint whose registration is a
 * counter, so only the cache's own overhead shows). Run with {@code -prof gc} for bytes per op; the
 * command is in dma-bench's pom.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Fork(value = 1, jvmArgsAppend = "-Xmx1g")
public class RegionCacheBenchmark {
  private static final long BASE = 0x7f00_0000_0000L;
  private static final long REGION_BYTES = 1 << 20;

  /** Cached entries in the domain: the binary search's depth. */
  @Param({"1", "64"})
  public int entries;

  private final Operands context = new Operands() {};
  private LocalRegions regions;
  private long[] addresses;
  private int next;

  /** A fresh registry with {@code entries} pinned regions; one benchmark thread owns it. */
  public RegionCacheBenchmark() {}

  /** Pins the regions and picks operand addresses spread over them. */
  @Setup(Level.Trial)
  public void setUp() {
    regions = LocalRegions.withExactBound(new NullEndpoint(), new RegionRegistry(), Long.MAX_VALUE);
    for (int i = 0; i < entries; i++) {
      regions.pin(BASE + i * 2 * REGION_BYTES, REGION_BYTES);
    }
    addresses = new long[1024];
    for (int i = 0; i < addresses.length; i++) {
      addresses[i] = BASE + (i % entries) * 2 * REGION_BYTES + (i * 4096L) % (REGION_BYTES / 2);
    }
  }

  /** Clears the domain. */
  @TearDown(Level.Trial)
  public void tearDown() {
    regions.close();
  }

  /**
   * A cache hit: lease the covering registration, read its descriptor, release.
   *
   * @return the descriptor, so the JIT keeps the work
   */
  @Benchmark
  public long leaseReleaseHit() {
    Registration lease = regions.lease(addresses[next++ & 1023], 4096, context);
    long descriptor = lease.descriptor();
    lease.release();
    return descriptor;
  }

  /**
   * A miss with no cacheable span: register the operand, then deregister it at release.
   *
   * @return the descriptor
   */
  @Benchmark
  public long leaseReleaseUncached() {
    Registration lease = regions.lease(BASE - 0x100_0000L + (next++ & 1023) * 4096L, 4096, context);
    long descriptor = lease.descriptor();
    lease.release();
    return descriptor;
  }
}
