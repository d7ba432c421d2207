package dev.dma.bench.jmh;

import dev.dma.api.Checksums;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
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
 * CRC-32C throughput over native memory, as the checksum pool computes it for every checksummed
 * transfer: {@link Checksums#crc32c(MemorySegment)}. Bytes per second = size / score.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(value = 1, jvmArgsAppend = "-Xmx1g")
public class ChecksumBenchmark {
  /** Operand size in bytes. */
  @Param({"64", "4096", "65536", "1048576"})
  public int size;

  private Arena arena;
  private MemorySegment segment;

  /** The benchmark's state, created by JMH. */
  public ChecksumBenchmark() {}

  /** Fills a native segment with varied bytes. */
  @Setup(Level.Trial)
  public void setUp() {
    arena = Arena.ofShared();
    segment = arena.allocate(size, 4096);
    for (int i = 0; i < size; i++) {
      segment.set(ValueLayout.JAVA_BYTE, i, (byte) (i * 31 + 7));
    }
  }

  /** Frees the segment. */
  @TearDown(Level.Trial)
  public void tearDown() {
    arena.close();
  }

  /**
   * One CRC-32C over the whole segment.
   *
   * @return the checksum
   */
  @Benchmark
  public int crc32c() {
    return Checksums.crc32c(segment);
  }
}
