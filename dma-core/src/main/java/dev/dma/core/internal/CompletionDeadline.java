package dev.dma.core.internal;

import java.time.Duration;

/**
 * The completion deadline's clock and bookkeeping for one worker: when to scan the posted ops,
 * whether one has passed the deadline, how many such expired ops still sit in a slot, and when the
 * worker must give up waiting for their flush and reset the endpoint. What to do with an expired op
 * (mark its client dead, release its peer, reset) is {@link DeadlineScan}' and {@link Resets}'; the
 * failure it ends with is {@link Failures#completionDeadline}.
 *
 * <p>Times are the worker's coarse clock ({@code now}, in nanoseconds of its ticker). Threads: the
 * worker thread only.
 */
final class CompletionDeadline {
  /**
   * How long the worker waits, on a provider whose removal flushes ({@link
   * dev.dma.spi.FabricEndpoint.Capability#REMOVAL_FLUSHES}), for the flushed completions of expired
   * operations before it resets the endpoint anyway.
   */
  static final long FLUSH_GRACE_NS = 1_000_000_000L;

  /**
   * How long an op posted to a client that left (removePeer, or a new address since) may go without
   * a completion before it is judged stuck, on a provider that does not flush a removed peer's ops:
   * a live peer answers within microseconds, and on an endpoint that completes in post order every
   * later completion, every client's, waits behind it.
   */
  static final long LEFT_GRACE_NS = 1_000_000_000L;

  private final long deadlineNs;
  private final long leftGraceNs;
  private final String text;
  private final String leftText;
  // How often in-flight ops are checked against the completion deadline: often enough that one
  // fails within a few percent of its deadline, rarely enough that the scan of the slots costs
  // nothing per transfer.
  private final long scanIntervalNs;
  private long nextScanNs;
  // Ops that passed the completion deadline and are still in a slot: waiting for their flushed
  // completion (removalFlushes) or for the endpoint reset that discards them.
  private int expiredInFlight;
  // When the flush grace of the expired ops still in flight ends; armed by the first of them, and
  // never pushed back by later ones, so a steady trickle of expiring ops cannot postpone the reset
  // for ever.
  private long flushDeadlineNs;
  private boolean flushArmed;

  /**
   * The bookkeeping for one deadline.
   *
   * @param deadline how long one posted op may wait for its completion, or zero for no bound
   */
  CompletionDeadline(Duration deadline) {
    this.deadlineNs = deadline.toNanos();
    this.text =
        "no completion within the completion deadline of " + DurationFormat.format(deadline);
    this.scanIntervalNs = Math.max(1_000_000L, Math.min(deadlineNs / 16, 100_000_000L));
    this.leftGraceNs = deadlineNs > 0 ? Math.min(deadlineNs, LEFT_GRACE_NS) : LEFT_GRACE_NS;
    this.leftText =
        "no completion within "
            + DurationFormat.format(Duration.ofNanos(leftGraceNs))
            + " after the client left (removePeer or a new address) with it posted";
  }

  /** The deadline in words, the reason a client is marked dead for it. */
  String text() {
    return text;
  }

  /**
   * Whether the posted ops are due for a scan this pass: a deadline is set, something is in flight,
   * and the scan interval has passed. Read every pass, so kept small enough for the JIT to inline.
   */
  boolean scanDue(long now, int inFlight) {
    return deadlineNs > 0 && inFlight > 0 && now - nextScanNs >= 0;
  }

  /** Schedules the next scan an interval after this one. */
  void scanned(long now) {
    nextScanNs = now + scanIntervalNs;
  }

  /** Whether an op posted no later than {@code postedByNs} has passed the deadline. */
  boolean passed(long now, long postedByNs) {
    return now - postedByNs >= deadlineNs;
  }

  /**
   * Whether an op posted no later than {@code postedByNs} to a client that has left has waited long
   * enough to be judged stuck ({@link #LEFT_GRACE_NS}, or the deadline if shorter).
   */
  boolean leftBehind(long now, long postedByNs) {
    return now - postedByNs >= leftGraceNs;
  }

  /** Why an op was judged {@link #leftBehind}, in words. */
  String leftText() {
    return leftText;
  }

  /** Counts an op the scan just found past the deadline, still in its slot. */
  void expired() {
    expiredInFlight++;
  }

  /** Counts an expired op that left its slot by its (late or flushed) completion. */
  void expiredReaped() {
    if (--expiredInFlight <= 0) {
      expiredInFlight = 0;
      flushArmed = false;
    }
  }

  /** Forgets every expired op: an endpoint reset has just discarded them all. */
  void endpointReset() {
    expiredInFlight = 0;
    flushArmed = false;
  }

  /**
   * After a scan, why the endpoint must be reset now, or null when it need not (yet). Without a
   * flushing removal, any expired op still posted needs the reset; with one, its flushed completion
   * gets {@link #FLUSH_GRACE_NS} from the scan that first found an op expired (later expiries do
   * not extend it), then the reset comes anyway.
   *
   * @param removalFlushes whether the provider flushes a removed peer's posted ops
   */
  String resetReason(long now, boolean removalFlushes) {
    if (expiredInFlight == 0) {
      return null;
    }
    if (!removalFlushes) {
      return "a transfer passed the completion deadline";
    }
    if (!flushArmed) {
      flushArmed = true;
      flushDeadlineNs = now + FLUSH_GRACE_NS;
      return null;
    }
    return now - flushDeadlineNs >= 0 ? "a flushed transfer's completion did not come" : null;
  }

  /**
   * Whether an op that passed the deadline is still posted, waiting for its flush or the reset that
   * recovers the endpoint: until then, what it holds at the provider is not free for others.
   */
  boolean recovering() {
    return expiredInFlight > 0;
  }
}
