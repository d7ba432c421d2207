package dev.dma.it;

import dev.dma.api.Advertisement;
import dev.dma.api.Checksum;
import dev.dma.api.Completion;
import dev.dma.api.DmaConfiguration;
import dev.dma.api.DmaException;
import dev.dma.api.Operands;
import dev.dma.api.TransferDone;
import dev.dma.api.TransferRequest;
import dev.dma.core.DeviceHealth;
import dev.dma.core.DmaService.Offer;
import dev.dma.core.FabricServiceGroup;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicIntegerArray;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;

/**
 * The serving side of {@link RailHealthTcpTest}, in its own JVM inside the server's namespace: a
 * {@link FabricServiceGroup} of one tcp device per rail (each bound to its rail's address, so each
 * device's connections take its own veth), reading 4 KiB with CRC-32C from every client at a fixed
 * window, and a one-device group on the last rail alone for the comparison figure. It prints {@code
 * ready}, then answers one line per command on stdin, starting with the command's name:
 *
 * <ul>
 *   <li>{@code client <index> <crc> <advertisement fields...>}: adds client {@code index + 1}
 *   <li>{@code start} / {@code hold} / {@code resume}: the group's read loop; {@code hold} waits
 *       for every read to complete
 *   <li>{@code rate <ms>}: the group's successful reads over the next {@code ms}
 *   <li>{@code solo <ms>}: the same loop over the one-device group, for {@code ms} (the group's
 *       loop held meanwhile by the caller)
 *   <li>{@code health}: each device's state, faults, pauses, probes and failovers
 *   <li>{@code stop}: holds the loop and reports every count (missing, duplicate, failed by reason,
 *       bad checksum)
 * </ul>
 */
public final class RailServer {
  static final long READ_BYTES = 4096;

  private final List<Advertisement> ads = new ArrayList<>();
  private final List<Integer> crcs = new ArrayList<>();
  private final Arena arena = Arena.ofShared();

  /** The test's phase (before the cut, cut, paused, healed), named in failure counts. */
  private volatile String phase = "warm";

  private RailServer() {}

  /** One read: the client it reads from, its landing buffer, and how it ended. */
  static final class Op implements Operands {
    final int id;
    final int client;
    final int buffer;
    final MemorySegment segment;
    volatile Completion<Op> completion;

    Op(int id, int client, int buffer, MemorySegment segment) {
      this.id = id;
      this.client = client;
      this.buffer = buffer;
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

  /**
   * Keeps {@code window} reads in flight on one group from a submitting thread of its own, and
   * checks each completion (once, with the right bytes) on the group's completer threads.
   */
  final class Driver {
    final int window;
    final MemorySegment[] buffers;
    final BlockingQueue<Integer> free;
    final Map<Integer, Op> ops = new ConcurrentHashMap<>();
    final AtomicLong submitted = new AtomicLong();
    final AtomicLong completed = new AtomicLong();
    final AtomicLong duplicates = new AtomicLong();
    final AtomicLong unknown = new AtomicLong();
    final AtomicLong ok = new AtomicLong();
    final AtomicLong badCrc = new AtomicLong();
    final AtomicLong moved = new AtomicLong();
    final Map<String, AtomicLong> failed = new ConcurrentHashMap<>();
    FabricServiceGroup<Op> group;

    // Clients to add again: PEER_UNREACHABLE is answered with addPeer, as an application does (the
    // group's documented answer), off the completer thread since addPeer waits for every worker.
    final AtomicIntegerArray readd = new AtomicIntegerArray(64);
    final AtomicLong readds = new AtomicLong();
    private volatile boolean running;
    private Thread submitter;
    private int nextId;

    Driver(int window) {
      this.window = window;
      this.buffers = new MemorySegment[window];
      this.free = new ArrayBlockingQueue<>(window);
      for (int i = 0; i < window; i++) {
        buffers[i] = arena.allocate(READ_BYTES, 4096);
        free.add(i);
      }
    }

    void complete(List<Completion<Op>> batch) {
      for (Completion<Op> completion : batch) {
        Op op = completion.context();
        if (op == null || ops.get(op.id) != op) {
          unknown.incrementAndGet();
          continue;
        }
        synchronized (op) {
          if (op.completion != null) {
            duplicates.incrementAndGet();
            continue;
          }
          op.completion = completion;
        }
        if (completion.outcome() instanceof TransferDone done) {
          boolean right =
              done.bytes() == READ_BYTES
                  && done.checksum().isPresent()
                  && done.checksum().getAsInt() == crcs.get(op.client);
          if (!right) {
            badCrc.incrementAndGet();
          }
          ok.incrementAndGet();
          if (completion.devices() > 1) {
            moved.incrementAndGet();
          }
        } else {
          if (completion.outcome().error().reason() == DmaException.Reason.PEER_UNREACHABLE) {
            readd.set(op.client, 1);
          }
          String reason = completion.outcome().error().reason().name() + "@" + phase;
          long n = failed.computeIfAbsent(reason, r -> new AtomicLong()).incrementAndGet();
          if (n <= 3) {
            System.err.println(
                "[rail-server] failed in phase "
                    + phase
                    + " after "
                    + completion.posts()
                    + " posts on "
                    + completion.devices()
                    + " devices: "
                    + completion.outcome().error().getMessage());
          }
        }
        completed.incrementAndGet();
        free.add(op.buffer);
      }
    }

    /** Re-adds, every 100 ms, the clients a PEER_UNREACHABLE named; runs until the JVM exits. */
    void readdLoop() {
      while (true) {
        try {
          Thread.sleep(100);
        } catch (InterruptedException interrupted) {
          return;
        }
        for (int i = 0; i < ads.size(); i++) {
          if (readd.getAndSet(i, 0) == 1) {
            try {
              group.addPeer(i + 1, ads.get(i).address());
              readds.incrementAndGet();
            } catch (RuntimeException refused) {
              System.err.println("[rail-server] addPeer of client " + (i + 1) + ": " + refused);
            }
          }
        }
      }
    }

    void start() {
      running = true;
      submitter = new Thread(this::submitLoop, "rail-submitter");
      submitter.setDaemon(true);
      submitter.start();
    }

    private void submitLoop() {
      while (running) {
        Integer buffer;
        try {
          buffer = free.poll(50, TimeUnit.MILLISECONDS);
        } catch (InterruptedException interrupted) {
          return;
        }
        if (buffer == null) {
          continue;
        }
        int id = nextId++;
        int client = id % ads.size();
        Op op = new Op(id, client, buffer, buffers[buffer]);
        ops.put(id, op);
        TransferRequest<Op> request =
            TransferRequest.read(client + 1, ads.get(client), READ_BYTES, op)
                .withChecksum(Checksum.CRC32C);
        while (true) {
          Offer answer = group.offer(request);
          if (answer == Offer.ACCEPTED) {
            submitted.incrementAndGet();
            break;
          }
          if (answer == Offer.CLOSED || !running) {
            ops.remove(id);
            free.add(buffer);
            break;
          }
          LockSupport.parkNanos(50_000);
        }
      }
    }

    /** Stops submitting and waits, at most 15 s, for every submitted read to complete. */
    void hold() throws InterruptedException {
      running = false;
      if (submitter != null) {
        submitter.join(5_000);
      }
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(15);
      while (completed.get() + duplicates.get() < submitted.get() && System.nanoTime() < deadline) {
        Thread.sleep(5);
      }
    }

    long measure(long ms) throws InterruptedException {
      long before = ok.get();
      Thread.sleep(ms);
      return ok.get() - before;
    }
  }

  /**
   * Runs the server.
   *
   * @param args completion deadline ms, window, the rails' interfaces (comma-separated), their
   *     addresses (comma-separated)
   * @throws Exception when anything fails; the parent sees a non-zero exit
   */
  public static void main(String[] args) throws Exception {
    long deadlineMs = Long.parseLong(args[0]);
    int window = Integer.parseInt(args[1]);
    List<String> links = Arrays.asList(args[2].split(","));
    List<String> binds = Arrays.asList(args[3].split(","));
    RailServer server = new RailServer();
    Driver main = server.new Driver(window);
    Driver solo = server.new Driver(window);
    main.group = group(links, binds, deadlineMs, main);
    solo.group = group(List.of(links.getLast()), List.of(binds.getLast()), deadlineMs, solo);
    Thread readder = new Thread(main::readdLoop, "rail-readd");
    readder.setDaemon(true);
    readder.start();
    System.out.println("ready devices=" + String.join(",", main.group.devices()));
    System.out.flush();
    BufferedReader in =
        new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    String line;
    try {
      while ((line = in.readLine()) != null) {
        String[] words = line.split(" ");
        String answer;
        try {
          answer = server.handle(words, main, solo);
        } catch (Exception | AssertionError failure) {
          answer = words[0] + " error=" + failure.getClass().getSimpleName() + " msg=" + failure;
        }
        System.out.println(answer.replace('\n', ' '));
        System.out.flush();
        if (words[0].equals("stop")) {
          break;
        }
      }
    } finally {
      main.group.close();
      solo.group.close();
    }
  }

  private static FabricServiceGroup<Op> group(
      List<String> links, List<String> binds, long deadlineMs, Driver driver) {
    DmaConfiguration configuration =
        DmaConfiguration.builder()
            .providers("tcp")
            .interfaces(links)
            .completionDeadline(Duration.ofMillis(deadlineMs))
            .closeTimeout(Duration.ofSeconds(3))
            .build();
    return FabricServiceGroup.<Op>builder(configuration)
        .deviceBinds(binds)
        .completer(driver::complete)
        .start();
  }

  private String handle(String[] words, Driver main, Driver solo) throws Exception {
    return switch (words[0]) {
      case "client" -> {
        int index = Integer.parseInt(words[1]);
        crcs.add(Integer.parseInt(words[2]));
        Advertisement ad = Advertisement.fromFields(Arrays.asList(words).subList(3, words.length));
        ads.add(ad);
        main.group.addPeer(index + 1, ad.address());
        solo.group.addPeer(index + 1, ad.address());
        yield "client ok " + index;
      }
      case "start", "resume" -> {
        main.start();
        yield words[0] + " ok";
      }
      case "hold" -> {
        main.hold();
        yield "hold ok";
      }
      case "rate" -> "rate ops=" + main.measure(Long.parseLong(words[1]));
      case "solo" -> {
        solo.start();
        Thread.sleep(200);
        long ops = solo.measure(Long.parseLong(words[1]));
        solo.hold();
        yield "solo ops=" + ops + " failed=" + solo.failed + " badcrc=" + solo.badCrc;
      }
      case "phase" -> {
        phase = words[1];
        yield "phase ok";
      }
      case "health" -> health(main.group.health());
      case "stop" -> {
        main.hold();
        long missing = 0;
        for (Op op : main.ops.values()) {
          if (op.completion == null) {
            missing++;
          }
        }
        Map<String, Long> reasons = new TreeMap<>();
        main.failed.forEach((k, v) -> reasons.put(k, v.get()));
        yield "stop submitted="
            + main.submitted.get()
            + " completed="
            + main.completed.get()
            + " missing="
            + missing
            + " duplicates="
            + main.duplicates.get()
            + " unknown="
            + main.unknown.get()
            + " ok="
            + main.ok.get()
            + " badcrc="
            + main.badCrc.get()
            + " moved="
            + main.moved.get()
            + " readds="
            + main.readds.get()
            + " failed="
            + reasons.values().stream().mapToLong(Long::longValue).sum()
            + " reasons="
            + (reasons.isEmpty() ? "-" : reasons.toString().replace(" ", ""))
            + " "
            + health(main.group.health()).substring("health ".length());
      }
      default -> "unknown " + String.join(" ", words);
    };
  }

  private static String health(List<DeviceHealth> health) {
    StringBuilder states = new StringBuilder("health states=");
    StringBuilder counts = new StringBuilder(" counts=");
    for (int i = 0; i < health.size(); i++) {
      DeviceHealth device = health.get(i);
      states.append(i == 0 ? "" : ",").append(device.state());
      counts
          .append(i == 0 ? "" : ",")
          .append(device.faults())
          .append('/')
          .append(device.pauses())
          .append('/')
          .append(device.probes())
          .append('/')
          .append(device.failedOver());
    }
    return states.append(counts).toString();
  }
}
