package dev.dma.bench.jmh;

import java.util.Arrays;
import java.util.Locale;

/**
 * The ratio {@link ManyClientsBenchmark} asks about, measured with less noise than separate JMH
 * forks give on a shared host: one JVM holds a service of each size at once and alternates between
 * them, so both see the same machine at nearly the same time. Prints, per size, the median
 * nanoseconds per transfer, and the median of the per-alternation ratios to the first size.
 *
 * <p>{@code java -cp dma-bench.jar dev.dma.bench.jmh.ManyClientsRatio [alternations] [sizes...]}
 * (defaults: 30 alternations of 1,000 and 100,000 clients). {@code -Dcarry=peer,id} (the default)
 * measures requests carrying their {@link dev.dma.api.Peer} and requests naming only the client id,
 * each size both ways, in the same alternation; {@code -Dcarry=peer} or {@code -Dcarry=id} one way.
 * {@code -Drequests=N} cycles through N request objects at every size (see {@link
 * ManyClientsBenchmark#requests}), {@code -Dbuild=each} builds each request as it is submitted and
 * {@code -Dorder=shuffled} visits the clients in a random order ({@link
 * ManyClientsBenchmark#build}, {@link ManyClientsBenchmark#order}).
 */
public final class ManyClientsRatio {
  private ManyClientsRatio() {}

  /**
   * Runs the alternation.
   *
   * @param args alternations, then client counts
   * @throws InterruptedException never in practice
   */
  public static void main(String[] args) throws InterruptedException {
    int alternations = args.length > 0 ? Integer.parseInt(args[0]) : 30;
    int[] perCarry =
        args.length > 1
            ? Arrays.stream(args, 1, args.length).mapToInt(Integer::parseInt).toArray()
            : new int[] {1_000, 100_000};
    String[] carries = System.getProperty("carry", "peer,id").split(",");
    int kinds = perCarry.length;
    int[] sizes = new int[kinds * carries.length];
    for (int i = 0; i < sizes.length; i++) {
      sizes[i] = perCarry[i % kinds];
    }
    ManyClientsBenchmark[] states = new ManyClientsBenchmark[sizes.length];
    for (int i = 0; i < sizes.length; i++) {
      states[i] = new ManyClientsBenchmark();
      states[i].clients = sizes[i];
      states[i].window = 64;
      states[i].carry = carries[i / kinds];
      states[i].requests = Integer.getInteger("requests", 0);
      states[i].build = System.getProperty("build", "once");
      states[i].order = System.getProperty("order", "sequential");
      states[i].setUp();
    }
    // Warm-up: every service long enough for the JIT to settle on the shared worker code.
    for (int w = 0; w < 5; w++) {
      for (ManyClientsBenchmark state : states) {
        state.transfers();
      }
    }
    double[][] nanos = new double[sizes.length][alternations];
    double[][] ratios = new double[sizes.length][alternations];
    for (int a = 0; a < alternations; a++) {
      for (int i = 0; i < sizes.length; i++) {
        long start = System.nanoTime();
        states[i].transfers();
        nanos[i][a] = (System.nanoTime() - start) / (double) ManyClientsBenchmark.TRANSFERS;
      }
      for (int i = 0; i < sizes.length; i++) {
        ratios[i][a] = nanos[i][a] / nanos[i - i % kinds][a];
      }
    }
    for (int i = 0; i < sizes.length; i++) {
      System.out.printf(
          Locale.ROOT,
          "carry %-4s clients %,7d: %6.1f ns/transfer (median of %d), ratio to %,d: %.2f"
              + " (quartiles %.2f-%.2f)%n",
          states[i].carry,
          sizes[i],
          median(nanos[i]),
          alternations,
          sizes[i - i % kinds],
          median(ratios[i]),
          quantile(ratios[i], 0.25),
          quantile(ratios[i], 0.75));
    }
    for (ManyClientsBenchmark state : states) {
      state.tearDown();
    }
  }

  private static double median(double[] values) {
    return quantile(values, 0.5);
  }

  private static double quantile(double[] values, double q) {
    double[] sorted = values.clone();
    Arrays.sort(sorted);
    return sorted[(int) Math.round(q * (sorted.length - 1))];
  }
}
