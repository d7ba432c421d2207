package dev.dma.it;

import dev.dma.api.Advertisement;
import dev.dma.api.Checksum;
import dev.dma.api.Completion;
import dev.dma.api.Direction;
import dev.dma.api.DmaConfiguration;
import dev.dma.api.DmaException;
import dev.dma.api.Operands;
import dev.dma.api.TransferRequest;
import dev.dma.core.FabricService;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The serving side of {@link PartitionTest}, in its own JVM inside the server's network namespace:
 * a {@link FabricService} with short deadlines that writes to and reads from one {@link
 * PartitionTarget}. It prints {@code address <hex>}, then answers exactly one line per command on
 * stdin, always starting with the command's name, as {@code key=value} words (a free-text {@code
 * msg=} comes last):
 *
 * <ul>
 *   <li>{@code target <hex> <key> <remote-address>}: the target's advertisement; adds the peer
 *   <li>{@code address}: the service's current local address
 *   <li>{@code verify <label> <count> <seed> <timeoutMs>}: for each slot below {@code count},
 *       writes a pattern and reads it back, one at a time, with checksums; reports both CRCs per
 *       slot
 *   <li>{@code bench <count> <bytes>}: {@code count} sequential writes, then {@code count} at once
 *   <li>{@code burst <label> <count> <bytes>}: submits {@code count} writes at once, no checksum
 *   <li>{@code mark}: notes the moment the partition started
 *   <li>{@code await <label> <timeoutMs>}: waits for that group's completions, then reports it
 *   <li>{@code status <label>}: reports a group without waiting
 *   <li>{@code outstanding <timeoutMs>}: waits for {@link FabricService#outstanding()} to reach 0
 *   <li>{@code cpu}: the worker thread's CPU time and the wall clock, in nanoseconds
 *   <li>{@code addpeer}: adds the target's address again
 *   <li>{@code close <boundMs>}: closes the service on another thread, waiting at most {@code
 *       boundMs}; reports whether it returned and whether every transfer got exactly one
 *       completion, then exits (halting when close did not return)
 * </ul>
 *
 * <p>A command that throws answers {@code <command> error=<class> msg=<text>}.
 */
public final class PartitionServer {
  static final long CLIENT_ID = 1;

  private final FabricService<Op> service;
  private final long slotBytes;
  private final int slots;
  private final Map<Integer, Op> ops = new ConcurrentHashMap<>();
  private final AtomicInteger ids = new AtomicInteger();
  private final AtomicInteger duplicates = new AtomicInteger();
  private final AtomicInteger unknown = new AtomicInteger();
  private final Arena arena = Arena.ofShared();
  private final Object lock = new Object();
  private Advertisement target;
  private volatile long partitionNanos;
  private int nextSlot;

  /** One transfer: its operand, when it was submitted, and how it ended. */
  static final class Op implements Operands {
    final int id;
    final String label;
    final MemorySegment segment;
    volatile long submitNanos;
    volatile long completeNanos;
    volatile Completion<Op> completion;

    Op(int id, String label, MemorySegment segment) {
      this.id = id;
      this.label = label;
      this.segment = segment;
    }

    @Override
    public MemorySegment source() {
      return segment;
    }

    @Override
    public MemorySegment allocate(long lengthBytes) {
      return segment;
    }
  }

  private PartitionServer(DmaConfiguration configuration, int slots, long slotBytes) {
    this.slots = slots;
    this.slotBytes = slotBytes;
    this.service = FabricService.<Op>builder(configuration).completer(this::complete).start();
  }

  private void complete(List<Completion<Op>> batch) {
    long now = System.nanoTime();
    synchronized (lock) {
      for (Completion<Op> completion : batch) {
        Op op = completion.context();
        if (op == null || ops.get(op.id) != op) {
          unknown.incrementAndGet();
        } else if (op.completion != null) {
          duplicates.incrementAndGet();
        } else {
          op.completeNanos = now;
          op.completion = completion;
        }
      }
      lock.notifyAll();
    }
  }

  /**
   * Runs the server.
   *
   * @param args provider, bind address, completion deadline ms, progress deadline ms, close timeout
   *     ms, max in flight, slot count, slot bytes
   * @throws Exception when anything fails; the parent sees a non-zero exit
   */
  public static void main(String[] args) throws Exception {
    DmaConfiguration configuration =
        DmaConfiguration.builder()
            .providers(args[0])
            .bind(args[1])
            .completionDeadline(Duration.ofMillis(Long.parseLong(args[2])))
            .progressDeadline(Duration.ofMillis(Long.parseLong(args[3])))
            .closeTimeout(Duration.ofMillis(Long.parseLong(args[4])))
            .maxInFlight(Integer.parseInt(args[5]))
            .build();
    PartitionServer server =
        new PartitionServer(configuration, Integer.parseInt(args[6]), Long.parseLong(args[7]));
    System.out.println("address " + Advertisement.encodeHex(server.service.localAddress()));
    System.out.flush();
    BufferedReader in =
        new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    String line;
    while ((line = in.readLine()) != null) {
      String[] words = line.split(" ");
      String answer;
      try {
        answer = server.handle(words);
      } catch (Exception | AssertionError failure) {
        answer =
            words[0]
                + " error="
                + failure.getClass().getSimpleName()
                + " msg="
                + oneLine(failure.getMessage());
      }
      System.out.println(answer);
      System.out.flush();
      if (words[0].equals("close")) {
        if (answer.contains("returned=false")) {
          Runtime.getRuntime().halt(3);
        }
        return;
      }
    }
    server.service.close();
  }

  private String handle(String[] words) throws Exception {
    return switch (words[0]) {
      case "target" -> {
        target = Advertisement.fromFields(List.of(words[1], words[2], words[3]));
        service.addPeer(CLIENT_ID, target.address());
        yield "target ok";
      }
      case "address" -> "address hex=" + Advertisement.encodeHex(service.localAddress());
      case "verify" ->
          verify(
              words[1],
              Integer.parseInt(words[2]),
              Long.parseLong(words[3]),
              Long.parseLong(words[4]));
      case "bench" -> bench(Integer.parseInt(words[1]), Long.parseLong(words[2]));
      case "burst" -> {
        long start = System.nanoTime();
        int accepted = burst(words[1], Integer.parseInt(words[2]), Long.parseLong(words[3]));
        yield "burst label="
            + words[1]
            + " accepted="
            + accepted
            + " us="
            + micros(System.nanoTime() - start);
      }
      case "mark" -> {
        partitionNanos = System.nanoTime();
        yield "mark ok";
      }
      case "await" -> {
        awaitLabel(
            words[1], System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(Long.parseLong(words[2])));
        yield status("await", words[1]);
      }
      case "status" -> status("status", words[1]);
      case "outstanding" -> {
        long start = System.nanoTime();
        long deadline = start + TimeUnit.MILLISECONDS.toNanos(Long.parseLong(words[1]));
        while (service.outstanding() != 0 && System.nanoTime() < deadline) {
          Thread.sleep(5);
        }
        yield "outstanding value="
            + service.outstanding()
            + " waitedms="
            + millis(System.nanoTime() - start);
      }
      case "cpu" -> cpu();
      case "addpeer" -> {
        long start = System.nanoTime();
        service.addPeer(CLIENT_ID, target.address());
        yield "addpeer ok us=" + micros(System.nanoTime() - start);
      }
      case "close" -> close(Long.parseLong(words[1]));
      default -> words[0] + " error=unknown msg=" + String.join(" ", words);
    };
  }

  private TransferRequest<Op> request(Op op, int slot, Direction direction, boolean checksum) {
    return new TransferRequest<>(
        CLIENT_ID,
        target.address(),
        target.remoteKey(),
        target.remoteAddress() + slot * slotBytes,
        direction,
        checksum ? Checksum.CRC32C : Checksum.NONE,
        op,
        0,
        TransferRequest.UNKNOWN_LENGTH);
  }

  private Op newOp(String label, MemorySegment segment) {
    Op op = new Op(ids.incrementAndGet(), label, segment);
    ops.put(op.id, op);
    return op;
  }

  private boolean submit(Op op, TransferRequest<Op> request) {
    op.submitNanos = System.nanoTime();
    boolean accepted = service.submit(request);
    if (!accepted) {
      ops.remove(op.id);
    }
    return accepted;
  }

  private int burst(String label, int count, long bytes) {
    MemorySegment source = arena.allocate(bytes, 4096);
    Patterns.fill(source, count);
    int accepted = 0;
    for (int i = 0; i < count; i++) {
      Op op = newOp(label, source);
      int slot = nextSlot++ % slots;
      if (submit(op, request(op, slot, Direction.TO_PEER, false))) {
        accepted++;
      }
    }
    return accepted;
  }

  /** Waits for one op; false when it did not complete before the deadline. */
  private boolean awaitOp(Op op, long deadlineNanos) throws InterruptedException {
    synchronized (lock) {
      while (op.completion == null) {
        long left = deadlineNanos - System.nanoTime();
        if (left <= 0) {
          return false;
        }
        TimeUnit.NANOSECONDS.timedWait(lock, left);
      }
      return true;
    }
  }

  private void awaitLabel(String label, long deadlineNanos) throws InterruptedException {
    for (Op op : labelled(label)) {
      if (!awaitOp(op, deadlineNanos)) {
        return;
      }
    }
  }

  private List<Op> labelled(String label) {
    List<Op> list = new ArrayList<>();
    for (Op op : ops.values()) {
      if (op.label.equals(label)) {
        list.add(op);
      }
    }
    list.sort((a, b) -> Integer.compare(a.id, b.id));
    return list;
  }

  private String verify(String label, int count, long seed, long timeoutMs)
      throws InterruptedException {
    long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMs);
    List<String> written = new ArrayList<>();
    List<String> read = new ArrayList<>();
    long[] writeNanos = new long[count];
    long[] readNanos = new long[count];
    boolean ok = true;
    String failure = "";
    int done = 0;
    for (int slot = 0; slot < count && ok; slot++) {
      MemorySegment source = arena.allocate(slotBytes, 4096);
      Patterns.fill(source, seed + slot);
      Op write = newOp(label, source);
      if (!submit(write, request(write, slot, Direction.TO_PEER, true))) {
        ok = false;
        failure = "write to slot " + slot + " not accepted";
        break;
      }
      if (!awaitOp(write, deadline)) {
        ok = false;
        failure = "write to slot " + slot + " did not complete within " + timeoutMs + " ms";
        break;
      }
      writeNanos[slot] = write.completeNanos - write.submitNanos;
      if (!write.completion.outcome().isDone()) {
        ok = false;
        failure =
            "write to slot " + slot + " failed: " + describe(write.completion.outcome().error());
        break;
      }
      written.add(Integer.toString(write.completion.outcome().done().checksum().orElseThrow()));
      MemorySegment landing = arena.allocate(slotBytes, 4096);
      Op back = newOp(label, landing);
      if (!submit(back, request(back, slot, Direction.fromPeer(slotBytes), true))) {
        ok = false;
        failure = "read of slot " + slot + " not accepted";
        break;
      }
      if (!awaitOp(back, deadline)) {
        ok = false;
        failure = "read of slot " + slot + " did not complete within " + timeoutMs + " ms";
        break;
      }
      readNanos[slot] = back.completeNanos - back.submitNanos;
      if (!back.completion.outcome().isDone()) {
        ok = false;
        failure =
            "read of slot " + slot + " failed: " + describe(back.completion.outcome().error());
        break;
      }
      read.add(Integer.toString(back.completion.outcome().done().checksum().orElseThrow()));
      done++;
    }
    return "verify label="
        + label
        + " ok="
        + ok
        + " done="
        + done
        + " written="
        + (written.isEmpty() ? "-" : String.join(",", written))
        + " read="
        + (read.isEmpty() ? "-" : String.join(",", read))
        + " writeus="
        + spread(Arrays.copyOf(writeNanos, done))
        + " readus="
        + spread(Arrays.copyOf(readNanos, done))
        + " msg="
        + oneLine(failure);
  }

  private String bench(int count, long bytes) throws InterruptedException {
    MemorySegment source = arena.allocate(bytes, 4096);
    Patterns.fill(source, 99);
    long[] one = new long[count];
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
    for (int i = 0; i < count; i++) {
      Op op = newOp("bench-seq", source);
      if (!submit(op, request(op, i % slots, Direction.TO_PEER, false)) || !awaitOp(op, deadline)) {
        return "bench ok=false msg=sequential write "
            + i
            + " not accepted or not completed in 20 s";
      }
      if (!op.completion.outcome().isDone()) {
        return "bench ok=false msg=" + oneLine(describe(op.completion.outcome().error()));
      }
      one[i] = op.completeNanos - op.submitNanos;
    }
    long start = System.nanoTime();
    burst("bench-burst", count, bytes);
    awaitLabel("bench-burst", deadline);
    long elapsed = System.nanoTime() - start;
    int failed = 0;
    for (Op op : labelled("bench-burst")) {
      if (op.completion == null || !op.completion.outcome().isDone()) {
        failed++;
      }
    }
    double mbps = count * bytes / (elapsed / 1e9) / 1e6;
    return String.format(
        "bench ok=%s bytes=%d seqn=%d sequs=%s burstn=%d burstus=%d burstmbps=%.0f failed=%d",
        failed == 0, bytes, count, spread(one), count, micros(elapsed), mbps, failed);
  }

  private String status(String verb, String label) {
    List<Op> list = labelled(label);
    int ok = 0;
    int failed = 0;
    int pending = 0;
    long maxMs = -1;
    long minMs = Long.MAX_VALUE;
    long maxAfterMark = -1;
    Map<String, Integer> reasons = new TreeMap<>();
    TreeSet<String> messages = new TreeSet<>();
    for (Op op : list) {
      Completion<Op> completion = op.completion;
      if (completion == null) {
        pending++;
        continue;
      }
      long ms = millis(op.completeNanos - op.submitNanos);
      maxMs = Math.max(maxMs, ms);
      minMs = Math.min(minMs, ms);
      if (partitionNanos != 0) {
        maxAfterMark = Math.max(maxAfterMark, millis(op.completeNanos - partitionNanos));
      }
      if (completion.outcome().isDone()) {
        ok++;
      } else {
        failed++;
        DmaException error = completion.outcome().error();
        reasons.merge(error.reason().name(), 1, Integer::sum);
        messages.add(error.getMessage());
      }
    }
    StringBuilder reasonText = new StringBuilder();
    reasons.forEach(
        (reason, n) ->
            reasonText
                .append(reasonText.isEmpty() ? "" : ",")
                .append(reason)
                .append(':')
                .append(n));
    return verb
        + " label="
        + label
        + " n="
        + list.size()
        + " ok="
        + ok
        + " failed="
        + failed
        + " pending="
        + pending
        + " minms="
        + (minMs == Long.MAX_VALUE ? -1 : minMs)
        + " maxms="
        + maxMs
        + " maxaftermarkms="
        + maxAfterMark
        + " outstanding="
        + service.outstanding()
        + " duplicates="
        + duplicates.get()
        + " reasons="
        + (reasonText.isEmpty() ? "-" : reasonText)
        + " msg="
        + oneLine(String.join(" | ", messages));
  }

  private String cpu() {
    ThreadMXBean threads = ManagementFactory.getThreadMXBean();
    for (Thread thread : Thread.getAllStackTraces().keySet()) {
      if (thread.getName().startsWith("fabric-")) {
        long ns = threads.getThreadCpuTime(thread.threadId());
        return "cpu thread="
            + thread.getName()
            + " ns="
            + ns
            + " wallns="
            + System.nanoTime()
            + " state="
            + thread.getState();
      }
    }
    return "cpu error=nothread msg=no thread named fabric-NN";
  }

  private String close(long boundMs) throws InterruptedException {
    long start = System.nanoTime();
    Thread closer = new Thread(service::close, "partition-closer");
    closer.setDaemon(true);
    closer.start();
    closer.join(boundMs);
    boolean returned = !closer.isAlive();
    long elapsed = System.nanoTime() - start;
    int missing = 0;
    for (Op op : ops.values()) {
      if (op.completion == null) {
        missing++;
      }
    }
    return "close returned="
        + returned
        + " ms="
        + millis(elapsed)
        + " submitted="
        + ops.size()
        + " missing="
        + missing
        + " duplicates="
        + duplicates.get()
        + " unknown="
        + unknown.get()
        + " outstanding="
        + service.outstanding()
        + " running="
        + service.isRunning();
  }

  private static String describe(DmaException error) {
    return error.reason() + " " + error.getMessage();
  }

  private static String spread(long[] nanos) {
    if (nanos.length == 0) {
      return "-";
    }
    long[] sorted = nanos.clone();
    Arrays.sort(sorted);
    return "p50:"
        + micros(sorted[sorted.length / 2])
        + ",p90:"
        + micros(sorted[(int) (sorted.length * 0.9)])
        + ",max:"
        + micros(sorted[sorted.length - 1]);
  }

  private static long micros(long nanos) {
    return TimeUnit.NANOSECONDS.toMicros(nanos);
  }

  private static long millis(long nanos) {
    return TimeUnit.NANOSECONDS.toMillis(nanos);
  }

  private static String oneLine(String text) {
    return text == null ? "" : text.replace('\n', ' ').replace('\r', ' ');
  }
}
