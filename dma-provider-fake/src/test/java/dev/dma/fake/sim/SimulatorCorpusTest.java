package dev.dma.fake.sim;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.logging.Level;
import java.util.logging.Logger;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The simulator on every CI leg: the seed corpus ({@code corpus.txt} beside this class: every seed
 * that ever failed), a fixed block of seeds, and a block of fresh ones whose first seed is printed
 * (so a failure there is replayed with {@code bin/simulate --seed S}). Bound: about 3,000
 * schedules, a few seconds on two cores; the timeout is far above it.
 */
@Timeout(120)
class SimulatorCorpusTest {
  private static final int FIXED = 1_500;
  private static final int FRESH = 1_500;
  private static final Logger ROOT = Logger.getLogger("");
  private static Level before;

  // The worker logs every reset and completer failure it survives: thousands of lines here.
  @BeforeAll
  static void quiet() {
    before = ROOT.getLevel();
    ROOT.setLevel(Level.OFF);
  }

  @AfterAll
  static void loud() {
    ROOT.setLevel(before);
  }

  @Test
  void everySeedThatEverFailedNowPasses() throws IOException {
    List<Entry> corpus = corpus();
    assertFalse(corpus.isEmpty(), "the corpus is empty");
    List<String> failures = new ArrayList<>();
    for (Entry entry : corpus) {
      List<String> found =
          Simulation.run(Schedule.generate(entry.seed, Simulator.DEFAULT_STEPS, entry.front));
      if (!found.isEmpty()) {
        failures.add(entry.seed + " " + entry.front + ": " + found.getFirst());
      }
    }
    assertEquals(List.of(), failures, "corpus seeds that fail (bin/simulate --replay SEED)");
  }

  @Test
  void aFixedBlockOfSeedsPasses() {
    Simulator.Outcome outcome = Simulator.runMany(1, FIXED, Simulator.DEFAULT_STEPS, true);
    assertEquals(List.of(), outcome.failedSeeds(), "fixed seeds that fail");
  }

  @Test
  void aFreshBlockOfSeedsPasses() {
    long first = System.nanoTime();
    System.out.println("SimulatorCorpusTest fresh seeds from --seed " + first);
    Simulator.Outcome outcome = Simulator.runMany(first, FRESH, Simulator.DEFAULT_STEPS, true);
    assertEquals(
        List.of(),
        outcome.failedSeeds(),
        "fresh seeds that fail: add each to corpus.txt (first seed " + first + ")");
  }

  /** A schedule replays exactly: the same completions, in the same order, at the same times. */
  @Test
  void aScheduleReplaysExactly() {
    for (long seed = 100; seed < 140; seed++) {
      Schedule schedule = Schedule.generate(seed, Simulator.DEFAULT_STEPS);
      assertEquals(schedule, Schedule.generate(seed, Simulator.DEFAULT_STEPS));
      long first = Simulation.runTraced(schedule).fingerprint();
      assertEquals(first, Simulation.runTraced(schedule).fingerprint(), "seed " + seed);
    }
  }

  /**
   * The first real bug the simulator found (seed 8144808240551315005 of 120 steps, shrunk to ten):
   * an addPeer of the address that was the only one left in the client's history of past addresses
   * made {@code PeerTable.forgetPrevious} store a null history, whose NullPointerException escaped
   * the worker's pass (a threaded worker dies of it, failing every transfer it held).
   */
  @Test
  void reAdvertisingTheOnlyPastAddressKeepsTheWorkerAlive() {
    Schedule.Setup setup =
        new Schedule.Setup(Schedule.Flavor.FAKE, 3, 1, 0, 1000, 5, false, false, true);
    List<Schedule.Step> steps =
        List.of(
            new Schedule.Step(Schedule.Kind.HOLD, 3, 2, 16327),
            new Schedule.Step(Schedule.Kind.THROWING_OPERAND, 3, 0, 30778),
            new Schedule.Step(Schedule.Kind.READ, 2, 4, 33415),
            new Schedule.Step(Schedule.Kind.RESTART_CLIENT, 2, 0, 33736),
            new Schedule.Step(Schedule.Kind.RELEASE_REVERSED, 3, 2, 13278),
            new Schedule.Step(Schedule.Kind.HOLD, 1, 4, 58735),
            new Schedule.Step(Schedule.Kind.ADVANCE, 1, 3, 34498),
            new Schedule.Step(Schedule.Kind.READ_BY_PEER, 1, 5, 35217),
            new Schedule.Step(Schedule.Kind.ADVANCE, 3, 3, 30609),
            new Schedule.Step(Schedule.Kind.ADD_PEER, 2, 0, 13378));
    assertEquals(
        List.of(), Simulation.run(new Schedule(8144808240551315005L, setup, steps)), "violations");
  }

  /**
   * The first real bug the group simulation found (seed 1557450390005145324, a group of three
   * devices striping 64 KiB reads in three chunks, shrunk to eight steps): a chunk that failed on a
   * dead device and failed over to a device that refused it at intake (its client marked
   * unreachable there) counted both devices but only the one post, so the stripe's completion had
   * more devices than posts; {@code Completion}'s constructor threw inside the router, and the
   * striped read never completed (nor did the rest of that worker's batch).
   */
  @Test
  void aFailedOverChunkRefusedAtIntakeStillCompletesItsStripe() {
    Schedule.Setup setup =
        new Schedule.Setup(
            Schedule.Flavor.EFA,
            3,
            16,
            0,
            100,
            5,
            false,
            false,
            false,
            Schedule.Front.GROUP,
            new Schedule.Group(3, 8192, 0));
    List<Schedule.Step> steps =
        List.of(
            new Schedule.Step(Schedule.Kind.STALL_DEVICE, 2, 3, 7467),
            new Schedule.Step(Schedule.Kind.READ, 3, 6, 4808),
            new Schedule.Step(Schedule.Kind.WRITE, 1, 1, 38952),
            new Schedule.Step(Schedule.Kind.HOLD, 3, 5, 47347),
            new Schedule.Step(Schedule.Kind.WRITE, 1, 5, 32650),
            new Schedule.Step(Schedule.Kind.FAIL_DEVICE, 1, 6, 38291),
            new Schedule.Step(Schedule.Kind.ADVANCE, 3, 6, 17846),
            new Schedule.Step(Schedule.Kind.READ, 3, 6, 65323));
    assertEquals(
        List.of(), Simulation.run(new Schedule(1557450390005145324L, setup, steps)), "violations");
  }

  /** The shrinker keeps a failing schedule failing and never lengthens it. */
  @Test
  void shrinkingKeepsTheFailure() {
    // Not a dma bug: a schedule that refers to a client the set-up does not have throws in the
    // simulation, which counts as a violation, wherever it sits among the other steps.
    Schedule base = Schedule.generate(7, Simulator.DEFAULT_STEPS);
    List<Schedule.Step> steps = new ArrayList<>(base.steps());
    steps.add(20, new Schedule.Step(Schedule.Kind.WRITE, 99, 0, 0));
    Schedule failing = new Schedule(7, base.setup(), List.copyOf(steps));
    assertFalse(Simulation.run(failing).isEmpty());
    Schedule shrunk = Simulator.shrink(failing);
    assertFalse(Simulation.run(shrunk).isEmpty());
    assertEquals(List.of(new Schedule.Step(Schedule.Kind.WRITE, 99, 0, 0)), shrunk.steps());
  }

  /** A corpus line: a seed and the front it failed on (a line of a seed alone: the worker's). */
  private record Entry(long seed, Schedule.Front front) {}

  private static List<Entry> corpus() throws IOException {
    List<Entry> seeds = new ArrayList<>();
    try (InputStream in =
            Objects.requireNonNull(
                SimulatorCorpusTest.class.getResourceAsStream("corpus.txt"), "corpus.txt");
        BufferedReader reader =
            new BufferedReader(new InputStreamReader(in, StandardCharsets.UTF_8))) {
      for (String line = reader.readLine(); line != null; line = reader.readLine()) {
        String text = line.strip();
        if (!text.isEmpty() && !text.startsWith("#")) {
          // Seeds recorded before the fronts existed ran on the worker: they still do.
          String[] parts = text.split("\\s+");
          seeds.add(
              new Entry(
                  Long.parseLong(parts[0]),
                  parts.length > 1 ? Schedule.Front.valueOf(parts[1]) : Schedule.Front.WORKER));
        }
      }
    }
    assertTrue(seeds.size() >= 1);
    return seeds;
  }
}
