package dev.dma.bench.jmh;

import dev.dma.api.CacheableSpan;
import dev.dma.api.Operands;
import dev.dma.core.internal.regions.LocalRegions;
import dev.dma.core.internal.regions.RegionRegistry;
import dev.dma.core.internal.regions.Registration;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;

/**
 * The registration cache at its pinned-bytes bound, by cache size: {@code entries} idle cached
 * spans fill the bound exactly, and every lease names a span that is not cached (the operands cycle
 * through {@code entries + 1} spans in a fixed random order, so least-recently-used eviction misses
 * every time). Each miss evicts the least recently used idle span, registers the new one and tracks
 * it; its release makes it idle again. A hit among as many entries is measured beside it. The
 * endpoint's registration is a counter ({@link NullEndpoint}), so only the cache's own cost shows.
 * Per-miss cost should not grow with {@code entries}.
 *
 * <pre>
 *   bin/dma-bench jmh RegionCacheBoundBenchmark -prof gc
 * </pre>
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Fork(value = 1, jvmArgsAppend = "-Xmx2g")
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
public class RegionCacheBoundBenchmark {
  private static final long BASE = 0x7f00_0000_0000L;
  private static final long SPAN_BYTES = 64 * 1024;

  /** Cached spans at the bound. */
  @Param({"256", "1000", "10000", "100000"})
  public int entries;

  private LocalRegions regions;
  private Operands[] contexts;
  private long[] addresses;
  private int next;

  /** One benchmark thread owns the regions. */
  public RegionCacheBoundBenchmark() {}

  /** Fills the bound with idle cached spans and shuffles the order operands come in. */
  @Setup(Level.Trial)
  public void setUp() {
    int spans = entries + 1;
    regions =
        LocalRegions.withExactBound(new NullEndpoint(), new RegionRegistry(), entries * SPAN_BYTES);
    Integer[] order = new Integer[spans];
    for (int i = 0; i < spans; i++) {
      order[i] = i;
    }
    java.util.Collections.shuffle(java.util.Arrays.asList(order), new Random(20260601));
    contexts = new Operands[spans];
    addresses = new long[spans];
    for (int i = 0; i < spans; i++) {
      // Spans two apart, so no two are adjacent and none covers another's operand.
      long base = BASE + order[i] * 2 * SPAN_BYTES;
      CacheableSpan span = CacheableSpan.of(base, SPAN_BYTES);
      contexts[i] =
          new Operands() {
            @Override
            public CacheableSpan cacheableSpan() {
              return span;
            }
          };
      addresses[i] = base + 4096;
    }
    for (int i = 0; i < spans; i++) {
      lease().release();
    }
  }

  /** Clears the domain. */
  @TearDown(Level.Trial)
  public void tearDown() {
    regions.close();
  }

  private Registration lease() {
    int at = next;
    next = at + 1 == addresses.length ? 0 : at + 1;
    return regions.lease(addresses[at], 4096, contexts[at]);
  }

  /**
   * A miss past the bound: evict the least recently used idle span, register and track the new one,
   * then release it (it stays cached, idle).
   *
   * @return the descriptor, so the JIT keeps the work
   */
  @Benchmark
  public long missPastTheBound() {
    Registration lease = lease();
    long descriptor = lease.descriptor();
    lease.release();
    return descriptor;
  }

  /**
   * A hit among {@code entries} cached spans: hits evict nothing, so the spans cached after set-up
   * (all but the first in the cycle, which the last one evicted) stay cached.
   *
   * @return the descriptor
   */
  @Benchmark
  public long hitAmongEntries() {
    int at = next;
    next = at + 1 >= addresses.length ? 1 : at + 1;
    if (at == 0) {
      at = 1;
    }
    Registration lease = regions.lease(addresses[at], 4096, contexts[at]);
    long descriptor = lease.descriptor();
    lease.release();
    return descriptor;
  }
}
