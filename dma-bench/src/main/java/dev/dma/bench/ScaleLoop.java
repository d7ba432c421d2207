package dev.dma.bench;

import dev.dma.api.Advertisement;
import dev.dma.api.BatchCompleter;
import dev.dma.api.Checksum;
import dev.dma.api.Completion;
import dev.dma.api.Direction;
import dev.dma.api.Operands;
import dev.dma.api.Peer;
import dev.dma.api.TransferRequest;
import dev.dma.core.FabricService;
import java.lang.foreign.MemorySegment;
import java.util.Arrays;
import java.util.List;

/**
 * {@code dma-bench scale}'s closed loop over many clients: {@code window} slots, each resubmitted
 * from the completer (on the worker) to the next live client in turn, among all of them or among
 * the first {@code limit}. Unlike {@link ClosedLoop}, which keeps each slot on one target, the
 * client changes with every transfer, so each submit builds its {@link TransferRequest} (one small
 * object per transfer, for the benchmark only).
 *
 * <p>It also checks what the benchmark promises: every submitted transfer gets exactly one
 * completion (a second one is counted as a duplicate, a slot still in flight after the drain as
 * missing), and with {@code verify} every slot writes a fresh pattern into its own bytes of the
 * client's window and reads it back, comparing. A failure is charged to a live client, or to a
 * leaving one when the client it was sent to started leaving before the failure came back (churn).
 *
 * <p>Threads: the completer runs on the fabric worker; the controller and the churn thread call the
 * rest. All state is guarded by this object's monitor (one uncontended lock per batch).
 */
final class ScaleLoop implements BatchCompleter<ScaleLoop.Slot> {

  /** One outstanding transfer's context. */
  static final class Slot implements Operands {
    final int index;
    final MemorySegment source;
    final MemorySegment landing;
    int client = -1;
    int incarnation;
    boolean reading;
    boolean inFlight;
    boolean idle = true;
    long submitNanos;
    byte pattern;

    Slot(int index, MemorySegment source, MemorySegment landing) {
      this.index = index;
      this.source = source;
      this.landing = landing;
    }

    @Override
    public MemorySegment source() {
      return source;
    }

    @Override
    public MemorySegment allocate(long lengthBytes) {
      return landing;
    }
  }

  /**
   * What one measured interval saw.
   *
   * @param completed successful transfers
   * @param failed failed transfers
   * @param seconds the interval
   * @param latencies submit-to-completion of the successful ones
   * @param perClient successful transfers per client index, or null
   */
  record Phase(
      long completed, long failed, double seconds, LatencyHistogram latencies, long[] perClient) {
    double rate() {
      return seconds <= 0 ? 0 : completed / seconds;
    }
  }

  /**
   * The run's integrity counters.
   *
   * @param submitted transfers submitted
   * @param completions completions received
   * @param duplicates completions for a transfer that had completed already
   * @param missing transfers still without a completion after the final drain
   * @param liveFailures failures of transfers to clients that were not leaving
   * @param leavingFailures failures of transfers to clients that had started leaving
   * @param mismatches reads back that did not return what was written
   * @param firstLiveError the first live failure's message, or empty
   * @param firstLeavingError the first leaving failure's message, or empty
   */
  record Integrity(
      long submitted,
      long completions,
      long duplicates,
      long missing,
      long liveFailures,
      long leavingFailures,
      long mismatches,
      String firstLiveError,
      String firstLeavingError) {}

  private final Slot[] slots;
  private final long size;
  private final boolean verify;
  private final Direction direction;
  private final Direction read;
  private FabricService<Slot> service;

  // Clients, by index. Guarded by this.
  private Advertisement[] ads;
  private Peer[] peers;
  private int[] incarnations;
  private boolean[] leaving;
  private int[] live;
  private int[] livePosition;
  private int liveCount;

  // Picking. Guarded by this.
  private int limit = Integer.MAX_VALUE;
  private long next;
  private int onceCursor = -1;
  private int onceEnd;

  // Counters. Guarded by this.
  private boolean stopping = true;
  private boolean measuring;
  private long measureStart;
  private long completed;
  private long failed;
  private long[] perClient;
  private final LatencyHistogram histogram = new LatencyHistogram();
  private long outstanding;
  private long submitted;
  private long completions;
  private long duplicates;
  private long liveFailures;
  private long leavingFailures;
  private long mismatches;
  private String firstLiveError;
  private String firstLeavingError;

  // The probe: one transfer at a time, for first-transfer latency.
  private final Slot probe;
  private long probeNanos;
  private String probeError;

  /**
   * A loop.
   *
   * @param window slots
   * @param operands a registered buffer of at least {@code (2 * window + 2) * size} bytes
   * @param size bytes per transfer
   * @param write writes, or reads
   * @param verify write a pattern, read it back and compare (each slot in its own bytes of a
   *     client's window, which must then be {@code window * size} bytes)
   * @param capacity the most clients
   */
  ScaleLoop(
      int window, MemorySegment operands, long size, boolean write, boolean verify, int capacity) {
    this.size = size;
    this.verify = verify;
    this.direction = write || verify ? Direction.TO_PEER : Direction.fromPeer(size);
    this.read = Direction.fromPeer(size);
    slots = new Slot[window];
    for (int i = 0; i < window; i++) {
      slots[i] =
          new Slot(
              i,
              operands.asSlice(2L * i * size, size),
              operands.asSlice((2L * i + 1) * size, size));
    }
    probe =
        new Slot(
            -1,
            operands.asSlice(2L * window * size, size),
            operands.asSlice((2L * window + 1) * size, size));
    ads = new Advertisement[capacity];
    peers = new Peer[capacity];
    incarnations = new int[capacity];
    leaving = new boolean[capacity];
    live = new int[capacity];
    livePosition = new int[capacity];
    Arrays.fill(livePosition, -1);
    perClient = new long[capacity];
  }

  /** Names the service (it needs this completer before it starts). */
  synchronized void bind(FabricService<Slot> value) {
    this.service = value;
  }

  /**
   * Adds or re-adds client {@code index} as live, with its (new) advertisement and the peer {@code
   * addPeer} returned for it, which its requests carry (its id is the peer's).
   */
  synchronized void join(int index, Advertisement ad, Peer peer) {
    ads[index] = ad;
    peers[index] = peer;
    incarnations[index]++;
    leaving[index] = false;
    if (livePosition[index] < 0) {
      livePosition[index] = liveCount;
      live[liveCount++] = index;
    }
  }

  /**
   * Marks client {@code index} leaving: no new transfer goes to it, and failures of those in flight
   * are charged to leaving clients.
   */
  synchronized void leave(int index) {
    leaving[index] = true;
    int position = livePosition[index];
    if (position >= 0) {
      int last = live[--liveCount];
      live[position] = last;
      livePosition[last] = position;
      livePosition[index] = -1;
    }
  }

  /**
   * Waits until no transfer to client {@code index} is in flight (after {@link #leave}, none is
   * sent to it any more).
   *
   * @return false when some still were after {@code timeoutNanos}
   */
  synchronized boolean awaitQuiet(int index, long timeoutNanos) throws InterruptedException {
    long deadline = System.nanoTime() + timeoutNanos;
    while (inFlightTo(index)) {
      long left = deadline - System.nanoTime();
      if (left <= 0) {
        return false;
      }
      wait(Math.max(1, left / 1_000_000));
    }
    return true;
  }

  private boolean inFlightTo(int index) {
    if (probe.inFlight && probe.client == index) {
      return true;
    }
    for (Slot slot : slots) {
      if (slot.inFlight && slot.client == index) {
        return true;
      }
    }
    return false;
  }

  /**
   * The advertisements of clients {@code 0 .. n - 1} (for {@link ScaleAnchor}).
   *
   * @param n how many
   * @return them, in order
   */
  synchronized List<Advertisement> advertisements(int n) {
    return List.of(Arrays.copyOf(ads, n));
  }

  /** Clients live now. */
  synchronized int liveCount() {
    return liveCount;
  }

  /** Client {@code index}'s id now. */
  synchronized long id(int index) {
    return peers[index].clientId();
  }

  /**
   * Sends one transfer to client {@code index} and waits for its completion.
   *
   * @return the latency in nanoseconds, or -1 with {@link #probeError()} set
   */
  synchronized long probe(int index, long timeoutNanos) throws InterruptedException {
    probeNanos = 0;
    probeError = null;
    probe.client = index;
    probe.incarnation = incarnations[index];
    probe.reading = false;
    probe.inFlight = true;
    probe.submitNanos = System.nanoTime();
    outstanding++;
    submitted++;
    if (!service.submit(request(probe, index, direction))) {
      probe.inFlight = false;
      outstanding--;
      probeError = "the fabric worker is gone";
      return -1;
    }
    long deadline = System.nanoTime() + timeoutNanos;
    while (probe.inFlight) {
      long left = deadline - System.nanoTime();
      if (left <= 0) {
        probeError = "no completion within " + timeoutNanos / 1_000_000 + " ms";
        return -1;
      }
      wait(Math.max(1, left / 1_000_000));
    }
    return probeError == null ? probeNanos : -1;
  }

  /** Why the last probe failed. */
  synchronized String probeError() {
    return probeError;
  }

  /**
   * Sends one transfer to each client {@code from .. to - 1}, {@code window} at a time, and waits
   * for them all.
   *
   * @return whether all completed within the timeout
   */
  synchronized boolean touchOnce(int from, int to, long timeoutNanos) throws InterruptedException {
    onceCursor = from;
    onceEnd = to;
    boolean started = start(Integer.MAX_VALUE);
    boolean drained = started && awaitDrained(timeoutNanos);
    onceCursor = -1;
    return drained;
  }

  /**
   * Starts (or restarts) every idle slot, picking among the first {@code limit} live clients.
   *
   * @return false when there is no live client
   */
  synchronized boolean start(int limit) {
    this.limit = limit;
    stopping = false;
    for (Slot slot : slots) {
      if (slot.idle) {
        submitNext(slot, System.nanoTime());
      }
    }
    return true;
  }

  /** Counts from now on. */
  synchronized void beginMeasure() {
    histogram.reset();
    Arrays.fill(perClient, 0);
    completed = 0;
    failed = 0;
    measuring = true;
    measureStart = System.nanoTime();
  }

  /** Ends the measured interval and returns it. */
  synchronized Phase endMeasure(boolean withPerClient) {
    measuring = false;
    LatencyHistogram copy = new LatencyHistogram();
    copy.add(histogram);
    double seconds = (System.nanoTime() - measureStart) / 1e9;
    return new Phase(completed, failed, seconds, copy, withPerClient ? perClient.clone() : null);
  }

  /** Stops resubmitting and waits until nothing is outstanding. */
  synchronized boolean stopAndDrain(long timeoutNanos) throws InterruptedException {
    stopping = true;
    return awaitDrained(timeoutNanos);
  }

  private boolean awaitDrained(long timeoutNanos) throws InterruptedException {
    long deadline = System.nanoTime() + timeoutNanos;
    while (outstanding > 0) {
      long left = deadline - System.nanoTime();
      if (left <= 0) {
        return false;
      }
      wait(Math.max(1, left / 1_000_000));
    }
    return true;
  }

  /** The integrity counters; {@code missing} counts slots in flight now. */
  synchronized Integrity integrity() {
    long missing = probe.inFlight ? 1 : 0;
    for (Slot slot : slots) {
      if (slot.inFlight) {
        missing++;
      }
    }
    return new Integrity(
        submitted,
        completions,
        duplicates,
        missing,
        liveFailures,
        leavingFailures,
        mismatches,
        firstLiveError == null ? "" : firstLiveError,
        firstLeavingError == null ? "" : firstLeavingError);
  }

  @Override
  public synchronized void complete(List<Completion<Slot>> batch) {
    long now = System.nanoTime();
    for (int i = 0, n = batch.size(); i < n; i++) {
      Completion<Slot> completion = batch.get(i);
      Slot slot = completion.context();
      if (!slot.inFlight) {
        duplicates++;
        continue;
      }
      slot.inFlight = false;
      outstanding--;
      completions++;
      boolean ok = completion.outcome().isDone();
      int client = slot.client;
      boolean stale = leaving[client] || incarnations[client] != slot.incarnation;
      if (ok) {
        if (slot.reading && slot.landing.mismatch(slot.source) != -1) {
          mismatches++;
        }
      } else {
        String message = completion.outcome().error().getMessage();
        if (stale) {
          leavingFailures++;
          if (firstLeavingError == null) {
            firstLeavingError = message;
          }
        } else {
          liveFailures++;
          if (firstLiveError == null) {
            firstLiveError = message;
          }
        }
      }
      if (slot == probe) {
        probeNanos = now - slot.submitNanos;
        probeError = ok ? null : completion.outcome().error().getMessage();
        continue;
      }
      if (measuring) {
        if (ok) {
          completed++;
          perClient[client]++;
          histogram.record(now - slot.submitNanos);
        } else {
          failed++;
        }
      }
      if (stopping) {
        slot.idle = true;
      } else if (verify && ok && !slot.reading && !stale) {
        slot.reading = true;
        slot.inFlight = true;
        slot.submitNanos = now;
        outstanding++;
        submitted++;
        submitOrGiveUp(slot, request(slot, client, read));
      } else {
        submitNext(slot, now);
      }
    }
    notifyAll();
  }

  /** Sends the slot's next transfer to the next client, or leaves it idle when there is none. */
  private void submitNext(Slot slot, long now) {
    int client;
    if (onceCursor >= 0) {
      if (onceCursor >= onceEnd) {
        slot.idle = true;
        return;
      }
      client = onceCursor++;
    } else {
      int among = Math.min(limit, liveCount);
      if (among == 0) {
        slot.idle = true;
        return;
      }
      client = live[(int) (next++ % among)];
    }
    slot.idle = false;
    slot.client = client;
    slot.incarnation = incarnations[client];
    slot.reading = false;
    if (verify) {
      slot.pattern++;
      slot.source.fill(slot.pattern);
    }
    slot.inFlight = true;
    slot.submitNanos = now;
    outstanding++;
    submitted++;
    submitOrGiveUp(slot, request(slot, client, direction));
  }

  private void submitOrGiveUp(Slot slot, TransferRequest<Slot> request) {
    if (!service.submit(request)) {
      // The worker is gone: nothing will complete.
      slot.inFlight = false;
      slot.idle = true;
      outstanding--;
      stopping = true;
      if (firstLiveError == null) {
        firstLiveError = "the fabric worker is gone";
      }
      liveFailures++;
    }
  }

  private TransferRequest<Slot> request(Slot slot, int client, Direction dir) {
    Advertisement ad = ads[client];
    long offset = verify && slot.index >= 0 ? slot.index * size : 0;
    return new TransferRequest<>(
        peers[client].clientId(),
        ad.address(),
        ad.remoteKey(),
        ad.remoteAddress() + offset,
        dir,
        Checksum.NONE,
        slot,
        ad.remoteAddress(),
        ad.lengthBytes(),
        false,
        peers[client]);
  }
}
