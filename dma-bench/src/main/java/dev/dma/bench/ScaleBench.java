package dev.dma.bench;

import dev.dma.api.DmaConfiguration;
import dev.dma.api.DmaException;
import dev.dma.api.Peer;
import dev.dma.core.FabricProviders;
import dev.dma.core.FabricService;
import dev.dma.core.MemoryRegion;
import dev.dma.spi.FabricProvider;
import java.io.PrintWriter;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;

/**
 * {@code dma-bench scale}: one {@link FabricService} (this process, the server) and N clients, each
 * a passive endpoint of its own, held by {@link ClientHosts} (child processes, or this one for the
 * fake). For each N of the list it adds the clients not yet there, then measures; with churn, it
 * keeps the first N under load while clients leave and join.
 *
 * <p>Threads: the calling thread controls the run; the churn thread (churn only) makes clients
 * leave and join; transfers complete and are resubmitted on the service's worker.
 */
final class ScaleBench {
  /**
   * How long a drain, a probe or a touch of every new client may take: past the default completion
   * deadline (30 s), which is what ends a transfer to a client that left abruptly on a provider
   * that never completes it (shm with the target's endpoint closed).
   */
  static final long DRAIN_NANOS = TimeUnit.SECONDS.toNanos(45);

  private ScaleBench() {}

  /**
   * What to run.
   *
   * @param provider the dma provider
   * @param bind the source address, or null
   * @param clients the N values, ascending
   * @param size bytes per transfer
   * @param window transfers in flight
   * @param write writes (else reads)
   * @param phase measured time per phase
   * @param warmup unmeasured time before each phase
   * @param rounds alternations of all-N and subset phases
   * @param subset the fixed subset's size
   * @param processes client processes; 0 keeps the clients in this process
   * @param firstSample clients whose first transfer is timed alone, per N
   * @param churn churn duration, or zero for the scale table
   * @param churnInterval time between one client leaving and the next
   * @param reuseIds whether a rejoining client keeps its id
   * @param gracefulLeave whether a leaving client follows the README's lifecycle (the server stops
   *     submitting, calls removePeer and waits for its transfers before the client closes) instead
   *     of closing with transfers in flight (a crash)
   * @param seed the churn's random seed
   * @param anchor the native anchor's binary ({@link ScaleAnchor}), run after dma's phases for each
   *     N, or null
   */
  record Options(
      String provider,
      String bind,
      List<Integer> clients,
      long size,
      int window,
      boolean write,
      Duration phase,
      Duration warmup,
      int rounds,
      int subset,
      int processes,
      int firstSample,
      Duration churn,
      Duration churnInterval,
      boolean reuseIds,
      boolean gracefulLeave,
      long seed,
      String anchor) {
    int maxClients() {
      return clients.getLast();
    }

    boolean churning() {
      return !churn.isZero();
    }
  }

  /**
   * One N's measurements.
   *
   * @param clients N
   * @param addPeerMeanNanos mean {@code addPeer} time of the clients added for this N
   * @param addPeerMaxNanos its maximum
   * @param firstP50Nanos median first-transfer latency over the sample
   * @param firstMaxNanos its maximum
   * @param allRate transfers per second over all N clients
   * @param subsetRate transfers per second over the first {@code subset} clients
   * @param p50Nanos median latency over all N
   * @param p99Nanos 99th percentile latency over all N
   * @param perClientMin fewest transfers a client got in the all-N phases
   * @param perClientMax most transfers a client got
   * @param heapBytesPerPeer server heap growth per peer since no peer
   * @param rssBytesPerPeer server resident memory growth per peer
   * @param fds server's open descriptors
   * @param clientStats the client processes' resident bytes, descriptors and fd limit, or empty
   * @param errors failed transfers
   * @param firstError the first failure, or empty
   * @param anchor what the native anchor measured against the same clients, or null without one
   */
  record Row(
      int clients,
      long addPeerMeanNanos,
      long addPeerMaxNanos,
      long firstP50Nanos,
      long firstMaxNanos,
      double allRate,
      double subsetRate,
      long p50Nanos,
      long p99Nanos,
      long perClientMin,
      long perClientMax,
      long heapBytesPerPeer,
      long rssBytesPerPeer,
      long fds,
      String clientStats,
      long errors,
      String firstError,
      ScaleAnchor.Result anchor) {
    double ratio() {
      return subsetRate <= 0 ? 0 : allRate / subsetRate;
    }
  }

  /**
   * What a run produced.
   *
   * @param fabric the libfabric provider
   * @param rows one per N reached
   * @param limit why the sweep stopped before the last N, or empty
   * @param churn the churn run's counters, or null
   * @param churnEvents clients that left and joined again
   * @param integrity every transfer's completion and bytes
   * @param closedPeers peers the service held when the table's run closed it (0 for the churn)
   * @param closeNanos how long that {@code close()} took
   */
  record Outcome(
      String fabric,
      List<Row> rows,
      String limit,
      ScaleLoop.Integrity churn,
      long churnEvents,
      ScaleLoop.Integrity integrity,
      int closedPeers,
      long closeNanos) {
    boolean failed() {
      if (churn != null) {
        return churn.liveFailures() > 0
            || churn.mismatches() > 0
            || churn.duplicates() > 0
            || churn.missing() > 0;
      }
      return integrity.liveFailures() > 0
          || integrity.duplicates() > 0
          || integrity.missing() > 0
          || integrity.mismatches() > 0;
    }
  }

  /**
   * Runs the table or the churn.
   *
   * @param options what to run
   * @param err where progress goes
   * @return what happened
   * @throws Exception when set-up fails
   */
  @SuppressWarnings("try") // the service is closed early, to time its close
  static Outcome run(Options options, PrintWriter err) throws Exception {
    int capacity = options.maxClients();
    boolean verify = options.churning();
    long windowBytes = verify ? options.size() * options.window() : options.size();
    // Verifying, every client has bytes of its own; otherwise all share one window, so the
    // target's memory stays in cache whatever N is and the table measures the fabric and dma.
    int windows = verify ? capacity : 1;
    DmaConfiguration configuration =
        Bench.configuration(options.provider(), options.bind(), options.window());
    FabricProvider provider = FabricProviders.select(configuration);
    try (Arena arena = Arena.ofShared();
        ClientHosts hosts =
            options.processes() == 0
                ? ClientHosts.inProcess(options.provider(), options.bind(), windowBytes, windows)
                : ClientHosts.children(
                    options.provider(),
                    options.bind(),
                    windowBytes,
                    windows,
                    options.processes())) {
      MemorySegment operands = arena.allocate((2L * options.window() + 2) * options.size(), 4096);
      ScaleLoop scale =
          new ScaleLoop(
              options.window(), operands, options.size(), options.write(), verify, capacity);
      try (FabricService<ScaleLoop.Slot> service =
              FabricService.<ScaleLoop.Slot>builder(configuration)
                  .provider(provider)
                  .completer(scale)
                  .start();
          MemoryRegion _ = service.register(operands)) {
        scale.bind(service);
        String fabric = hosts.fabric();
        // Per-peer costs are measured from here: the service, its buffers and the client hosts
        // are up, no peer is added yet.
        ProcessStats baseline = ProcessStats.now(true);
        err.printf(
            Locale.ROOT,
            "dma-bench scale: provider %s (%s), server pid %d, %s%n",
            options.provider(),
            fabric,
            ProcessHandle.current().pid(),
            options.processes() == 0
                ? "clients in this process"
                : options.processes() + " client process(es)");
        err.flush();
        if (options.churning()) {
          return churn(options, hosts, service, scale, fabric, err);
        }
        List<Row> rows = new ArrayList<>();
        String limit = "";
        int have = 0;
        String idle = hosts.stats();
        long clientBase = idle.isEmpty() ? 0 : Long.parseLong(idle.split(" ")[0]);
        for (int n : options.clients()) {
          String tooBig = predictMemory(hosts, clientBase, have, n, options.processes());
          if (!tooBig.isEmpty()) {
            limit = tooBig;
            err.println("dma-bench scale: stopped at " + have + " clients: " + limit);
            err.flush();
            break;
          }
          Added added = addClients(hosts, service, scale, have, n);
          have = added.reached;
          if (added.reached < n) {
            limit = added.why;
            err.println("dma-bench scale: stopped at " + added.reached + " clients: " + limit);
            err.flush();
            break;
          }
          rows.add(measure(options, hosts, scale, n, added, baseline, err));
        }
        scale.stopAndDrain(DRAIN_NANOS);
        // Closing with every peer still added and connected: what a server's shutdown costs at
        // this scale (the try's second close is a no-op).
        long closeStart = System.nanoTime();
        service.close();
        long closeNanos = System.nanoTime() - closeStart;
        return new Outcome(fabric, rows, limit, null, 0, scale.integrity(), have, closeNanos);
      }
    }
  }

  /**
   * Why growing from {@code have} to {@code n} clients would exhaust memory, or empty: the client
   * processes' resident memory per client so far (above {@code base}, theirs with no client), times
   * {@code n}, against a quarter of the RAM per process (tcp;ofi_rxm holds about 23 MB per
   * connected endpoint; 1,024 of them in one process once took 24 GB and the kernel's OOM killer
   * ended it).
   */
  private static String predictMemory(
      ClientHosts hosts, long base, int have, int n, int processes) {
    String stats = have == 0 ? "" : hosts.stats();
    if (stats.isEmpty() || processes == 0) {
      return "";
    }
    long rss = Math.max(0, Long.parseLong(stats.split(" ")[0]) - base);
    long predicted = (base + rss / have * n) / processes;
    long bound = physicalMemory() / 4;
    if (predicted <= bound) {
      return "";
    }
    return String.format(
        Locale.ROOT,
        "%,d clients would need about %,d MiB per client process (%,d KiB per client so far),"
            + " past a quarter of the RAM (%,d MiB); use more --processes on more memory",
        n,
        predicted >> 20,
        rss / have >> 10,
        bound >> 20);
  }

  static long physicalMemory() {
    if (java.lang.management.ManagementFactory.getOperatingSystemMXBean()
        instanceof com.sun.management.OperatingSystemMXBean os) {
      return os.getTotalMemorySize();
    }
    return 8L << 30;
  }

  /** Clients added for one N: how far it got, and the {@code addPeer} times. */
  private record Added(int reached, String why, long meanNanos, long maxNanos, int from) {}

  private static Added addClients(
      ClientHosts hosts, FabricService<ScaleLoop.Slot> service, ScaleLoop scale, int have, int n) {
    List<ClientHosts.Joined> joined = hosts.add(have, n - have);
    long total = 0;
    long max = 0;
    int reached = have;
    for (int i = 0; i < joined.size(); i++) {
      ClientHosts.Joined one = joined.get(i);
      int index = have + i;
      if (one.advertisement() == null) {
        return new Added(
            reached, "client " + index + " could not open: " + one.error(), 0, 0, have);
      }
      long id = index + 1;
      long start = System.nanoTime();
      Peer peer;
      try {
        peer = service.addPeer(id, one.advertisement().address());
      } catch (DmaException e) {
        return new Added(
            reached, "addPeer of client " + (index + 1) + ": " + e.getMessage(), 0, 0, have);
      }
      long took = System.nanoTime() - start;
      total += took;
      max = Math.max(max, took);
      scale.join(index, one.advertisement(), peer);
      reached++;
    }
    int added = reached - have;
    return new Added(reached, "", added == 0 ? 0 : total / added, max, have);
  }

  private static Row measure(
      Options options,
      ClientHosts hosts,
      ScaleLoop scale,
      int n,
      Added added,
      ProcessStats baseline,
      PrintWriter err)
      throws InterruptedException {
    hosts.load(true);
    try {
      // First transfers: a sample of new clients one at a time, then one to every other new client.
      long[] first = new long[Math.min(options.firstSample(), n - added.from)];
      String error = "";
      long errors = 0;
      for (int i = 0; i < first.length; i++) {
        long took = scale.probe(added.from + i, DRAIN_NANOS);
        if (took < 0) {
          errors++;
          error = error.isEmpty() ? scale.probeError() : error;
        }
        first[i] = Math.max(0, took);
      }
      Arrays.sort(first);
      if (!scale.touchOnce(added.from + first.length, n, DRAIN_NANOS)) {
        error = error.isEmpty() ? "touching every new client did not finish in 30 s" : error;
      }
      double allTransfers = 0;
      double allSeconds = 0;
      double subsetTransfers = 0;
      double subsetSeconds = 0;
      LatencyHistogram latencies = new LatencyHistogram();
      long[] perClient = new long[n];
      for (int round = 0; round < options.rounds(); round++) {
        for (boolean all : new boolean[] {true, false}) {
          scale.start(all ? Integer.MAX_VALUE : options.subset());
          TimeUnit.NANOSECONDS.sleep(options.warmup().toNanos());
          scale.beginMeasure();
          TimeUnit.NANOSECONDS.sleep(options.phase().toNanos());
          ScaleLoop.Phase phase = scale.endMeasure(all);
          if (!scale.stopAndDrain(DRAIN_NANOS)) {
            error = error.isEmpty() ? "transfers did not drain within 45 s" : error;
          }
          errors += phase.failed();
          if (all) {
            allTransfers += phase.completed();
            allSeconds += phase.seconds();
            latencies.add(phase.latencies());
            for (int c = 0; c < n; c++) {
              perClient[c] += phase.perClient()[c];
            }
          } else {
            subsetTransfers += phase.completed();
            subsetSeconds += phase.seconds();
          }
        }
      }
      ScaleLoop.Integrity integrity = scale.integrity();
      if (error.isEmpty() && !integrity.firstLiveError().isEmpty()) {
        error = integrity.firstLiveError();
      }
      long min = Long.MAX_VALUE;
      long max = 0;
      for (long count : perClient) {
        min = Math.min(min, count);
        max = Math.max(max, count);
      }
      // dma's service is idle now (drained); the clients stay loaded for the native server.
      ScaleAnchor.Result anchor =
          options.anchor() == null
              ? null
              : ScaleAnchor.run(options, hosts.fabric(), scale.advertisements(n), err);
      hosts.load(false);
      ProcessStats now = ProcessStats.now(true);
      Row row =
          new Row(
              n,
              added.meanNanos,
              added.maxNanos,
              first.length == 0 ? 0 : first[(first.length - 1) / 2],
              first.length == 0 ? 0 : first[first.length - 1],
              allSeconds == 0 ? 0 : allTransfers / allSeconds,
              subsetSeconds == 0 ? 0 : subsetTransfers / subsetSeconds,
              latencies.percentile(50),
              latencies.percentile(99),
              min,
              max,
              (now.heapBytes() - baseline.heapBytes()) / n,
              (now.rssBytes() - baseline.rssBytes()) / n,
              now.fds(),
              hosts.stats(),
              errors,
              error,
              anchor);
      err.printf(
          Locale.ROOT,
          "dma-bench scale: %,d clients: %,.0f transfers/s over all, %,.0f over %d (ratio %.2f),"
              + " errors %d%n",
          n,
          row.allRate(),
          row.subsetRate(),
          options.subset(),
          row.ratio(),
          errors);
      if (anchor != null) {
        err.printf(
            Locale.ROOT,
            "dma-bench scale: %,d clients, native anchor: %,.0f transfers/s over all, %,.0f over %d"
                + " (ratio %.2f), errors %d%s%n",
            n,
            anchor.allRate(),
            anchor.subsetRate(),
            options.subset(),
            anchor.ratio(),
            anchor.errors(),
            anchor.error().isEmpty() ? "" : ", " + anchor.error());
      }
      err.flush();
      return row;
    } finally {
      hosts.load(false);
    }
  }

  /** The anchor's three cells (with their leading space), or empty without {@code --anchor}. */
  static String anchorColumns(Options options, Row r) {
    if (options.anchor() == null) {
      return "";
    }
    ScaleAnchor.Result a = r.anchor();
    if (a == null || !a.error().isEmpty()) {
      return " - | - | - |";
    }
    return String.format(
        Locale.ROOT, " %,.0f | %,.0f | %.2f |", a.allRate(), a.subsetRate(), a.ratio());
  }

  private static Outcome churn(
      Options options,
      ClientHosts hosts,
      FabricService<ScaleLoop.Slot> service,
      ScaleLoop scale,
      String fabric,
      PrintWriter err)
      throws InterruptedException {
    int n = options.clients().getFirst();
    Added added = addClients(hosts, service, scale, 0, n);
    if (added.reached < n) {
      throw new IllegalStateException("churn needs " + n + " clients: " + added.why);
    }
    hosts.load(true);
    long events = 0;
    try {
      // Every client once before the churn starts, so first connections are not churn.
      scale.touchOnce(0, n, DRAIN_NANOS);
      scale.start(Integer.MAX_VALUE);
      SplittableRandom random = new SplittableRandom(options.seed());
      long nextId = n + 1;
      long end = System.nanoTime() + options.churn().toNanos();
      while (System.nanoTime() < end) {
        TimeUnit.NANOSECONDS.sleep(options.churnInterval().toNanos());
        int index = random.nextInt(n);
        scale.leave(index);
        if (options.gracefulLeave()) {
          // The client's goodbye: the server stops submitting for it (leave), removes it, and
          // lets the transfers it has finish before the client closes its endpoint.
          service.removePeer(scale.id(index));
          if (!scale.awaitQuiet(index, DRAIN_NANOS)) {
            err.println("dma-bench scale: client " + index + " still had transfers after 30 s");
          }
          hosts.remove(index);
        } else {
          // The client goes away with transfers in flight, then the server learns of it.
          hosts.remove(index);
          service.removePeer(scale.id(index));
        }
        ClientHosts.Joined joined = hosts.add(index, 1).getFirst();
        if (joined.advertisement() == null) {
          throw new IllegalStateException(
              "client " + index + " could not rejoin: " + joined.error());
        }
        long id = options.reuseIds() ? scale.id(index) : nextId++;
        Peer peer = service.addPeer(id, joined.advertisement().address());
        scale.join(index, joined.advertisement(), peer);
        events++;
      }
      if (!scale.stopAndDrain(DRAIN_NANOS)) {
        err.println("dma-bench scale: transfers did not drain within 45 s after the churn");
      }
    } finally {
      hosts.load(false);
    }
    ScaleLoop.Integrity integrity = scale.integrity();
    return new Outcome(fabric, List.of(), "", integrity, events, integrity, 0, 0);
  }

  private static String text(Duration duration) {
    long millis = duration.toMillis();
    return millis % 1000 == 0 ? millis / 1000 + " s" : millis + " ms";
  }

  /**
   * Prints the table (or the churn's counters).
   *
   * @param options what ran
   * @param outcome what it gave
   * @param out where the table goes
   */
  static void print(Options options, Outcome outcome, PrintWriter out) {
    if (outcome.churn() != null) {
      ScaleLoop.Integrity c = outcome.churn();
      out.printf(
          Locale.ROOT,
          "churn: provider %s (%s), %d clients, %s, one leaves and rejoins every %s (%s ids, %s"
              + " leave), %d left and rejoined%n",
          options.provider(),
          outcome.fabric(),
          options.clients().getFirst(),
          text(options.churn()),
          text(options.churnInterval()),
          options.reuseIds() ? "reused" : "new",
          options.gracefulLeave() ? "graceful" : "abrupt",
          outcome.churnEvents());
      out.printf(
          Locale.ROOT,
          "transfers: %,d submitted, %,d completions, %d duplicate, %d missing, %d bytes wrong%n",
          c.submitted(),
          c.completions(),
          c.duplicates(),
          c.missing(),
          c.mismatches());
      out.printf(
          Locale.ROOT,
          "failures on live clients: %,d%s%n",
          c.liveFailures(),
          c.firstLiveError().isEmpty() ? "" : " (first: " + c.firstLiveError() + ")");
      out.printf(
          Locale.ROOT,
          "failures on leaving clients: %,d%s%n",
          c.leavingFailures(),
          c.firstLeavingError().isEmpty() ? "" : " (first: " + c.firstLeavingError() + ")");
      out.flush();
      return;
    }
    out.printf(
        Locale.ROOT,
        "scale: provider %s (%s), %s %s, window %d, %d x (%s all + %s first %d)%n",
        options.provider(),
        outcome.fabric(),
        options.write() ? "write" : "read",
        Sizes.format(options.size()),
        options.window(),
        options.rounds(),
        text(options.phase()),
        text(options.phase()),
        options.subset());
    out.println(
        "| clients | addPeer us mean/max | first transfer ms p50/max | transfers/s all"
            + " | transfers/s first "
            + options.subset()
            + " | all/"
            + options.subset()
            + " | p50/p99 us | per client min/max | heap B/peer | RSS KB/peer | server fds"
            + " | client RSS MB / fds | errors |"
            + (options.anchor() == null
                ? ""
                : " anchor transfers/s all | anchor first "
                    + options.subset()
                    + " | anchor all/"
                    + options.subset()
                    + " |"));
    out.println(
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
            + (options.anchor() == null ? "" : "---:|---:|---:|"));
    for (Row r : outcome.rows()) {
      String clients = "";
      if (!r.clientStats().isEmpty()) {
        String[] w = r.clientStats().split(" ");
        clients = String.format(Locale.ROOT, "%.0f / %s", Long.parseLong(w[0]) / 1e6, w[1]);
      }
      out.printf(
          Locale.ROOT,
          "| %,d | %.0f / %.0f | %.2f / %.2f | %,.0f | %,.0f | %.2f | %.0f / %.0f | %d / %d | %d |"
              + " %.1f | %d | %s | %d |%s%n",
          r.clients(),
          r.addPeerMeanNanos() / 1e3,
          r.addPeerMaxNanos() / 1e3,
          r.firstP50Nanos() / 1e6,
          r.firstMaxNanos() / 1e6,
          r.allRate(),
          r.subsetRate(),
          r.ratio(),
          r.p50Nanos() / 1e3,
          r.p99Nanos() / 1e3,
          r.perClientMin(),
          r.perClientMax(),
          r.heapBytesPerPeer(),
          r.rssBytesPerPeer() / 1e3,
          r.fds(),
          clients,
          r.errors(),
          anchorColumns(options, r));
    }
    for (Row r : outcome.rows()) {
      if (!r.firstError().isEmpty()) {
        out.println(r.clients() + " clients, first error: " + r.firstError());
      }
      if (r.anchor() != null && !r.anchor().error().isEmpty()) {
        out.println(r.clients() + " clients, native anchor: " + r.anchor().error());
      } else if (r.anchor() != null && r.anchor().errors() > 0) {
        out.println(
            r.clients()
                + " clients, native anchor: "
                + r.anchor().errors()
                + " failed writes (its messages went to standard error)");
      }
    }
    if (!outcome.limit().isEmpty()) {
      out.println("stopped: " + outcome.limit());
    }
    if (outcome.closedPeers() > 0) {
      out.printf(
          Locale.ROOT,
          "close: %,d peers in %,.0f ms (%.1f us a peer)%n",
          outcome.closedPeers(),
          outcome.closeNanos() / 1e6,
          outcome.closeNanos() / 1e3 / outcome.closedPeers());
    }
    out.flush();
  }
}
