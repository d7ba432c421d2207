package dev.dma.core.internal;

/**
 * The fabric worker's backoff while work is outstanding but nothing moves: spin, then yield, then
 * park for growing intervals up to {@link #MAX_PARK_NS}. Counted in passes, not time, so it needs
 * no clock (Agrona's {@code BackoffIdleStrategy} has the same shape).
 *
 * <p>Why three phases: a completion on tcp loopback arrives 10 to 20 µs after its post, so the
 * first {@link #SPINS} idle passes (about 1 ms of {@code fi_cq_read}s) keep latency under load
 * exactly what it was; a peer that went silent leaves ops in flight for seconds, and spinning
 * through that cost a whole core (95 % was measured behind a partition). After the spins and {@link
 * #YIELDS} yields, each idle pass parks, doubling from {@link #MIN_PARK_NS} to {@link
 * #MAX_PARK_NS}: at 1 ms a pass, the stuck worker costs a few µs of CPU per ms, under 1 % of a
 * core, and a completion that does arrive waits at most 1 ms. A message on the channel ends a park
 * early ({@link WorkerChannel#offer} unparks the worker whatever it is waiting for).
 *
 * <p>Worker thread only.
 */
public final class Backoff {
  /** Idle passes spent spinning before yielding. */
  static final int SPINS = 2_000;

  /** Idle passes spent yielding before parking. */
  static final int YIELDS = 200;

  /** The first park. */
  static final long MIN_PARK_NS = 1_000;

  /** The longest park. */
  static final long MAX_PARK_NS = 1_000_000;

  private final WorkerChannel channel;
  private int idlePasses;
  private long parkNs = MIN_PARK_NS;

  /**
   * A backoff whose parks are cut short by messages on {@code channel}.
   *
   * @param channel the worker's channel
   */
  public Backoff(WorkerChannel channel) {
    this.channel = channel;
  }

  /** Something moved: the next idle pass starts spinning again. */
  public void reset() {
    idlePasses = 0;
    parkNs = MIN_PARK_NS;
  }

  /**
   * One idle pass: spins, yields or parks according to how many idle passes came before.
   *
   * @return whether it parked (time passed that a caller keeping a coarse clock should read)
   */
  public boolean idle() {
    int passes = idlePasses;
    if (passes < SPINS) {
      idlePasses = passes + 1;
      Thread.onSpinWait();
      return false;
    }
    if (passes < SPINS + YIELDS) {
      idlePasses = passes + 1;
      Thread.yield();
      return false;
    }
    channel.parkNanos(parkNs);
    parkNs = Math.min(MAX_PARK_NS, parkNs << 1);
    return true;
  }

  /**
   * Idles as the pass's {@link Idle} decision says: {@link Idle#PARK} blocks on the channel (and
   * starts the next backoff afresh), {@link Idle#BACK_OFF} is one {@link #idle()} pass, and {@link
   * Idle#CONTINUE} goes straight on.
   *
   * @param decision what the pass did, as {@link Idle#decide} judged it
   * @return whether the worker blocked or parked (time passed that a coarse clock should read)
   */
  public boolean after(Idle decision) {
    return switch (decision) {
      case PARK -> {
        reset();
        // Only after a real block: a resubmitting completer (a closed loop) leaves a message
        // every time, and a clock read per transfer there cost a sixth of it (JMH, fake).
        yield channel.park();
      }
      // Work in flight or stalled on -FI_EAGAIN, and nothing moved: spin for the completion
      // that usually follows within microseconds, then back off to parking so a peer that went
      // silent does not cost a core.
      case BACK_OFF -> idle();
      case CONTINUE -> {
        reset();
        yield false;
      }
    };
  }

  /**
   * Whether the backoff has reached its parking phase; for tests.
   *
   * @return whether idle passes now park
   */
  boolean parking() {
    return idlePasses >= SPINS + YIELDS;
  }
}
