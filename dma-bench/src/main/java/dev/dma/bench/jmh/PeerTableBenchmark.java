package dev.dma.bench.jmh;

import dev.dma.core.internal.peers.PeerTable;
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
 * The peer table's per-post cost: {@link PeerTable#handle} for a client whose address is already in
 * the table, passed as the very array it was inserted from or as an equal copy (a request decoded
 * afresh). Run with {@code -prof gc} for bytes per op; the command is in dma-bench's pom.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Fork(value = 1, jvmArgsAppend = "-Xmx1g")
public class PeerTableBenchmark {
  /** Known clients, each with its own 32-byte (EFA-sized) address. */
  @Param({"1", "1024"})
  public int clients;

  private PeerTable table;
  private byte[][] inserted;
  private byte[][] copies;
  private int next;

  /** A table that one benchmark thread owns. */
  public PeerTableBenchmark() {}

  /** Inserts every client's address. */
  @Setup(Level.Trial)
  public void setUp() {
    table = new PeerTable(new NullEndpoint());
    inserted = new byte[clients][];
    copies = new byte[clients][];
    for (int i = 0; i < clients; i++) {
      byte[] address = new byte[32];
      for (int b = 0; b < 16; b++) {
        address[b] = (byte) 0xfe;
      }
      address[16] = (byte) i;
      address[17] = (byte) (i >>> 8);
      address[20] = (byte) 0x5a;
      inserted[i] = address;
      copies[i] = address.clone();
      table.handle(i, address, null);
    }
  }

  /** Releases every client. */
  @TearDown(Level.Trial)
  public void tearDown() {
    table.clear();
  }

  /**
   * The fast path with the stored array.
   *
   * @return the handle
   */
  @Benchmark
  public long sameArray() {
    int client = next++ % clients;
    return table.handle(client, inserted[client], null);
  }

  /**
   * The fast path with equal bytes in another array.
   *
   * @return the handle
   */
  @Benchmark
  public long equalBytes() {
    int client = next++ % clients;
    return table.handle(client, copies[client], null);
  }
}
