package dev.dma.fake.sim;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.SplittableRandom;
import org.jspecify.annotations.Nullable;

/**
 * {@code bin/simulate}'s main class: runs seeded {@link Schedule}s through {@link Simulation}, and
 * for each that violates an invariant prints its seed, the violation and a shortest schedule that
 * still violates one ({@link #shrink}). Ends with one line, {@code simulated N schedules, M steps,
 * K violations}, and exits 0 only when K is 0.
 *
 * <p>Options: {@code --seed S} (the first schedule's seed; the others follow from it), {@code
 * --schedules N}, {@code --steps M} (per schedule), {@code --replay S} (runs the one schedule of
 * seed S, printing each step), {@code --front F} (every schedule on front F instead of the one its
 * seed draws: worker, group, async or async_group). Threads: the calling one only.
 */
public final class Simulator {
  /** Steps per schedule unless told. */
  static final int DEFAULT_STEPS = 40;

  private Simulator() {}

  /**
   * Runs the simulator.
   *
   * @param args the options above
   */
  public static void main(String[] args) {
    long seed = System.nanoTime();
    int schedules = 1000;
    int steps = DEFAULT_STEPS;
    Long replay = null;
    Schedule.Front front = null;
    for (int i = 0; i < args.length; i++) {
      switch (args[i]) {
        case "--seed" -> seed = Long.parseLong(args[++i]);
        case "--schedules" -> schedules = Integer.parseInt(args[++i]);
        case "--steps" -> steps = Integer.parseInt(args[++i]);
        case "--replay" -> replay = Long.parseLong(args[++i]);
        case "--front" -> front = Schedule.Front.valueOf(args[++i].toUpperCase(Locale.ROOT));
        default -> {
          System.err.println(
              "usage: bin/simulate [--seed S] [--schedules N] [--steps M] [--replay S]"
                  + " [--front worker|group|async|async_group]");
          System.exit(2);
        }
      }
    }
    // The worker logs every reset and completer failure; thousands of schedules would drown the
    // report in them.
    java.util.logging.LogManager.getLogManager().reset();
    long started = System.nanoTime();
    int violations;
    long ran;
    if (replay != null) {
      Schedule schedule = Schedule.generate(replay, steps, front);
      System.out.println("replaying seed " + replay + ": " + schedule.setup());
      for (int i = 0; i < schedule.steps().size(); i++) {
        System.out.println("  " + i + " " + schedule.steps().get(i));
      }
      violations = report(schedule) ? 1 : 0;
      schedules = 1;
      ran = schedule.steps().size();
    } else {
      System.out.println("first seed " + seed);
      Outcome outcome = runMany(seed, schedules, steps, true, front);
      violations = outcome.violations;
      ran = outcome.steps;
    }
    double seconds = (System.nanoTime() - started) / 1e9;
    System.out.printf("took %.1f s%n", seconds);
    System.out.println(
        "simulated " + schedules + " schedules, " + ran + " steps, " + violations + " violations");
    System.exit(violations == 0 ? 0 : 1);
  }

  /** What a run of many schedules found. */
  record Outcome(int violations, long steps, List<Long> failedSeeds) {}

  /**
   * Runs {@code count} schedules whose seeds follow from {@code firstSeed}; prints each failure.
   *
   * @param firstSeed the first schedule's seed
   * @param count how many schedules
   * @param steps steps per schedule
   * @param print whether to print each failure, shrunk
   * @return the failures found
   */
  static Outcome runMany(long firstSeed, int count, int steps, boolean print) {
    return runMany(firstSeed, count, steps, print, null);
  }

  /**
   * As {@link #runMany(long, int, int, boolean)}, every schedule on {@code front} (null: the one
   * each seed draws).
   */
  static Outcome runMany(
      long firstSeed, int count, int steps, boolean print, Schedule.@Nullable Front front) {
    SplittableRandom seeds = new SplittableRandom(firstSeed);
    int violations = 0;
    long ran = 0;
    List<Long> failed = new ArrayList<>();
    for (int i = 0; i < count; i++) {
      long seed = i == 0 ? firstSeed : seeds.nextLong();
      Schedule schedule = Schedule.generate(seed, steps, front);
      ran += schedule.steps().size();
      if (!Simulation.run(schedule).isEmpty()) {
        violations++;
        failed.add(seed);
        if (print) {
          System.out.println("schedule " + (i + 1) + " of " + count + " fails:");
          report(schedule);
        }
      }
    }
    return new Outcome(violations, ran, failed);
  }

  /**
   * Runs one schedule; when it fails, prints its seed, its violations and its shrunk form.
   *
   * @return whether it failed
   */
  static boolean report(Schedule schedule) {
    List<String> found = Simulation.run(schedule);
    if (found.isEmpty()) {
      return false;
    }
    System.out.println("VIOLATION seed " + schedule.seed() + " (" + schedule.setup() + ")");
    for (String each : found) {
      System.out.println("  " + each);
    }
    Schedule shrunk = shrink(schedule);
    System.out.println(
        "  shrunk to "
            + shrunk.steps().size()
            + " of "
            + schedule.steps().size()
            + " steps: "
            + shrunk.steps());
    for (String each : Simulation.run(shrunk)) {
      System.out.println("    " + each);
    }
    System.out.println(
        "  replay: bin/simulate --replay "
            + schedule.seed()
            + " --steps "
            + schedule.steps().size());
    return true;
  }

  /**
   * A shorter schedule that still violates an invariant: drops halves, then quarters and so on
   * (delta debugging's complement step), then single steps, while the run still fails. Each
   * candidate is a full, deterministic rerun, so what it returns fails on its own.
   *
   * @param failing a schedule that fails
   * @return the shortest failing schedule found (possibly {@code failing} itself)
   */
  static Schedule shrink(Schedule failing) {
    List<Schedule.Step> steps = new ArrayList<>(failing.steps());
    for (int chunk = Math.max(1, steps.size() / 2); chunk >= 1; chunk /= 2) {
      boolean removed = true;
      while (removed) {
        removed = false;
        for (int start = 0; start + chunk <= steps.size(); ) {
          List<Schedule.Step> candidate = new ArrayList<>(steps);
          candidate.subList(start, start + chunk).clear();
          if (fails(failing, candidate)) {
            steps = candidate;
            removed = true;
          } else {
            start += chunk;
          }
        }
      }
    }
    return new Schedule(failing.seed(), failing.setup(), List.copyOf(steps));
  }

  private static boolean fails(Schedule original, List<Schedule.Step> steps) {
    return !Simulation.run(new Schedule(original.seed(), original.setup(), List.copyOf(steps)))
        .isEmpty();
  }
}
