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
 * The checksum of a striped transfer, two ways: hash the whole operand once after every chunk has
 * landed ({@link #wholeOnce}), or hash each chunk where it completes and combine the chunks'
 * CRC-32Cs ({@link #chunksThenCombine}, all of it on one thread; {@link #combineOnly}, what is left
 * once the chunks were hashed in parallel). {@link dev.dma.core.FabricServiceGroup} combines.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(value = 1, jvmArgsAppend = "-Xmx1g")
public class StripeChecksumBenchmark {
  /** Operand size in bytes. */
  @Param({"1048576", "16777216"})
  public int size;

  /** Chunks (devices). */
  @Param({"2", "4"})
  public int chunks;

  private Arena arena;
  private MemorySegment segment;
  private MemorySegment[] slices;
  private int[] crcs;

  /** The benchmark's state, created by JMH. */
  public StripeChecksumBenchmark() {}

  /** Fills a native segment and cuts it as the group does (even chunks, the last may be short). */
  @Setup(Level.Trial)
  public void setUp() {
    arena = Arena.ofShared();
    segment = arena.allocate(size, 4096);
    for (int i = 0; i < size; i++) {
      segment.set(ValueLayout.JAVA_BYTE, i, (byte) (i * 31 + 7));
    }
    long chunk = (size + chunks - 1) / chunks;
    slices = new MemorySegment[chunks];
    crcs = new int[chunks];
    for (int i = 0; i < chunks; i++) {
      long offset = i * chunk;
      slices[i] = segment.asSlice(offset, Math.min(chunk, size - offset));
      crcs[i] = Checksums.crc32c(slices[i]);
    }
  }

  /** Frees the segment. */
  @TearDown(Level.Trial)
  public void tearDown() {
    arena.close();
  }

  /**
   * One CRC-32C over the whole operand.
   *
   * @return the checksum
   */
  @Benchmark
  public int wholeOnce() {
    return Checksums.crc32c(segment);
  }

  /**
   * Every chunk hashed, then combined, on one thread.
   *
   * @return the checksum
   */
  @Benchmark
  public int chunksThenCombine() {
    int crc = Checksums.crc32c(slices[0]);
    for (int i = 1; i < chunks; i++) {
      crc = Checksums.crc32cCombine(crc, Checksums.crc32c(slices[i]), slices[i].byteSize());
    }
    return crc;
  }

  /**
   * Only the combining of chunk CRCs already computed.
   *
   * @return the checksum
   */
  @Benchmark
  public int combineOnly() {
    int crc = crcs[0];
    for (int i = 1; i < chunks; i++) {
      crc = Checksums.crc32cCombine(crc, crcs[i], slices[i].byteSize());
    }
    return crc;
  }
}
