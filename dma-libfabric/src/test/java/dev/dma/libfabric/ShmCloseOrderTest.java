package dev.dma.libfabric;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dma.api.Advertisement;
import dev.dma.api.Completion;
import dev.dma.api.DmaConfiguration;
import dev.dma.api.DmaException;
import dev.dma.api.Operands;
import dev.dma.api.RemoteAccess;
import dev.dma.api.TransferRequest;
import dev.dma.core.FabricService;
import dev.dma.core.PassiveTarget;
import dev.dma.spi.ExposedRegion;
import dev.dma.spi.FabricEndpoint;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * shm in every close order, each scenario in a fresh JVM so that a SIGSEGV fails the test instead
 * of killing the build: on libfabric 2.1, {@code fi_av_remove} of a same-process peer whose
 * endpoint closed first crashed in {@code smr_unmap_region} (three runs of three of {@code
 * dma-bench run --provider libfabric:shm}, which closes its passive target before the service).
 * Runs on whatever libfabric the build loads ({@code -Ddma.libfabric.library} is passed on).
 */
class ShmCloseOrderTest {
  static final DmaConfiguration SHM = DmaConfiguration.builder().providers("libfabric:shm").build();

  @BeforeAll
  static void libfabric() {
    Assumptions.assumeTrue(Libfabric.availability().available(), Libfabric.availability().reason());
    Assumptions.assumeTrue(
        Libfabric.providerNames().contains("shm"), "this libfabric has no shm provider");
  }

  static ProcessBuilder child(String... args) {
    return childOf(Child.class, args);
  }

  /** A child JVM on this test class path, running {@code main} with {@code args}. */
  static ProcessBuilder childOf(Class<?> main, String... args) {
    List<String> command = new ArrayList<>();
    command.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
    command.add("--enable-native-access=ALL-UNNAMED");
    command.add("-Xshare:off");
    String library = System.getProperty(Libfabric.LIBRARY_PROPERTY);
    if (library != null) {
      command.add("-D" + Libfabric.LIBRARY_PROPERTY + "=" + library);
    }
    command.add("-cp");
    command.add(System.getProperty("java.class.path"));
    command.add(main.getName());
    command.addAll(List.of(args));
    return new ProcessBuilder(command).redirectErrorStream(true);
  }

  /** Runs a child to its end (at most 90 s) and returns its output; asserts exit 0. */
  static String run(String... args) throws Exception {
    return run(child(args), "child " + List.of(args));
  }

  /**
   * Runs the child {@code builder} starts to its end (at most 90 s), removes the shm files a crash
   * left, and returns its output; asserts exit 0 and no SIGSEGV.
   */
  static String run(ProcessBuilder builder, String what) throws Exception {
    Process process = builder.start();
    // Drain on another thread so a full pipe cannot stall the child; bounded by waitFor below.
    StringBuilder output = new StringBuilder();
    Thread reader =
        Thread.ofPlatform()
            .daemon()
            .start(
                () -> {
                  try (var in = process.getInputStream()) {
                    output.append(new String(in.readAllBytes(), StandardCharsets.UTF_8));
                  } catch (java.io.IOException ignored) {
                    // the child died; its exit code tells
                  }
                });
    boolean finished = process.waitFor(90, TimeUnit.SECONDS);
    if (!finished) {
      process.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
    }
    reader.join(10_000);
    // A crashed child leaves its shm files (its handlers never ran): remove exactly those.
    for (ShmNames.Leftover leftover : ShmNames.leftovers(ShmNames.DEV_SHM)) {
      if (leftover.pid() == process.pid()) {
        Files.deleteIfExists(leftover.file());
      }
    }
    String text = output.toString();
    assertTrue(finished, "the child did not finish in 90 s:\n" + text);
    assertEquals(0, process.exitValue(), what + " output:\n" + text);
    assertFalse(text.contains("SIGSEGV"), text);
    return text;
  }

  @ParameterizedTest
  @ValueSource(
      strings = {
        "remove-after-peer-closed",
        "reap-after-peer-closed",
        "service-after-target",
        "target-after-service",
      })
  void survivesEveryCloseOrder(String scenario) throws Exception {
    String output = run(scenario);
    assertTrue(output.contains("survived " + scenario), output);
  }

  @Test
  void insertingOrPostingToAClosedLocalPeerIsRefused() {
    try (Arena arena = Arena.ofShared();
        LibfabricEndpoint initiator = LibfabricEndpoint.open(EndpointPolicy.of("shm"), SHM)) {
      initiator.openSlots(4);
      LibfabricEndpoint target = LibfabricEndpoint.open(EndpointPolicy.of("shm"), SHM);
      byte[] address = target.localAddress();
      MemorySegment remote = arena.allocate(4096, 4096);
      ExposedRegion region = target.expose(remote, RemoteAccess.READ_WRITE);
      Advertisement ad = region.advertisement();
      long peer = initiator.insertPeer(address);
      assertFalse(ShmNames.isClosedLocal(address));
      target.close();
      assertTrue(ShmNames.isClosedLocal(address));
      MemorySegment local = arena.allocate(4096, 4096);
      // A post would write into the closed endpoint's unmapped region.
      assertEquals(
          -107,
          initiator.postWrite(
              0, peer, local.address(), 4096, 0, ad.remoteAddress(), ad.remoteKey()));
      assertEquals(0, initiator.removePeer(peer), "the removal is skipped, not failed");
      DmaException refused = assertThrows(DmaException.class, () -> initiator.insertPeer(address));
      assertTrue(refused.getMessage().contains("already closed"), refused.getMessage());
    }
  }

  @Test
  void peerAddressStringsAreCheckedByFormNotByTheLocalLength() {
    try (LibfabricEndpoint endpoint = LibfabricEndpoint.open(EndpointPolicy.of("shm"), SHM)) {
      int own = endpoint.localAddress().length;
      // Peers whose pids have one digit fewer or more than this one's, and a 7-digit pid with a
      // 3-digit index: all valid shm names, none of this endpoint's length.
      String pid = String.valueOf(ProcessHandle.current().pid());
      String shorter = "fi_shm://" + pid.substring(1) + ":0:0";
      String longer = "fi_shm://" + pid + "1:0:0";
      for (String name : List.of(shorter, longer, "fi_shm://4194303:1000:123")) {
        endpoint.peerIdentity((name + "\0").getBytes(StandardCharsets.US_ASCII));
      }
      // Its own name has as many pid digits and an index of at least one: always longer.
      assertTrue(shorter.length() + 1 < own, shorter + " against " + own + " bytes");
      byte[] noNul = "fi_shm://4242:0:0".getBytes(StandardCharsets.US_ASCII);
      assertTrue(
          assertThrows(DmaException.class, () -> endpoint.peerIdentity(noNul))
              .getMessage()
              .contains("NUL"));
      byte[] tooLong = ("fi_shm://" + "9".repeat(60) + "\0").getBytes(StandardCharsets.US_ASCII);
      assertTrue(
          assertThrows(DmaException.class, () -> endpoint.peerIdentity(tooLong))
              .getMessage()
              .contains("2 to 64 bytes"));
      byte[] control = "fi_shm://\n1:0:0\0".getBytes(StandardCharsets.US_ASCII);
      assertThrows(DmaException.class, () -> endpoint.peerIdentity(control));
    }
  }

  @Test
  void twoProcessesBindingTheSameAddressGetDistinctNames() throws Exception {
    // Each child opens its first shm endpoint with bind 127.0.0.1 and holds it until stdin ends.
    Process first = child("hold", "127.0.0.1").start();
    Process second = child("hold", "127.0.0.1").start();
    try {
      String a = firstLine(first);
      String b = firstLine(second);
      assertTrue(a.startsWith("address fi_shm://" + first.pid() + ":"), a);
      assertTrue(b.startsWith("address fi_shm://" + second.pid() + ":"), b);
      assertNotEquals(a, b);
    } finally {
      first.getOutputStream().close();
      second.getOutputStream().close();
      assertTrue(first.waitFor(30, TimeUnit.SECONDS));
      assertTrue(second.waitFor(30, TimeUnit.SECONDS));
    }
    assertEquals(0, first.exitValue());
    assertEquals(0, second.exitValue());
  }

  @Test
  void aKilledProcessLeavesItsFileAndTheNextStartNamesIt() throws Exception {
    Process holder = child("hold", "").start();
    String line = firstLine(holder);
    String name = line.substring("address fi_shm://".length());
    Path file = ShmNames.DEV_SHM.resolve(name);
    try {
      assertTrue(Files.exists(file), file.toString());
      assertFalse(
          ShmNames.leftovers(ShmNames.DEV_SHM).stream().anyMatch(l -> l.file().equals(file)),
          "a live process's file is no leftover");
      holder.destroyForcibly();
      assertTrue(holder.waitFor(30, TimeUnit.SECONDS));
      assertTrue(Files.exists(file), "SIGKILL skips shm's cleanup");
      List<ShmNames.Leftover> leftovers = ShmNames.leftovers(ShmNames.DEV_SHM);
      assertTrue(
          leftovers.contains(new ShmNames.Leftover(file, holder.pid())), leftovers.toString());
      String warning = ShmNames.leftoverWarning(ShmNames.DEV_SHM);
      assertTrue(warning.contains("rm -f") && warning.contains("'" + file + "'"), warning);
    } finally {
      Files.deleteIfExists(file);
    }
  }

  @Test
  void leftoversAreOnlyFilesOfDeadProcesses(@TempDir Path dir) throws Exception {
    long self = ProcessHandle.current().pid();
    long dead = deadPid();
    Files.createFile(dir.resolve(self + ":0:0"));
    Files.createFile(dir.resolve(dead + ":0:3"));
    Files.createFile(dir.resolve("127.0.0.1:0:0")); // named after a node: no pid to check
    Files.createFile(dir.resolve("unrelated"));
    List<ShmNames.Leftover> leftovers = ShmNames.leftovers(dir);
    assertEquals(List.of(new ShmNames.Leftover(dir.resolve(dead + ":0:3"), dead)), leftovers);
    assertEquals("rm -f '" + dir.resolve(dead + ":0:3") + "'", ShmNames.cleanupCommand(leftovers));
  }

  private static long deadPid() throws Exception {
    Process process = new ProcessBuilder("true").start();
    assertTrue(process.waitFor(10, TimeUnit.SECONDS));
    return process.pid(); // reaped: gone until the kernel reuses it, far beyond this test
  }

  private static String firstLine(Process process) throws Exception {
    BufferedReader reader =
        new BufferedReader(new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8));
    // Bounded: the child prints within seconds or dies; a dead child ends the stream.
    // Lines before the address (a leftover warning on stderr, for one) are skipped.
    var line =
        java.util.concurrent.CompletableFuture.supplyAsync(
            () -> {
              try {
                String next;
                while ((next = reader.readLine()) != null && !next.startsWith("address ")) {
                  System.out.println("child: " + next);
                }
                return next;
              } catch (java.io.IOException e) {
                return null;
              }
            });
    String text = line.get(60, TimeUnit.SECONDS);
    assertTrue(text != null && text.startsWith("address "), "child said: " + text);
    return text;
  }

  /** The child JVM: one scenario, then "survived <scenario>" and exit 0. */
  public static final class Child {
    private Child() {}

    /**
     * Runs the scenario named by {@code args[0]}.
     *
     * @param args the scenario, and for {@code hold} the bind address (empty for none)
     * @throws Exception on failure (a non-zero exit)
     */
    public static void main(String[] args) throws Exception {
      String scenario = args[0];
      switch (scenario) {
        case "remove-after-peer-closed" -> removeAfterPeerClosed();
        case "reap-after-peer-closed" -> reapAfterPeerClosed();
        case "service-after-target" -> service(true);
        case "target-after-service" -> service(false);
        case "hold" -> hold(args.length > 1 ? args[1] : "");
        default -> throw new IllegalArgumentException(scenario);
      }
      System.out.println("survived " + scenario);
      System.out.flush();
    }

    /** The endpoint-level crash: fi_av_remove of a same-process peer after its fi_close. */
    static void removeAfterPeerClosed() {
      try (Arena arena = Arena.ofShared();
          LibfabricEndpoint initiator = LibfabricEndpoint.open(EndpointPolicy.of("shm"), SHM)) {
        initiator.openSlots(4);
        LibfabricEndpoint target = LibfabricEndpoint.open(EndpointPolicy.of("shm"), SHM);
        MemorySegment remote = arena.allocate(4096, 4096);
        ExposedRegion region = target.expose(remote, RemoteAccess.READ_WRITE);
        long peer = initiator.insertPeer(target.localAddress());
        writeOnce(initiator, target, peer, arena, region.advertisement());
        target.close();
        int rc = initiator.removePeer(peer);
        System.out.println("removePeer after the peer closed: " + rc);
      }
    }

    /**
     * The progress-time crash: a peer of this process serves a write and closes before the
     * initiator reads the answer. shm then takes the peer's lock in the peer's region to finish the
     * write; on 1.x, with the peer inserted under its own name, that region is the peer's own
     * mapping, unmapped by its close (SIGSEGV in {@code pthread_spin_trylock}, seen in CI). Under
     * the alias dma inserts it with, the initiator has a mapping of its own.
     */
    static void reapAfterPeerClosed() {
      try (Arena arena = Arena.ofShared();
          LibfabricEndpoint initiator = LibfabricEndpoint.open(EndpointPolicy.of("shm"), SHM)) {
        initiator.openSlots(4);
        LibfabricEndpoint target = LibfabricEndpoint.open(EndpointPolicy.of("shm"), SHM);
        MemorySegment remote = arena.allocate(1 << 16, 4096);
        ExposedRegion region = target.expose(remote, RemoteAccess.READ_WRITE);
        Advertisement ad = region.advertisement();
        long peer = initiator.insertPeer(target.localAddress());
        writeOnce(initiator, target, peer, arena, ad); // names exchanged
        MemorySegment local = arena.allocate(1 << 16, 4096).fill((byte) 9);
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        int rc;
        while ((rc =
                initiator.postWrite(
                    1, peer, local.address(), 1 << 16, 0, ad.remoteAddress(), ad.remoteKey()))
            == -11) {
          target.progress();
          if (System.nanoTime() > deadline) {
            throw new IllegalStateException("post stayed -FI_EAGAIN");
          }
        }
        if (rc != 0) {
          throw new IllegalStateException("post failed: " + rc);
        }
        // The target serves it (its bytes land) while the initiator reads nothing yet.
        while (remote.get(java.lang.foreign.ValueLayout.JAVA_BYTE, (1 << 16) - 1) != 9) {
          target.progress();
          if (System.nanoTime() > deadline) {
            throw new IllegalStateException("the target never served the write");
          }
        }
        // From 2.5 the write's check (ShmWriteCheck) follows it in the target's queue: served in
        // the same pass or the next few.
        for (int i = 0; i < 100; i++) {
          target.progress();
        }
        target.close();
        Loopback.Recorder sink = new Loopback.Recorder(4);
        while (sink.completed + sink.failed == 0) {
          initiator.reap(sink, 4);
          if (System.nanoTime() > deadline) {
            throw new IllegalStateException("the served write never completed");
          }
        }
        System.out.println("the served write: " + (sink.completed == 1 ? "done" : sink.message[1]));
      }
    }

    private static void writeOnce(
        FabricEndpoint initiator, FabricEndpoint target, long peer, Arena arena, Advertisement ad) {
      MemorySegment local = arena.allocate(4096, 4096).fill((byte) 7);
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
      int rc;
      while ((rc =
              initiator.postWrite(
                  0, peer, local.address(), 4096, 0, ad.remoteAddress(), ad.remoteKey()))
          == -11) {
        target.progress();
        initiator.reap(new Loopback.Recorder(4), 4);
        if (System.nanoTime() > deadline) {
          throw new IllegalStateException("post stayed -FI_EAGAIN");
        }
      }
      if (rc != 0) {
        throw new IllegalStateException("post failed: " + rc);
      }
      Loopback.Recorder sink = new Loopback.Recorder(4);
      while (sink.completed + sink.failed == 0) {
        target.progress();
        initiator.reap(sink, 4);
        if (System.nanoTime() > deadline) {
          throw new IllegalStateException("no completion in 30 s");
        }
      }
      if (sink.failed != 0) {
        throw new IllegalStateException("the write failed: " + sink.message[0]);
      }
    }

    /** What dma-bench does: a passive target and a service in one process, closed in an order. */
    static void service(boolean targetFirst) throws Exception {
      var completions = new LinkedBlockingQueue<Completion<Operands>>();
      try (Arena arena = Arena.ofShared()) {
        PassiveTarget target = PassiveTarget.start(SHM);
        FabricService<Operands> service = FabricService.start(SHM, completions::addAll);
        try {
          MemorySegment buffer = arena.allocate(4096, 4096);
          Advertisement ad = target.expose(buffer, RemoteAccess.READ_WRITE).advertisement();
          MemorySegment value = arena.allocate(4096).fill((byte) 42);
          service.submit(TransferRequest.write(7, ad, Operands.of(value)));
          Completion<Operands> done = completions.poll(30, TimeUnit.SECONDS);
          if (done == null || done.outcome().done() == null) {
            throw new IllegalStateException("the write did not succeed: " + done);
          }
        } finally {
          if (targetFirst) {
            target.close();
            service.close();
          } else {
            service.close();
            target.close();
          }
        }
      }
    }

    /** Opens one shm endpoint, prints its address, holds it until stdin ends. */
    static void hold(String bind) throws Exception {
      DmaConfiguration configuration =
          bind.isEmpty()
              ? SHM
              : DmaConfiguration.builder().providers("libfabric:shm").bind(bind).build();
      try (LibfabricEndpoint endpoint =
          LibfabricEndpoint.open(EndpointPolicy.of("shm"), configuration)) {
        String address =
            new String(endpoint.localAddress(), StandardCharsets.US_ASCII).replace("\0", "");
        System.out.println("address " + address);
        System.out.flush();
        System.in.readAllBytes();
      }
    }
  }
}
