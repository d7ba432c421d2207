package dev.dma.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dma.api.Advertisement;
import dev.dma.api.Completion;
import dev.dma.api.DmaConfiguration;
import dev.dma.api.DmaException;
import dev.dma.api.TransferRequest;
import dev.dma.core.FabricService;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintWriter;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * shm under load and beside a dead neighbour (issue "The newest libfabric", item 6), with two busy
 * loops in this JVM taking the machine's cores: a burst to one live target never gets it declared
 * unreachable (a full queue is not a dead peer), and a target killed with {@code kill -9} fails
 * only its own transfers. The targets are child JVMs ({@link TargetProcess}).
 */
@Timeout(180)
class ShmUnderLoadTest {
  private static final String PROVIDER = "libfabric:shm";
  private static final long SIZE = 64 * 1024;

  private final List<Process> children = new ArrayList<>();
  private final AtomicBoolean loading = new AtomicBoolean(true);
  private final List<Thread> busyLoops = new ArrayList<>();
  private Arena arena;

  @BeforeEach
  void load() {
    arena = Arena.ofShared();
    for (int i = 0; i < 2; i++) {
      Thread loop =
          Thread.ofPlatform()
              .daemon()
              .name("busy-loop-" + i)
              .start(
                  () -> {
                    long spin = 0;
                    while (loading.get()) {
                      spin++;
                    }
                    if (spin == 42) {
                      System.out.print("");
                    }
                  });
      busyLoops.add(loop);
    }
  }

  @AfterEach
  void unload() throws InterruptedException {
    loading.set(false);
    for (Thread loop : busyLoops) {
      loop.join(5_000);
    }
    for (Process child : children) {
      child.destroyForcibly();
      child.waitFor(10, TimeUnit.SECONDS);
      // A killed shm endpoint cannot unlink its region: remove what the child left in /dev/shm.
      try (var left =
          java.nio.file.Files.newDirectoryStream(
              java.nio.file.Path.of("/dev/shm"), child.pid() + ":*")) {
        for (java.nio.file.Path file : left) {
          java.nio.file.Files.deleteIfExists(file);
        }
      } catch (java.io.IOException ignored) {
        // Nothing there, or not ours to remove.
      }
    }
    arena.close();
  }

  /** A target child and its pipes. */
  private record Target(Process process, BufferedReader out, PrintWriter in, Advertisement ad) {
    String ask(String line) throws java.io.IOException {
      in.println(line);
      return out.readLine();
    }
  }

  private Target target(FabricService<Buffer> service) throws Exception {
    Process child = TargetProcess.launch(PROVIDER, "-", SIZE);
    children.add(child);
    BufferedReader out =
        new BufferedReader(new InputStreamReader(child.getInputStream(), StandardCharsets.UTF_8));
    PrintWriter in = new PrintWriter(child.getOutputStream(), true, StandardCharsets.UTF_8);
    String first = out.readLine();
    assertTrue(first != null && first.startsWith("advertisement "), "child said: " + first);
    Advertisement ad = Advertisement.fromFields(List.of(first.substring(14).split(" ")));
    Target target = new Target(child, out, in, ad);
    assertEquals(
        "inserted", target.ask("insert " + Advertisement.encodeHex(service.localAddress())));
    return target;
  }

  private static void signal(String name, Process process) throws Exception {
    Process kill = new ProcessBuilder("kill", "-" + name, Long.toString(process.pid())).start();
    assertTrue(kill.waitFor(10, TimeUnit.SECONDS));
    assertEquals(0, kill.exitValue());
    if (name.equals("STOP")) {
      awaitStopped(process.pid());
    }
  }

  /**
   * Waits, at most 10 s, until every thread of the process is stopped: kill(2) returns once the
   * signal is sent, and a thread running on another core stops a little later, so a transfer
   * submitted right after the kill could otherwise still be served.
   */
  private static void awaitStopped(long pid) throws Exception {
    java.nio.file.Path tasks = java.nio.file.Path.of("/proc", Long.toString(pid), "task");
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
    while (true) {
      boolean allStopped = true;
      try (var threads = java.nio.file.Files.newDirectoryStream(tasks)) {
        for (java.nio.file.Path thread : threads) {
          String stat = java.nio.file.Files.readString(thread.resolve("stat"));
          // The state is the first field after the command name, which is in parentheses.
          char state = stat.charAt(stat.lastIndexOf(')') + 2);
          allStopped &= state == 'T' || state == 't';
        }
      } catch (java.io.IOException threadEnded) {
        allStopped = false;
      }
      if (allStopped) {
        return;
      }
      assertTrue(System.nanoTime() < deadline, "process " + pid + " not stopped within 10 s");
      Thread.sleep(1);
    }
  }

  private static FabricService<Buffer> service(Collector<Buffer> completions) {
    DmaConfiguration configuration =
        DmaConfiguration.builder()
            .providers(PROVIDER)
            .completionDeadline(Duration.ofSeconds(5))
            .build();
    return FabricService.<Buffer>builder(configuration).completer(completions).start();
  }

  private static void submit(FabricService<Buffer> service, TransferRequest<Buffer> request)
      throws InterruptedException {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
    while (!service.submit(request)) {
      assertTrue(System.nanoTime() < deadline, "the service refused a submit for 30 s");
      Thread.sleep(1);
    }
  }

  @Test
  void aBurstToOneLiveTargetNeverGetsItDeclaredUnreachable() throws Exception {
    Collector<Buffer> completions = new Collector<>();
    try (FabricService<Buffer> service = service(completions)) {
      Target live = target(service);
      MemorySegment local = arena.allocate(SIZE, 4096);
      Patterns.fill(local, 5);
      // One write first, so shm's handshake with the target is done before it stops: a target
      // stopped before it ever answered could not be connected, which the progress deadline
      // rightly fails (CI once stopped a target still napping at the burst's start).
      submit(service, TransferRequest.write(1, live.ad(), new Buffer(0, local)));
      assertTrue(completions.take().outcome().isDone(), "the first write failed");
      int burst = 2_000;
      for (int i = 1; i < burst; i++) {
        submit(service, TransferRequest.write(1, live.ad(), new Buffer(i, local)));
        if (i == burst / 2) {
          // The target stops progressing for longer than the progress deadline (1 s) and well
          // inside the completion deadline (5 s), as a descheduled process does on a loaded
          // machine: the window fills and the rest of the burst waits. Nothing may fail.
          signal("STOP", live.process());
          Thread.sleep(2_500);
          signal("CONT", live.process());
        }
      }
      int failed = 0;
      String firstFailure = null;
      for (Completion<Buffer> completion : completions.take(burst - 1)) {
        if (!completion.outcome().isDone()) {
          failed++;
          if (firstFailure == null) {
            firstFailure = completion.outcome().error().toString();
          }
        }
      }
      assertEquals(0, failed, "failed on a live target: " + firstFailure);
      assertEquals("crc " + dev.dma.api.Checksums.crc32c(local), live.ask("crc"));
      live.in().println("quit");
    }
  }

  @Test
  void aKilledTargetFailsOnlyItsOwnTransfers() throws Exception {
    Collector<Buffer> completions = new Collector<>();
    try (FabricService<Buffer> service = service(completions)) {
      Target live = target(service);
      Target doomed = target(service);
      MemorySegment local = arena.allocate(SIZE, 4096);
      Patterns.fill(local, 9);
      int rounds = 400;
      for (int i = 0; i < rounds; i++) {
        submit(service, TransferRequest.write(1, live.ad(), new Buffer(2 * i, local)));
        submit(service, TransferRequest.write(2, doomed.ad(), new Buffer(2 * i + 1, local)));
        if (i == rounds / 4) {
          doomed.process().destroyForcibly();
          assertTrue(doomed.process().waitFor(10, TimeUnit.SECONDS));
        }
      }
      int liveFailed = 0;
      String firstLiveFailure = null;
      for (Completion<Buffer> completion : completions.take(2 * rounds)) {
        boolean isLive = completion.context().id() % 2 == 0;
        if (completion.outcome().isDone()) {
          continue;
        }
        DmaException error = completion.outcome().error();
        if (isLive) {
          liveFailed++;
          if (firstLiveFailure == null) {
            firstLiveFailure = error.toString();
          }
        }
      }
      assertEquals(0, liveFailed, "the live target's transfers failed: " + firstLiveFailure);
      assertEquals("crc " + dev.dma.api.Checksums.crc32c(local), live.ask("crc"));
      assertEquals(0, service.outstanding());
      live.in().println("quit");
    }
  }

  /**
   * A client that leaves with a write in flight (it stops progressing, the server removes it, then
   * it dies): on shm up to 2.4 every later completion waits behind that write, so the deadline must
   * judge only that client, within about a second of its removal rather than at the 30 s deadline,
   * and the live client's writes, stuck behind it, go out again after the reset and land.
   */
  @Test
  void aClientThatLeavesWithAWriteInFlightFailsOnlyItsOwnWithinSeconds() throws Exception {
    Collector<Buffer> completions = new Collector<>();
    DmaConfiguration configuration =
        DmaConfiguration.builder()
            .providers(PROVIDER)
            .completionDeadline(Duration.ofSeconds(30))
            .build();
    try (FabricService<Buffer> service =
        FabricService.<Buffer>builder(configuration).completer(completions).start()) {
      Target live = target(service);
      Target leaving = target(service);
      MemorySegment local = arena.allocate(SIZE, 4096);
      Patterns.fill(local, 3);
      // Both connected and answering first.
      submit(service, TransferRequest.write(1, live.ad(), new Buffer(0, local)));
      submit(service, TransferRequest.write(2, leaving.ad(), new Buffer(1, local)));
      assertTrue(completions.take(2).stream().allMatch(c -> c.outcome().isDone()));

      long start = System.nanoTime();
      signal("STOP", leaving.process());
      submit(service, TransferRequest.write(2, leaving.ad(), new Buffer(3, local)));
      int writes = 20;
      for (int i = 0; i < writes; i++) {
        submit(service, TransferRequest.write(1, live.ad(), new Buffer(10 + 2 * i, local)));
      }
      service.removePeer(2);
      leaving.process().destroyForcibly();
      assertTrue(leaving.process().waitFor(10, TimeUnit.SECONDS));

      int liveFailed = 0;
      String firstLiveFailure = null;
      DmaException leavingError = null;
      int leavingCompletions = 0;
      // Each id once: a missing or doubled completion is told apart from a wrong outcome.
      java.util.TreeMap<Integer, Integer> seen = new java.util.TreeMap<>();
      for (Completion<Buffer> completion : completions.take(1 + writes)) {
        seen.merge(completion.context().id(), 1, Integer::sum);
        if (completion.context().id() == 3) {
          leavingCompletions++;
          leavingError = completion.outcome().isDone() ? null : completion.outcome().error();
        } else if (!completion.outcome().isDone()) {
          liveFailed++;
          if (firstLiveFailure == null) {
            firstLiveFailure = completion.outcome().error().toString();
          }
        }
      }
      long tookMillis = (System.nanoTime() - start) / 1_000_000;
      assertEquals(1 + writes, seen.size(), "completions per id: " + seen);
      assertEquals(0, liveFailed, "the live client's writes failed: " + firstLiveFailure);
      assertEquals(1, leavingCompletions, "completions per id: " + seen);
      assertTrue(leavingError != null, "the leaving client's write succeeded");
      // Judged as left (DEADLINE, about 1 s after its removal) or, once its process was gone, as
      // gone (PEER_UNREACHABLE, a probe interval after that): whichever the worker saw first.
      assertTrue(
          leavingError.reason() == DmaException.Reason.DEADLINE
              || leavingError.reason() == DmaException.Reason.PEER_UNREACHABLE,
          leavingError::toString);
      assertTrue(
          tookMillis < 15_000,
          "took " + tookMillis + " ms: judged at the 30 s deadline, not sooner");
      assertEquals("crc " + dev.dma.api.Checksums.crc32c(local), live.ask("crc"));
      // The live client was not marked: one more write lands at once.
      submit(service, TransferRequest.write(1, live.ad(), new Buffer(100, local)));
      assertTrue(completions.take(1).getFirst().outcome().isDone());
      assertEquals(0, service.outstanding());
      live.in().println("quit");
    }
  }
}
