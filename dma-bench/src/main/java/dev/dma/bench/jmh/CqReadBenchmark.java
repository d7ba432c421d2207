package dev.dma.bench.jmh;

import dev.dma.api.DmaConfiguration;
import dev.dma.core.FabricProviders;
import dev.dma.spi.CompletionSink;
import dev.dma.spi.FabricEndpoint;
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
 * One FFM {@code fi_cq_read} on an empty completion queue, through the libfabric endpoint the
 * worker uses: {@code progress} is exactly one {@code fi_cq_read}; {@code reap} is the worker's
 * per-pass call (the same read plus the endpoint's bookkeeping). Compare with LIBFABRIC-FFM.md
 * section 12 (C: shm 12.5-18.8 ns, tcp;ofi_rxm 445-523 ns).
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(
    value = 1,
    jvmArgsAppend = {"-Xmx1g", "--enable-native-access=ALL-UNNAMED"})
public class CqReadBenchmark {
  /** A dma provider name. */
  @Param({"libfabric:shm", "tcp"})
  public String provider;

  private FabricEndpoint endpoint;
  private final CompletionSink sink =
      new CompletionSink() {
        @Override
        public void completed(int slot) {}

        @Override
        public void failed(int slot, int errno, int providerErrno, String message) {}
      };

  /** The benchmark's state, created by JMH. */
  public CqReadBenchmark() {}

  /** Opens one endpoint on loopback. */
  @Setup(Level.Trial)
  public void setUp() {
    DmaConfiguration configuration =
        DmaConfiguration.builder().providers(provider).bind("127.0.0.1").build();
    endpoint = FabricProviders.select(configuration).open(configuration);
    endpoint.openSlots(64);
  }

  /** Closes the endpoint. */
  @TearDown(Level.Trial)
  public void tearDown() {
    endpoint.close();
  }

  /** One {@code fi_cq_read} of an empty queue. */
  @Benchmark
  public void progress() {
    endpoint.progress();
  }

  /**
   * The worker's reap on an empty queue.
   *
   * @return completions delivered (0)
   */
  @Benchmark
  public int reap() {
    return endpoint.reap(sink, 16);
  }
}
