package dev.dma.fake.sim;

import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import org.jspecify.annotations.Nullable;

/**
 * One simulated run: a set-up and the steps that follow it, both drawn from a seed by {@link
 * #generate}. Every random choice is made here, none while the steps run, so a step's meaning does
 * not depend on the steps before it: the shrinker can drop steps and the rest still mean what they
 * meant, and the same seed gives the same schedule on every machine.
 *
 * <p>Immutable; any thread.
 *
 * @param seed the seed it was drawn from
 * @param setup the worker's and the fake's configuration
 * @param steps what happens, in order
 */
record Schedule(long seed, Setup setup, List<Step> steps) {

  /** What the fake is dressed as: itself, EFA's addresses, or efa-direct. */
  enum Flavor {
    FAKE,
    EFA,
    EFA_DIRECT
  }

  /**
   * What the schedule drives: one worker directly (the original simulator), or through the public
   * services built stepped ({@code dev.dma.core.SteppedServices}): a group of fake devices with
   * striping, the async API over one service, or the async API over a group.
   */
  enum Front {
    WORKER,
    GROUP,
    ASYNC,
    ASYNC_GROUP
  }

  /**
   * A group's (or async group's) shape; unused for the other fronts.
   *
   * @param devices how many devices (the one fake fabric opened that many times)
   * @param stripeThresholdBytes transfers of at least this many bytes are striped
   * @param stripeChunks how many chunks (0: one per device)
   */
  record Group(int devices, long stripeThresholdBytes, int stripeChunks) {}

  /**
   * The set-up of one schedule.
   *
   * @param flavor what the fake behaves as
   * @param targets how many target endpoints (clients 1..targets)
   * @param maxInFlight the configured in-flight cap
   * @param maxTx the fake's transmit depth, 0 for none
   * @param progressMs the progress deadline
   * @param completionMs the completion deadline, 0 for none
   * @param checksums whether transfers ask for CRC-32C
   * @param watch whether operands are watched (each from its own shared arena)
   * @param inPostOrder whether the fake declares it completes in post order
   */
  record Setup(
      Flavor flavor,
      int targets,
      int maxInFlight,
      int maxTx,
      int progressMs,
      int completionMs,
      boolean checksums,
      boolean watch,
      boolean inPostOrder,
      Front front,
      Group group) {

    /** A set-up of the original simulator: one worker, driven directly. */
    Setup(
        Flavor flavor,
        int targets,
        int maxInFlight,
        int maxTx,
        int progressMs,
        int completionMs,
        boolean checksums,
        boolean watch,
        boolean inPostOrder) {
      this(
          flavor,
          targets,
          maxInFlight,
          maxTx,
          progressMs,
          completionMs,
          checksums,
          watch,
          inPostOrder,
          Front.WORKER,
          new Group(1, 0, 0));
    }
  }

  /** The kinds of step; the meaning of a step's arguments is {@link Simulation}'s. */
  enum Kind {
    WRITE,
    READ,
    WRITE_BY_PEER,
    READ_BY_PEER,
    OUT_OF_BOUNDS,
    THROWING_OPERAND,
    ADD_PEER,
    REMOVE_PEER,
    RESTART_CLIENT,
    PIN,
    CACHED_WRITE,
    INVALIDATE,
    AGAIN,
    FAIL_NEXT_OPS,
    HOLD,
    RELEASE,
    RELEASE_REVERSED,
    LOSE_NEXT,
    FAIL_CQ_READ,
    UNREACHABLE,
    REACHABLE,
    SILENT,
    FLUSH_ON_REMOVE,
    FAIL_INSERTS,
    FAIL_REGISTRATIONS,
    COMPLETER_THROWS,
    SLOW_COMPLETER,
    ADVANCE,
    PASSES,
    CLOSE,
    CLOSE_NOW,
    // Fronts with devices only: every op from device a % devices fails (b: the errno), or its
    // completions are held (released by RELEASE), as a dead or a stalled rail.
    FAIL_DEVICE,
    STALL_DEVICE
  }

  /**
   * One step: a kind and three arguments drawn with it.
   *
   * @param kind what it does
   * @param a its first argument (usually the client)
   * @param b its second (a size, a count, an errno index)
   * @param c its third
   */
  record Step(Kind kind, int a, int b, int c) {
    @Override
    public String toString() {
      return kind + "(" + a + "," + b + "," + c + ")";
    }
  }

  // Sizes of a transfer: small, around a page, and larger than the fake's one-copy fast path.
  static final int[] SIZES = {1, 8, 64, 255, 4096, 4097, 65_536};

  /**
   * The schedule of {@code seed}, of {@code steps} steps.
   *
   * @param seed the seed
   * @param steps how many steps
   * @return the schedule
   */
  static Schedule generate(long seed, int steps) {
    return generate(seed, steps, null);
  }

  // The front and its draws come from a stream of their own: the draws of the original simulator
  // (set-up and steps) are the same as before for every seed, so a WORKER seed replays as it did.
  private static final long FRONT_STREAM = 0x5deece66dL;

  /** The front a seed draws: half the seeds drive the worker directly. */
  static Front front(long seed) {
    int roll = new SplittableRandom(seed ^ FRONT_STREAM).nextInt(8);
    return roll < 4
        ? Front.WORKER
        : roll < 6 ? Front.GROUP : roll < 7 ? Front.ASYNC : Front.ASYNC_GROUP;
  }

  /**
   * The schedule of {@code seed} on a chosen front (null: the one the seed draws).
   *
   * @param seed the seed
   * @param steps how many steps
   * @param forced the front, or null
   * @return the schedule
   */
  static Schedule generate(long seed, int steps, @Nullable Front forced) {
    SplittableRandom frontRandom = new SplittableRandom(seed ^ FRONT_STREAM);
    frontRandom.nextInt(8);
    Front front = forced != null ? forced : front(seed);
    long[] thresholds = {4096, 8192, 32_768};
    Group group =
        front == Front.GROUP || front == Front.ASYNC_GROUP
            ? new Group(
                2 + frontRandom.nextInt(2),
                thresholds[frontRandom.nextInt(thresholds.length)],
                frontRandom.nextInt(4))
            : new Group(1, 0, 0);
    SplittableRandom random = new SplittableRandom(seed);
    Flavor flavor = Flavor.values()[random.nextInt(3)];
    int targets = 1 + random.nextInt(3);
    int[] caps = {1, 2, 4, 16, 64};
    int maxInFlight = caps[random.nextInt(caps.length)];
    int maxTx = random.nextInt(4) == 0 ? 1 + random.nextInt(8) : 0;
    int[] progress = {1, 10, 100, 1000};
    int[] completion = {0, 5, 50, 500, 2000};
    Setup setup =
        new Setup(
            flavor,
            targets,
            maxInFlight,
            maxTx,
            progress[random.nextInt(progress.length)],
            completion[random.nextInt(completion.length)],
            random.nextBoolean(),
            random.nextInt(4) == 0,
            random.nextInt(3) == 0,
            front,
            group);
    List<Step> list = new ArrayList<>(steps);
    for (int i = 0; i < steps; i++) {
      Step step = step(random, targets);
      if (group.devices() > 1) {
        // A device fault in place of some steps, drawn from the front's stream.
        int roll = frontRandom.nextInt(100);
        if (roll < 5) {
          step =
              new Step(
                  roll < 3 ? Kind.FAIL_DEVICE : Kind.STALL_DEVICE, step.a(), step.b(), step.c());
        }
      }
      list.add(step);
    }
    return new Schedule(seed, setup, List.copyOf(list));
  }

  private static Step step(SplittableRandom random, int targets) {
    int client = 1 + random.nextInt(targets);
    int size = random.nextInt(SIZES.length);
    int extra = random.nextInt(1 << 16);
    int roll = random.nextInt(100);
    Kind kind;
    if (roll < 18) {
      kind = Kind.WRITE;
    } else if (roll < 32) {
      kind = Kind.READ;
    } else if (roll < 38) {
      kind = Kind.WRITE_BY_PEER;
    } else if (roll < 42) {
      kind = Kind.READ_BY_PEER;
    } else if (roll < 44) {
      kind = Kind.OUT_OF_BOUNDS;
    } else if (roll < 47) {
      kind = Kind.THROWING_OPERAND;
    } else if (roll < 49) {
      kind = Kind.ADD_PEER;
    } else if (roll < 51) {
      kind = Kind.REMOVE_PEER;
    } else if (roll < 52) {
      kind = Kind.RESTART_CLIENT;
    } else if (roll < 53) {
      // Decided by the step's own argument, not a further draw: the steps after it stay the same.
      kind = extra % 3 == 0 ? Kind.PIN : extra % 3 == 1 ? Kind.CACHED_WRITE : Kind.INVALIDATE;
    } else if (roll < 56) {
      kind = Kind.AGAIN;
    } else if (roll < 59) {
      kind = Kind.FAIL_NEXT_OPS;
    } else if (roll < 62) {
      kind = Kind.HOLD;
    } else if (roll < 65) {
      kind = Kind.RELEASE;
    } else if (roll < 66) {
      kind = Kind.RELEASE_REVERSED;
    } else if (roll < 68) {
      kind = Kind.LOSE_NEXT;
    } else if (roll < 71) {
      kind = Kind.FAIL_CQ_READ;
    } else if (roll < 72) {
      kind = Kind.UNREACHABLE;
    } else if (roll < 73) {
      kind = Kind.REACHABLE;
    } else if (roll < 74) {
      kind = Kind.SILENT;
    } else if (roll < 75) {
      kind = Kind.FLUSH_ON_REMOVE;
    } else if (roll < 76) {
      kind = Kind.FAIL_INSERTS;
    } else if (roll < 77) {
      kind = Kind.FAIL_REGISTRATIONS;
    } else if (roll < 79) {
      kind = Kind.COMPLETER_THROWS;
    } else if (roll < 80) {
      kind = Kind.SLOW_COMPLETER;
    } else if (roll < 90) {
      kind = Kind.ADVANCE;
    } else if (roll < 99) {
      kind = Kind.PASSES;
    } else {
      kind = random.nextBoolean() ? Kind.CLOSE : Kind.CLOSE_NOW;
    }
    return new Step(kind, client, size, extra);
  }
}
