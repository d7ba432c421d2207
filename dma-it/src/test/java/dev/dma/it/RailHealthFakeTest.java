package dev.dma.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dma.api.Advertisement;
import dev.dma.api.Completion;
import dev.dma.api.DmaConfiguration;
import dev.dma.api.DmaException;
import dev.dma.api.RemoteAccess;
import dev.dma.api.TransferRequest;
import dev.dma.core.DeviceHealth;
import dev.dma.core.FabricServiceGroup;
import dev.dma.core.PassiveTarget;
import dev.dma.fake.FakeFabric;
import dev.dma.fake.OpMatcher;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Queue;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicIntegerArray;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Rail health in {@link FabricServiceGroup} on the fake: three services on one fake fabric (three
 * devices on one network), four passive clients, and the script failing or holding what one device
 * posts. The scenario: 6,000 reads of 4 KiB at a window of 32, device 1 failing every op
 * with EIO after the first 500. Without health 25 % of the later reads failed; with it none does (a
 * read that failed with a provider error is posted again elsewhere at once, even before device 1 is
 * judged), and device 1 gets nothing but the window in flight when it struck and its probes. Every
 * bound is a count, not a timing.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class RailHealthFakeTest {
  private static final AtomicInteger FABRICS = new AtomicInteger();
  private static final int CLIENTS = 4;
  private static final int TOTAL = 6_000;
  private static final int FAULT_AT = 500;
  private static final int WINDOW = 32;
  private static final int SIZE = 4096;
  private static final int EIO = 5;

  private FakeFabric fabric;
  private Arena arena;
  private FabricServiceGroup<Buffer> group;
  private final List<PassiveTarget> targets = new ArrayList<>();
  private final List<Advertisement> ads = new ArrayList<>();
  private final Map<ByteBuffer, AtomicInteger> opsByDevice = new ConcurrentHashMap<>();

  // Per transfer id: how many completions arrived (each must be exactly one) and whether it failed.
  private final AtomicIntegerArray completed = new AtomicIntegerArray(TOTAL);
  private final AtomicIntegerArray failed = new AtomicIntegerArray(TOTAL);
  private final AtomicInteger movedCompletions = new AtomicInteger();
  private final AtomicInteger failedOnFirstDevice = new AtomicInteger();
  private final Queue<Completion<Buffer>> failedCompletions = new ConcurrentLinkedQueue<>();
  private final Semaphore window = new Semaphore(WINDOW);

  /** The device whose completions the fake holds (a stalled rail), or null. */
  private volatile byte[] stallFrom;

  /** With {@link #stallFrom}: the one client whose completions it holds, or null for all. */
  private volatile byte[] stallOnlyTo;

  @BeforeEach
  void start() {
    // Short enough that a stalled device's reads reach their deadline within the test, long enough
    // that nothing on the fake (which completes at once) comes near it on a loaded machine.
    startGroup(Duration.ofSeconds(2));
  }

  private void startGroup(Duration completionDeadline) {
    fabric = FakeFabric.create("rails-" + FABRICS.incrementAndGet());
    arena = Arena.ofShared();
    String name = fabric.name();
    DmaConfiguration configuration =
        DmaConfiguration.builder()
            .providers("fake")
            .interfaces(List.of(name, name, name))
            .completionDeadline(completionDeadline)
            .build();
    group =
        FabricServiceGroup.<Buffer>builder(configuration)
            .completer(
                batch -> {
                  for (Completion<Buffer> each : batch) {
                    int id = each.context().id();
                    completed.incrementAndGet(id);
                    if (!each.outcome().isDone()) {
                      failed.incrementAndGet(id);
                      failedCompletions.add(each);
                    }
                    if (each.devices() > 1) {
                      movedCompletions.incrementAndGet();
                    }
                    window.release();
                  }
                })
            .start();
    for (int i = 0; i < CLIENTS; i++) {
      PassiveTarget target =
          PassiveTarget.start(
              DmaConfiguration.builder().providers("fake").interfaces(List.of(name)).build());
      targets.add(target);
      MemorySegment remote = arena.allocate(SIZE, 4096);
      ads.add(target.expose(remote, RemoteAccess.READ_WRITE).advertisement());
    }
    fabric
        .script()
        .holdCompletions(
            op -> {
              opsByDevice
                  .computeIfAbsent(ByteBuffer.wrap(op.initiator()), k -> new AtomicInteger())
                  .incrementAndGet();
              byte[] stalled = stallFrom;
              byte[] only = stallOnlyTo;
              return stalled != null
                  && Arrays.equals(op.initiator(), stalled)
                  && (only == null || Arrays.equals(op.peer(), only));
            });
  }

  @AfterEach
  void stop() {
    group.close();
    for (PassiveTarget target : targets) {
      target.close();
    }
    assertEquals(0, fabric.counters().violations(), fabric.counters().lastViolation());
    fabric.close();
    arena.close();
  }

  private byte[] device(int i) {
    return group.services().get(i).localAddress();
  }

  private int opsOn(int i) {
    AtomicInteger count = opsByDevice.get(ByteBuffer.wrap(device(i)));
    return count == null ? 0 : count.get();
  }

  /**
   * Reads {@code from} to {@code to} (ids), at most WINDOW outstanding, round-robin over clients.
   */
  private void read(int from, int to, MemorySegment[] landings) throws InterruptedException {
    for (int id = from; id < to; id++) {
      assertTrue(window.tryAcquire(30, TimeUnit.SECONDS), "a window slot within 30 s");
      int client = id % CLIENTS;
      TransferRequest<Buffer> request =
          TransferRequest.read(
              client + 1, ads.get(client), SIZE, new Buffer(id, landings[id % WINDOW]));
      while (!group.submit(request)) {
        Thread.onSpinWait();
      }
    }
  }

  /** Waits (bounded) for every completion of the first {@code count} ids. */
  private void drain() throws InterruptedException {
    assertTrue(window.tryAcquire(WINDOW, 60, TimeUnit.SECONDS), "every read completed within 60 s");
    window.release(WINDOW);
  }

  private MemorySegment[] landings() {
    MemorySegment[] landings = new MemorySegment[WINDOW];
    for (int i = 0; i < WINDOW; i++) {
      landings[i] = arena.allocate(SIZE, 4096);
    }
    return landings;
  }

  private int failuresFrom(int from, int to) {
    int count = 0;
    for (int id = from; id < to; id++) {
      count += failed.get(id);
    }
    return count;
  }

  private void assertEachCompletedOnce(int to) {
    for (int id = 0; id < to; id++) {
      assertEquals(1, completed.get(id), "transfer " + id + " completed exactly once");
    }
  }

  private void failEverythingOn(int device) {
    byte[] initiator = device(device);
    fabric.script().failOp(OpMatcher.fromInitiator(initiator), EIO, -EIO, "Input/output error");
  }

  @Test
  void aDeviceFailingEveryOpIsPausedAndItsReadsMoveToHealthyDevices() throws Exception {
    MemorySegment[] landings = landings();
    for (Advertisement ad : ads) {
      group.addPeer(ads.indexOf(ad) + 1, ad.address());
    }
    read(0, FAULT_AT, landings);
    drain();
    assertEquals(0, failuresFrom(0, FAULT_AT));
    int before = opsOn(1);
    failEverythingOn(1);
    read(FAULT_AT, TOTAL, landings);
    drain();
    int failures = failuresFrom(FAULT_AT, TOTAL);
    DeviceHealth health = group.health().get(1);
    int onFailing = opsOn(1) - before;
    System.out.printf(
        "every-op failure: %d of %d later reads failed; device 1 got %d ops, %d probes,"
            + " %d moved; %s%n",
        failures,
        TOTAL - FAULT_AT,
        onFailing,
        health.probes(),
        movedCompletions.get(),
        group.health());
    // A provider error moves the read at once, before device 1 is judged: none of them fails.
    assertEquals(0, failures, "later reads failed; each failure on device 1 is posted elsewhere");
    assertEquals(DeviceHealth.State.PAUSED, health.state(), "device 1 is paused");
    assertTrue(health.pauses() >= 1);
    assertTrue(
        onFailing <= WINDOW + health.probes(),
        "device 1 got "
            + onFailing
            + " ops: those in flight when it struck and its probes ("
            + health.probes()
            + ")");
    assertTrue(movedCompletions.get() > 0, "failed reads were posted again on another device");
    assertEachCompletedOnce(TOTAL);
    assertEquals(DeviceHealth.State.HEALTHY, group.health().get(0).state());
    assertEquals(DeviceHealth.State.HEALTHY, group.health().get(2).state());
  }

  @Test
  void oneClientsFailuresNeverPauseADevice() throws Exception {
    MemorySegment[] landings = landings();
    byte[] initiator = device(1);
    byte[] client = ads.get(0).address();
    fabric
        .script()
        .failOp(
            op -> Arrays.equals(op.initiator(), initiator) && Arrays.equals(op.peer(), client),
            EIO,
            -EIO,
            "Input/output error");
    read(0, TOTAL, landings);
    drain();
    DeviceHealth health = group.health().get(1);
    int failures = failuresFrom(0, TOTAL);
    System.out.printf("one client's failures: %d failed; %s%n", failures, group.health());
    assertEquals(0, health.pauses(), "one client's failures never pause device 1");
    assertEquals(DeviceHealth.State.HEALTHY, health.state());
    // A provider error moves the read at once, so client 1's reads all complete elsewhere; device 1
    // still saw (and counted) each of their faults.
    assertEquals(0, failures, "client 1's reads that failed on device 1 were moved");
    assertTrue(health.faults() > 0, "client 1's reads on device 1 did fail there");
    assertEquals(health.faults(), health.failedOver(), "each fault on device 1 was moved");
    assertTrue(movedCompletions.get() > 0, "client 1's reads completed on another device");
    assertEquals(0, group.health().get(0).pauses());
    assertEquals(0, group.health().get(2).pauses());
    assertEachCompletedOnce(TOTAL);
  }

  /**
   * A client whose reads fail with a provider error on every device: each read is moved at once
   * from each device it failed on, at most once per device, and then ends in exactly one failed
   * completion that carried all three. One client's failures pause none of them.
   */
  @Test
  void aClientFailingOnEveryDeviceEndsInOneFailedCompletionPerRead() throws Exception {
    MemorySegment[] landings = landings();
    byte[] client = ads.get(0).address();
    fabric.script().failOp(op -> Arrays.equals(op.peer(), client), EIO, -EIO, "Input/output error");
    read(0, TOTAL, landings);
    drain();
    int failures = failuresFrom(0, TOTAL);
    System.out.printf("one client failing everywhere: %d failed; %s%n", failures, group.health());
    assertEquals(TOTAL / CLIENTS, failures, "every read of client 1, and only those, failed");
    assertEquals(failures, failedCompletions.size());
    for (Completion<Buffer> each : failedCompletions) {
      assertEquals(0, each.context().id() % CLIENTS, "only client 1's reads fail");
      assertEquals(
          DmaException.Reason.PROVIDER,
          each.outcome().error().reason(),
          each.outcome().error().getMessage());
      assertEquals(3, each.devices(), "carried by each device once");
      assertEquals(3, each.posts(), "posted once on each device");
    }
    for (DeviceHealth health : group.health()) {
      assertEquals(0, health.pauses(), "one client's failures never pause " + health.device());
      assertEquals(DeviceHealth.State.HEALTHY, health.state());
      assertTrue(health.faults() > 0, health.device() + " saw client 1's faults");
    }
    assertEachCompletedOnce(TOTAL);
  }

  @Test
  void aFlappingDeviceIsPausedEachTimeAndComesBackAfterItHeals() throws Exception {
    MemorySegment[] landings = landings();
    int done = 0;
    int failures = 0;
    for (int round = 0; round < 3; round++) {
      read(done, done + 500, landings);
      drain();
      done += 500;
      failEverythingOn(1);
      read(done, done + 500, landings);
      drain();
      failures += failuresFrom(done, done + 500);
      done += 500;
      assertEquals(DeviceHealth.State.PAUSED, group.health().get(1).state(), "round " + round);
      fabric.script().clearFaults();
      // Healed: a probe (a read, once the cooldown passed) brings it back; bounded by count.
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
      while (group.health().get(1).state() != DeviceHealth.State.HEALTHY) {
        assertTrue(System.nanoTime() < deadline, "device 1 back within 30 s of the heal");
        read(done, done + 1, landings);
        done++;
        Thread.sleep(5);
        if (done >= TOTAL - 1100) {
          break;
        }
      }
      assertEquals(DeviceHealth.State.HEALTHY, group.health().get(1).state(), "round " + round);
    }
    drain();
    DeviceHealth health = group.health().get(1);
    System.out.printf("flapping: %d failed in the faulty phases; %s%n", failures, health);
    assertEquals(3, health.pauses(), "paused once per fault");
    assertTrue(failures <= 3 * WINDOW, failures + " failed, at most a window per fault");
    assertEachCompletedOnce(done);
  }

  @Test
  void aStalledDeviceIsPausedByDeadlinesOnSeveralClientsAndItsReadsMove() throws Exception {
    MemorySegment[] landings = landings();
    read(0, FAULT_AT, landings);
    drain();
    stallFrom = device(1);
    read(FAULT_AT, 3_000, landings);
    drain();
    int failures = failuresFrom(FAULT_AT, 3_000);
    DeviceHealth stalled = group.health().get(1);
    System.out.printf(
        "stall: %d of %d later reads failed, %d moved; %s%n",
        failures, 3_000 - FAULT_AT, movedCompletions.get(), stalled);
    assertEquals(DeviceHealth.State.PAUSED, stalled.state(), "the stalled device is paused");
    assertTrue(failures <= WINDOW, failures + " failed, at most the window");
    assertTrue(movedCompletions.get() > 0, "reads that hit the deadline were posted elsewhere");
    stallFrom = null;
    fabric.script().releaseCompletions();
    // The deadlines marked every client's incarnation unreachable on device 1. Those marks were
    // the device's doing, so it drops them for its probes and when it comes back: no addPeer is
    // needed, and once back it serves every client again.
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
    int done = 3_000;
    while (group.health().get(1).state() != DeviceHealth.State.HEALTHY && done < TOTAL - 1_000) {
      assertTrue(System.nanoTime() < deadline, "device 1 back within 30 s");
      read(done, done + 1, landings);
      done++;
      Thread.sleep(5);
    }
    drain();
    assertEquals(DeviceHealth.State.HEALTHY, group.health().get(1).state(), "back after the stall");
    int opsBefore = opsOn(1);
    read(done, done + 1_000, landings);
    drain();
    assertEquals(0, failuresFrom(done, done + 1_000), "no read fails after the device is back");
    assertTrue(opsOn(1) > opsBefore, "device 1 carries reads again: " + opsOn(1));
    done += 1_000;
    assertEachCompletedOnce(done);
  }

  /**
   * One client stalls on one device only (a connection a cut left stuck): its reads there reach the
   * deadline and fail (one client's failures are not moved), and the device marks the client
   * unreachable, which pauses nothing. Its later reads that go to that device are never posted
   * there, so they move to a device that reaches the client: none fails.
   */
  @Test
  void aClientMarkedUnreachableOnOneDeviceIsServedByTheOthers() throws Exception {
    MemorySegment[] landings = landings();
    read(0, FAULT_AT, landings);
    drain();
    stallOnlyTo = ads.get(0).address();
    stallFrom = device(1);
    read(FAULT_AT, 3_000, landings);
    drain();
    int stalled = failuresFrom(FAULT_AT, 3_000);
    stallFrom = null;
    fabric.script().releaseCompletions();
    long movedBefore = group.health().get(1).failedOver();
    int opsBefore = opsOn(1);
    // A read goes to device 1 only when it is the less loaded of the two devices the group picks
    // at random, so how many of client 1's reach it in a given thousand depends on the scheduler
    // (once, in CI, none of a thousand was refused there and moved). Read on in thousands until one
    // was, or 30 s pass.
    int done = 3_000;
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
    do {
      read(done, done + 1_000, landings);
      drain();
      done += 1_000;
    } while (group.health().get(1).failedOver() == movedBefore
        && done + 1_000 <= TOTAL
        && System.nanoTime() < deadline);
    DeviceHealth health = group.health().get(1);
    System.out.printf(
        "one client stalled on one device: %d failed while stalled; %d reads after it, %d ops on"
            + " device 1; %s%n",
        stalled, done - 3_000, opsOn(1) - opsBefore, health);
    assertTrue(stalled >= 1 && stalled <= WINDOW, stalled + " reads reached their deadline");
    for (Completion<Buffer> each : failedCompletions) {
      assertEquals(0, each.context().id() % CLIENTS, "only client 1's reads fail");
    }
    assertEquals(0, failuresFrom(3_000, done), "no read fails once the client is marked");
    assertTrue(
        health.failedOver() > movedBefore,
        "reads device 1 refused for its mark were moved: "
            + health
            + ", "
            + (opsOn(1) - opsBefore)
            + " ops on device 1 in "
            + (done - 3_000)
            + " reads");
    assertEquals(0, health.pauses(), "one client's stall never pauses device 1");
    assertEachCompletedOnce(done);
  }

  /**
   * A write the failing device posted may have landed, so it is never moved, even when its request
   * allows retries: each such failure says MAY_HAVE_CHANGED and was posted on one device only. The
   * device is still paused, and the later writes go to healthy devices.
   */
  @Test
  void aPostedWriteIsNeverMovedEvenWithRetriesAllowed() throws Exception {
    MemorySegment[] landings = landings();
    List<Completion<Buffer>> failures = new java.util.concurrent.CopyOnWriteArrayList<>();
    group.close();
    group =
        FabricServiceGroup.<Buffer>builder(
                DmaConfiguration.builder()
                    .providers("fake")
                    .interfaces(List.of(fabric.name(), fabric.name(), fabric.name()))
                    .build())
            .completer(
                batch -> {
                  for (Completion<Buffer> each : batch) {
                    completed.incrementAndGet(each.context().id());
                    if (!each.outcome().isDone()) {
                      failed.incrementAndGet(each.context().id());
                      failures.add(each);
                    }
                    window.release();
                  }
                })
            .start();
    failEverythingOn(1);
    int writes = 2_000;
    for (int id = 0; id < writes; id++) {
      assertTrue(window.tryAcquire(30, TimeUnit.SECONDS), "a window slot within 30 s");
      int client = id % CLIENTS;
      TransferRequest<Buffer> request =
          TransferRequest.write(client + 1, ads.get(client), new Buffer(id, landings[id % WINDOW]))
              .withRetryWrite(true);
      while (!group.submit(request)) {
        Thread.onSpinWait();
      }
    }
    drain();
    System.out.printf("writes: %d failed; %s%n", failures.size(), group.health().get(1));
    assertTrue(failures.size() > 0, "the failing device's first writes failed");
    assertTrue(failures.size() <= WINDOW, failures.size() + " failed, at most the window");
    for (Completion<Buffer> each : failures) {
      assertEquals(1, each.devices(), "a posted write stays on its device");
      assertEquals(1, each.posts());
      assertEquals(
          DmaException.TargetMemory.MAY_HAVE_CHANGED,
          each.outcome().error().targetMemory(),
          each.outcome().error().getMessage());
    }
    assertEquals(DeviceHealth.State.PAUSED, group.health().get(1).state());
    assertEquals(0, group.health().get(1).failedOver());
    assertEachCompletedOnce(writes);
  }
}
