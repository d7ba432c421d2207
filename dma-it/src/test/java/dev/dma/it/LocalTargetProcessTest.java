package dev.dma.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.dma.api.Advertisement;
import dev.dma.api.Completion;
import dev.dma.api.DmaConfiguration;
import dev.dma.api.DmaException;
import dev.dma.api.TransferRequest;
import dev.dma.core.FabricService;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * {@code local} with its target in another process ({@link OperandTarget}): served from another pid
 * namespace ({@code unshare --pid --fork}, no ptrace right involved), and a target killed with
 * SIGKILL: its transfers fail {@code PEER_UNREACHABLE}, and its restarted successor is served and
 * never receives a byte meant for the dead one.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class LocalTargetProcessTest {
  private static final long SIZE = 1 << 20;
  private static final Duration ANSWER = Duration.ofSeconds(30);
  private static final DmaConfiguration CONFIG =
      DmaConfiguration.builder()
          .providers("local")
          .completionDeadline(Duration.ofSeconds(2))
          .progressDeadline(Duration.ofSeconds(1))
          .build();
  private static int started;

  private static LineChild target(boolean ownPidNamespace) throws Exception {
    List<String> command = new ArrayList<>();
    if (ownPidNamespace) {
      command.addAll(List.of("unshare", "--pid", "--fork", "--kill-child"));
    }
    command.addAll(
        List.of(
            Path.of(System.getProperty("java.home"), "bin", "java").toString(),
            "--enable-native-access=ALL-UNNAMED",
            "-XX:TieredStopAtLevel=1",
            // No /tmp/hsperfdata_<user>/<pid> file: in its own pid namespace the child is pid 1,
            // and a child the test kills would leave a file that no later JVM removes (pid 1 is
            // always alive to them).
            "-XX:-UsePerfData",
            "-cp",
            System.getProperty("java.class.path"),
            OperandTarget.class.getName(),
            "local",
            "-",
            Long.toString(SIZE)));
    return LineChild.start("local-target", "target-" + ++started, command);
  }

  private static Advertisement advertisement(LineChild child) throws Exception {
    String first = child.expect("advertisement ", ANSWER);
    return Advertisement.fromFields(List.of(first.substring(14).split(" ")));
  }

  private static boolean unshareWorks() {
    try {
      Process p = new ProcessBuilder("unshare", "--pid", "--fork", "true").start();
      return p.waitFor(10, TimeUnit.SECONDS) && p.exitValue() == 0;
    } catch (Exception e) {
      return false;
    }
  }

  @Test
  void aTargetInAnotherPidNamespaceIsServedBothWays() throws Exception {
    assumeTrue(unshareWorks(), "unshare --pid --fork is not permitted here");
    Collector<Buffer> completions = new Collector<>();
    LineChild child = target(true);
    try (Arena arena = Arena.ofShared();
        FabricService<Buffer> service =
            FabricService.<Buffer>builder(CONFIG).completer(completions).start()) {
      Advertisement ad = advertisement(child);
      String theirs = child.ask("pidns", ANSWER).substring(6);
      String ours = Files.readSymbolicLink(Path.of("/proc/self/ns/pid")).toString();
      assertNotEquals(ours, theirs, "the target runs in this pid namespace");
      MemorySegment local = arena.allocate(SIZE);
      local.fill((byte) 0x3c);
      assertTrue(service.submit(TransferRequest.write(1, ad, new Buffer(1, local))));
      Completion<Buffer> written = completions.take();
      assertTrue(written.outcome().isDone(), () -> written.outcome().error().toString());
      assertEquals("count " + SIZE, child.ask("count 0 " + SIZE + " 60", ANSWER));
      child.ask("set 7", ANSWER);
      MemorySegment back = arena.allocate(SIZE);
      assertTrue(service.submit(TransferRequest.read(1, ad, SIZE, new Buffer(2, back))));
      assertTrue(completions.take().outcome().isDone());
      for (long i = 0; i < SIZE; i++) {
        if (back.get(java.lang.foreign.ValueLayout.JAVA_BYTE, i) != 7) {
          throw new AssertionError("byte " + i + " read back wrong");
        }
      }
    } finally {
      child.kill();
      child.waitForExit(Duration.ofSeconds(10));
    }
  }

  @Test
  void aKilledTargetFailsPeerUnreachableAndItsRestartedSuccessorGetsNoneOfItsBytes()
      throws Exception {
    Collector<Buffer> completions = new Collector<>();
    LineChild first = target(false);
    LineChild second = null;
    try (Arena arena = Arena.ofShared();
        FabricService<Buffer> service =
            FabricService.<Buffer>builder(CONFIG).completer(completions).start()) {
      Advertisement dead = advertisement(first);
      MemorySegment local = arena.allocate(SIZE);
      local.fill((byte) 0x11);
      assertTrue(service.submit(TransferRequest.write(1, dead, new Buffer(1, local))));
      assertTrue(completions.take().outcome().isDone());

      first.kill();
      assertTrue(first.waitForExit(Duration.ofSeconds(10)), "the target did not die");
      // The server notices a closed socket within a millisecond of its next pass; wait past it.
      Thread.sleep(50);
      local.fill((byte) 0x22);
      assertTrue(service.submit(TransferRequest.write(1, dead, new Buffer(2, local))));
      Completion<Buffer> failed = completions.take();
      assertFalse(failed.outcome().isDone(), "a write to a killed target succeeded");
      assertEquals(
          DmaException.Reason.PEER_UNREACHABLE,
          failed.outcome().error().reason(),
          failed.outcome().error()::toString);

      second = target(false);
      Advertisement current = advertisement(second);
      // The dead incarnation stays marked; a transfer with its advertisement fails at once.
      assertTrue(service.submit(TransferRequest.write(2, dead, new Buffer(3, local))));
      Completion<Buffer> stale = completions.take();
      assertEquals(DmaException.Reason.PEER_UNREACHABLE, stale.outcome().error().reason());
      local.fill((byte) 0x33);
      assertTrue(service.submit(TransferRequest.write(3, current, new Buffer(4, local))));
      Completion<Buffer> fresh = completions.take();
      assertTrue(fresh.outcome().isDone(), () -> fresh.outcome().error().toString());
      assertEquals("count " + SIZE, second.ask("count 0 " + SIZE + " 51", ANSWER));
      assertEquals("count 0", second.ask("count 0 " + SIZE + " 34", ANSWER));
      assertEquals("count 0", second.ask("count 0 " + SIZE + " 17", ANSWER));
    } finally {
      first.kill();
      if (second != null) {
        second.send("quit");
        if (!second.waitForExit(Duration.ofSeconds(10))) {
          second.kill();
        }
      }
    }
  }
}
