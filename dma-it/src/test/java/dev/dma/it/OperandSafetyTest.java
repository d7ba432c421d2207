package dev.dma.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.dma.api.Advertisement;
import dev.dma.api.BatchCompleter;
import dev.dma.api.Completion;
import dev.dma.api.Direction;
import dev.dma.api.DmaConfiguration;
import dev.dma.api.DmaException;
import dev.dma.api.Operands;
import dev.dma.api.TransferRequest;
import dev.dma.core.FabricService;
import dev.dma.libfabric.Libfabric;
import dev.dma.libfabric.LibfabricProvider;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * dma's operand rule on every real libfabric provider: once a transfer's completion is delivered,
 * success or failure, nothing reads its source or writes its landing buffer again. The target runs
 * in a child JVM ({@link OperandTarget}) that the test SIGSTOPs, so transfers of 4 KiB, 64 KiB and
 * 8 MiB fail by the 1 s completion deadline (or complete, where the provider moves the data without
 * the target: shm). Inside the completer callback each write's source is refilled with {@link
 * #REFILL} and each read's landing buffer is snapshotted; after SIGCONT and time for the target to
 * progress, the target must hold no {@code REFILL} byte and no landing buffer may have changed.
 * Three causes of failure: the transfer's own deadline, another client's deadline (the endpoint
 * reset fails or re-posts every transfer in flight), and {@code close(timeout)}.
 *
 * <p>What is asserted is the outcome for the operands and the target's memory only: whether a
 * transfer failed, succeeded or was re-posted after a reset is the worker's business.
 */
class OperandSafetyTest {
  private static final long[] SIZES = {4 << 10, 64 << 10, 8 << 20};
  private static final long SPAN = Arrays.stream(SIZES).sum();

  /** Writes land in the first {@link #SPAN} bytes, reads come from the second. */
  private static final long REGION = 2 * SPAN;

  private static final byte ORIGINAL = 0x11;
  private static final byte REFILL = (byte) 0xBB;
  private static final byte LANDING = (byte) 0xCC;
  private static final Duration DEADLINE = Duration.ofSeconds(1);

  /**
   * How long a resumed target gets to act on whatever it still holds: a window in which a late
   * landing shows itself, asserted right after; no wait depends on it.
   */
  private static final long PROGRESS_MS = 800;

  private static final Duration ANSWER = Duration.ofSeconds(30);

  /**
   * One provider per run: {@code net-or-tcp} is {@code net} where the library has it (1.x) and
   * {@code tcp} (the RDM provider of 2.x) otherwise.
   */
  @ParameterizedTest(name = "{0}")
  @ValueSource(strings = {"net-or-tcp", "tcp;ofi_rxm", "sockets", "shm", "udp;ofi_rxd"})
  @Timeout(value = 180, unit = TimeUnit.SECONDS)
  void noOperandIsTouchedAfterItsCompletionIsDelivered(String which) throws Exception {
    assumeTrue(Libfabric.availability().available(), Libfabric.availability().reason());
    String provider = resolve(which);
    everyCause(provider, provider.equals("libfabric:shm") ? "-" : "127.0.0.1");
  }

  /**
   * The same on {@code local}, whose server copies by itself: a stopped target delays nothing, so
   * every transfer completes, and the refill after each completion must still never reach the
   * target.
   */
  @org.junit.jupiter.api.Test
  @Timeout(value = 180, unit = TimeUnit.SECONDS)
  void noOperandIsTouchedAfterItsCompletionIsDeliveredOnLocal() throws Exception {
    everyCause("local", "-");
  }

  private void everyCause(String provider, String bind) throws Exception {
    List<List<Shape>> cycles = cycles(provider);
    try (Child first = Child.start(provider, bind);
        Child second = Child.start(provider, bind)) {
      for (List<Shape> cycle : cycles) {
        ownDeadline(provider, bind, first, cycle);
      }
      for (List<Shape> cycle : cycles) {
        anotherClientsReset(provider, bind, first, second, cycle);
      }
      for (List<Shape> cycle : cycles) {
        closeWithTimeout(provider, bind, first, cycle);
      }
    }
  }

  /** One transfer: its size and direction, and where it lands or comes from in the region. */
  private record Shape(long size, boolean write, long offset) {}

  /**
   * The transfers submitted while one target is stopped. Every provider but shm takes all six at
   * once. shm takes one: a stopped target drains no command, so a second post answers {@code
   * -FI_EAGAIN} and fails unposted, never reaching the path under test; so on shm each transfer
   * gets a stop of its own.
   */
  private static List<List<Shape>> cycles(String provider) {
    List<Shape> all = new ArrayList<>();
    long offset = 0;
    for (long size : SIZES) {
      all.add(new Shape(size, true, offset));
      all.add(new Shape(size, false, SPAN + offset));
      offset += size;
    }
    if (!provider.equals("libfabric:shm")) {
      return List.of(all);
    }
    return all.stream().map(List::of).toList();
  }

  /** The target is stopped for good: every transfer meets its own completion deadline. */
  private void ownDeadline(String provider, String bind, Child target, List<Shape> cycle)
      throws Exception {
    target.reset();
    Recorder recorder = new Recorder();
    try (Arena arena = Arena.ofShared();
        FabricService<Op> service = start(provider, bind, recorder)) {
      target.insert(service.localAddress());
      warmUp(service, recorder, 1, target, arena);
      List<Op> ops = new ArrayList<>();
      target.stop();
      try {
        submitAll(service, 1, target, arena, ops, cycle);
        recorder.await(ops.size());
      } finally {
        target.cont();
      }
      Thread.sleep(PROGRESS_MS);
      check("own deadline", recorder, ops, List.of(target));
    }
  }

  /**
   * The second target is stopped for good and meets the deadline, which resets the endpoint; the
   * first is only slow (stopped until after that reset), so its transfers are in flight at the
   * reset: failed or re-posted, the refill must never reach it.
   */
  private void anotherClientsReset(
      String provider, String bind, Child healthy, Child stuck, List<Shape> cycle)
      throws Exception {
    healthy.reset();
    stuck.reset();
    Recorder recorder = new Recorder();
    try (Arena arena = Arena.ofShared();
        FabricService<Op> service = start(provider, bind, recorder)) {
      healthy.insert(service.localAddress());
      stuck.insert(service.localAddress());
      warmUp(service, recorder, 1, healthy, arena);
      warmUp(service, recorder, 2, stuck, arena);
      List<Op> ops = new ArrayList<>();
      long started = System.nanoTime();
      stuck.stop();
      healthy.stop();
      try {
        submitAll(service, 2, stuck, arena, ops, cycle);
        // A fixed stagger, bounding nothing: the healthy target's transfers are posted 300 ms
        // after the stuck one's, so they are in flight, not yet due, when its deadline resets.
        Thread.sleep(300);
        submitAll(service, 1, healthy, arena, ops, cycle);
        // Past the stuck target's deadline (and so the reset), resume the slow one.
        long untilResume = DEADLINE.toMillis() * 3 / 2 - (System.nanoTime() - started) / 1_000_000;
        Thread.sleep(Math.max(0, untilResume));
        healthy.cont();
        recorder.await(ops.size());
      } finally {
        healthy.cont();
        stuck.cont();
      }
      Thread.sleep(PROGRESS_MS);
      check("another client's reset", recorder, ops, List.of(healthy, stuck));
    }
  }

  /** The service is closed with a short timeout while the target is stopped. */
  private void closeWithTimeout(String provider, String bind, Child target, List<Shape> cycle)
      throws Exception {
    target.reset();
    Recorder recorder = new Recorder();
    List<Op> ops = new ArrayList<>();
    try (Arena arena = Arena.ofShared()) {
      FabricService<Op> service = start(provider, bind, recorder);
      try {
        target.insert(service.localAddress());
        warmUp(service, recorder, 1, target, arena);
        target.stop();
        submitAll(service, 1, target, arena, ops, cycle);
        // A fixed delay, bounding nothing: the transfers are posted before the close begins.
        Thread.sleep(200);
        service.close(Duration.ofMillis(300));
        recorder.await(ops.size());
      } finally {
        target.cont();
        service.close();
      }
      Thread.sleep(PROGRESS_MS);
      check("close(300 ms)", recorder, ops, List.of(target));
    }
  }

  private static FabricService<Op> start(String provider, String bind, Recorder recorder) {
    DmaConfiguration.Builder builder =
        DmaConfiguration.builder()
            .providers(provider)
            .completionDeadline(DEADLINE)
            .progressDeadline(DEADLINE)
            .closeTimeout(Duration.ofSeconds(2));
    if (!bind.equals("-")) {
      builder.bind(bind);
    }
    return FabricService.<Op>builder(builder.build()).completer(recorder).start();
  }

  /**
   * One small write and read that must succeed while the target runs: connections and shm's peer
   * mapping are set up by then, so the transfers submitted after the SIGSTOP are really posted and
   * in flight (a first transfer to a stopped target only ever answers {@code -FI_EAGAIN}).
   */
  private static void warmUp(
      FabricService<Op> service, Recorder recorder, long client, Child target, Arena arena)
      throws InterruptedException {
    Op write = new Op(-1 - (int) client * 2, target, true, 0, arena.allocate(4096, 4096));
    Op read = new Op(-2 - (int) client * 2, target, false, SPAN, arena.allocate(4096, 4096));
    submit(service, client, target, write, Direction.TO_PEER);
    submit(service, client, target, read, Direction.fromPeer(4096));
    recorder.await(2);
    for (Op op : List.of(write, read)) {
      Completion<Op> completion = recorder.byId.get(op.id);
      assertTrue(
          completion.outcome().isDone(),
          () -> "warm-up transfer failed: " + completion.outcome().error());
    }
  }

  /** The cycle's transfers to one target, each from its own buffer. */
  private static void submitAll(
      FabricService<Op> service,
      long client,
      Child target,
      Arena arena,
      List<Op> ops,
      List<Shape> cycle) {
    for (Shape shape : cycle) {
      MemorySegment segment = arena.allocate(shape.size(), 4096);
      segment.fill(shape.write() ? ORIGINAL : LANDING);
      Op op = new Op(ops.size(), target, shape.write(), shape.offset(), segment);
      ops.add(op);
      submit(
          service,
          client,
          target,
          op,
          shape.write() ? Direction.TO_PEER : Direction.fromPeer(shape.size()));
    }
  }

  private static void submit(
      FabricService<Op> service, long client, Child target, Op op, Direction direction) {
    TransferRequest<Op> request =
        TransferRequest.builder(op)
            .clientId(client)
            .advertisement(target.ad)
            .remoteAddress(target.ad.remoteAddress() + op.offset)
            .direction(direction)
            .build();
    assertTrue(service.submit(request), "submit refused");
  }

  private static void check(String cause, Recorder recorder, List<Op> ops, List<Child> targets)
      throws Exception {
    StringBuilder outcomes = new StringBuilder();
    for (Op op : ops) {
      Completion<Op> completion = recorder.byId.get(op.id);
      outcomes
          .append("\n  ")
          .append(op.write ? "write " : "read ")
          .append(op.segment.byteSize() >> 10)
          .append(" KiB to target ")
          .append(targets.indexOf(op.target))
          .append(": ")
          .append(completion.outcome().isDone() ? "done" : describe(completion.outcome().error()));
    }
    System.out.println("OperandSafetyTest " + cause + ":" + outcomes);
    for (Op op : ops) {
      String what =
          cause
              + ": "
              + (op.write ? "write" : "read")
              + " of "
              + op.segment.byteSize()
              + " B, "
              + (recorder.byId.get(op.id).outcome().isDone() ? "succeeded" : "failed");
      if (op.write) {
        assertEquals(
            0,
            op.target.count(op.offset, op.segment.byteSize(), REFILL),
            what + ": the target holds bytes written into the source after the completion");
      } else {
        byte[] now = op.segment.toArray(ValueLayout.JAVA_BYTE);
        assertTrue(
            Arrays.equals(recorder.snapshots.get(op.id), now),
            what + ": the landing buffer changed after the completion");
      }
    }
  }

  private static String describe(DmaException error) {
    String message = error.getMessage();
    return error.reason()
        + " ("
        + (message.length() > 90 ? message.substring(0, 90) + "..." : message)
        + ")";
  }

  /** The provider name to configure, or an assumption failure when the library lacks it. */
  private static String resolve(String which) {
    if (which.equals("net-or-tcp")) {
      return exists("net") ? "libfabric:net" : resolve("tcp");
    }
    assumeTrue(
        exists(which),
        "libfabric "
            + Libfabric.versionText(Libfabric.version())
            + " has no RDM provider "
            + which);
    return LibfabricProvider.PREFIX + which;
  }

  /** Whether the library serves RDM with RMA under exactly that provider name. */
  private static boolean exists(String name) {
    return Libfabric.serves(LibfabricProvider.policyFor(LibfabricProvider.PREFIX + name));
  }

  /** One transfer's context; refilled or snapshotted by {@link Recorder}. */
  private record Op(int id, Child target, boolean write, long offset, MemorySegment segment)
      implements Operands {
    @Override
    public MemorySegment source() {
      return segment;
    }

    @Override
    public MemorySegment allocate(long lengthBytes) {
      return segment;
    }
  }

  /**
   * The completer: a delivered write's source is refilled at once, a delivered read's landing
   * buffer is copied, before anything else can happen.
   */
  private static final class Recorder implements BatchCompleter<Op> {
    final ConcurrentHashMap<Integer, Completion<Op>> byId = new ConcurrentHashMap<>();
    final ConcurrentHashMap<Integer, byte[]> snapshots = new ConcurrentHashMap<>();
    private final LinkedBlockingQueue<Integer> delivered = new LinkedBlockingQueue<>();

    @Override
    public void complete(List<Completion<Op>> batch) {
      for (Completion<Op> completion : batch) {
        Op op = completion.context();
        if (op.write) {
          op.segment.fill(REFILL);
        } else {
          snapshots.put(op.id, op.segment.toArray(ValueLayout.JAVA_BYTE));
        }
        byId.put(op.id, completion);
        delivered.add(op.id);
      }
    }

    void await(int count) throws InterruptedException {
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
      for (int i = 0; i < count; i++) {
        long left = deadline - System.nanoTime();
        Integer id = left <= 0 ? null : delivered.poll(left, TimeUnit.NANOSECONDS);
        assertTrue(id != null, "only " + i + " of " + count + " completions within 60 s");
      }
    }
  }

  /**
   * The child JVM, over {@link LineChild} (bounded waits for its answers): on close it is resumed,
   * asked to quit, and killed (with its shm files removed) when it does not.
   */
  private static final class Child implements AutoCloseable {
    private static int started;

    final LineChild child;
    final Advertisement ad;

    private Child(LineChild child) throws Exception {
      this.child = child;
      String first = child.expect("advertisement ", ANSWER);
      this.ad = Advertisement.fromFields(List.of(first.substring(14).split(" ")));
    }

    static Child start(String provider, String bind) throws Exception {
      List<String> command =
          new ArrayList<>(
              List.of(
                  Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                  "--enable-native-access=ALL-UNNAMED",
                  "-XX:TieredStopAtLevel=1"));
      String library = System.getProperty("dma.libfabric.library");
      if (library != null) {
        command.add("-Ddma.libfabric.library=" + library);
      }
      command.addAll(
          List.of(
              "-cp",
              System.getProperty("java.class.path"),
              OperandTarget.class.getName(),
              provider,
              bind,
              Long.toString(REGION)));
      LineChild child = LineChild.start("operand-safety", "target-" + ++started, command);
      try {
        return new Child(child);
      } catch (Exception | Error failed) {
        child.kill();
        throw failed;
      }
    }

    private String ask(String command) throws InterruptedException {
      return child.ask(command, ANSWER);
    }

    void insert(byte[] address) throws InterruptedException {
      ask("insert " + Advertisement.encodeHex(address));
    }

    /** Zeroes the exposed memory (no byte equals {@link #REFILL}). */
    void reset() throws InterruptedException {
      ask("set 0");
    }

    long count(long offset, long length, byte value) throws InterruptedException {
      return Long.parseLong(
          ask("count " + offset + " " + length + " " + (value & 0xff)).substring(6));
    }

    void stop() throws Exception {
      signal("STOP");
    }

    void cont() throws Exception {
      signal("CONT");
    }

    private void signal(String name) throws Exception {
      Process kill =
          new ProcessBuilder("kill", "-" + name, Long.toString(child.pid()))
              .redirectErrorStream(true)
              .start();
      assertTrue(kill.waitFor(10, TimeUnit.SECONDS), "kill -" + name + " hung");
      assertEquals(0, kill.exitValue(), "kill -" + name + " " + child.pid());
    }

    @Override
    public void close() throws IOException {
      try {
        if (child.isAlive()) {
          new ProcessBuilder("kill", "-CONT", Long.toString(child.pid()))
              .start()
              .waitFor(10, TimeUnit.SECONDS);
          child.send("quit");
        }
        if (!child.waitForExit(Duration.ofSeconds(20))) {
          child.kill();
          child.waitForExit(Duration.ofSeconds(10));
        }
      } catch (InterruptedException interrupted) {
        Thread.currentThread().interrupt();
        child.kill();
      } finally {
        removeShmFiles(child.pid());
      }
    }

    /** A killed shm target cannot unlink its {@code /dev/shm/<pid>:<uid>:<index>} files. */
    private static void removeShmFiles(long pid) throws IOException {
      Path dir = Path.of("/dev/shm");
      if (!Files.isDirectory(dir)) {
        return;
      }
      try (DirectoryStream<Path> files = Files.newDirectoryStream(dir, pid + ":*")) {
        for (Path file : files) {
          Files.deleteIfExists(file);
        }
      }
    }
  }
}
