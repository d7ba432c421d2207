package dev.dma.core;

import dev.dma.api.CacheableSpan;
import dev.dma.api.Direction;
import dev.dma.api.DmaException;
import dev.dma.api.MemoryKind;
import dev.dma.api.Operands;
import dev.dma.api.TransferRequest;
import dev.dma.core.DmaService.Offer;
import dev.dma.core.internal.FailureHook;
import dev.dma.core.internal.Telemetry;
import io.opentelemetry.api.OpenTelemetry;
import io.opentelemetry.api.common.AttributeKey;
import io.opentelemetry.api.common.Attributes;
import io.opentelemetry.api.metrics.Meter;
import io.opentelemetry.api.metrics.MeterProvider;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.jspecify.annotations.Nullable;

/**
 * A {@link FabricServiceGroup}'s rail health: judges each device from the failures its worker
 * reports ({@link FailureHook}, called on failures only), pauses a device at fault, lets one probe
 * through after a cooldown that doubles up to a cap, and posts a failed transfer again on a healthy
 * device (failover). The rules a caller sees are the group's (its class comment, "Health"); this
 * file is how they are kept.
 *
 * <p>Threads: each {@link Rail}'s judgment runs on its own device's worker (single writer of the
 * streak fields); its state, probe claim and counts are atomics read by submitting threads. The
 * submit path reads one volatile ({@link #paused}) while every device is healthy, and nothing else.
 *
 * @param <T> the caller context type
 */
final class Rails<T extends Operands> {
  private static final System.Logger LOG = System.getLogger(FabricServiceGroup.class.getName());

  /** Device-fault failures in a row (no success between) that pause a device. */
  static final int FAULTS_TO_PAUSE = 4;

  static final long FIRST_COOLDOWN_NS = Duration.ofMillis(100).toNanos();
  static final long MAX_COOLDOWN_NS = Duration.ofSeconds(5).toNanos();

  private final Rail[] rails;
  private final NanoClock clock;
  // Set once the services started; read on failover only, by other threads: volatile.
  private volatile FabricService<T> @Nullable [] array;

  /** How many devices are paused: 0 keeps the submit path as it was. */
  private final AtomicInteger paused = new AtomicInteger();

  private final List<AutoCloseable> metrics = new ArrayList<>();

  @SuppressWarnings("unchecked")
  Rails(List<String> devices, NanoClock clock, long firstCooldownNs, long maxCooldownNs) {
    if (devices.size() > Long.SIZE) {
      throw new IllegalArgumentException("a group tracks at most 64 devices");
    }
    this.clock = clock;
    this.rails = (Rail[]) new Rails<?>.Rail[devices.size()];
    for (int i = 0; i < rails.length; i++) {
      rails[i] = new Rail(i, devices.get(i), firstCooldownNs, maxCooldownNs);
    }
  }

  /** The services, once started (the hooks exist before them). */
  void services(FabricService<T>[] services) {
    this.array = services;
  }

  /**
   * Reports each device's state and counts as OpenTelemetry metrics, each point with {@code
   * dma.provider}, {@code dma.device} and {@code dma.device.index} (a group may open one device
   * twice): {@code dma.device.paused} (gauge, 1 while paused), and the counters {@code
   * dma.device.faults}, {@code dma.device.pauses}, {@code dma.device.probes}, {@code
   * dma.device.failovers}. Read at collection time from the atomics; nothing is recorded per
   * transfer. Without an SDK nothing is registered.
   */
  void registerMetrics(OpenTelemetry otel, String provider) {
    if (otel.getMeterProvider() == MeterProvider.noop()) {
      return;
    }
    Meter meter = otel.getMeter(Telemetry.SCOPE);
    Attributes[] attributes = new Attributes[rails.length];
    for (Rail rail : rails) {
      attributes[rail.index] =
          Attributes.of(
              AttributeKey.stringKey("dma.provider"),
              provider,
              AttributeKey.stringKey("dma.device"),
              rail.device,
              AttributeKey.longKey("dma.device.index"),
              (long) rail.index);
    }
    metrics.add(
        meter
            .gaugeBuilder("dma.device.paused")
            .ofLongs()
            .setDescription("1 while the group sends the device no new transfers, else 0")
            .buildWithCallback(
                m -> {
                  for (Rail rail : rails) {
                    m.record(rail.paused ? 1 : 0, attributes[rail.index]);
                  }
                }));
    counter(
        meter, "dma.device.faults", "Failures counted against the device itself", 0, attributes);
    counter(meter, "dma.device.pauses", "Times the group paused the device", 1, attributes);
    counter(meter, "dma.device.probes", "Probes sent to the paused device", 2, attributes);
    counter(
        meter,
        "dma.device.failovers",
        "Transfers failed on the device and posted again on another",
        3,
        attributes);
  }

  private void counter(
      Meter meter, String name, String description, int which, Attributes[] attributes) {
    metrics.add(
        meter
            .counterBuilder(name)
            .setDescription(description)
            .buildWithCallback(
                m -> {
                  for (Rail rail : rails) {
                    AtomicLong count =
                        switch (which) {
                          case 0 -> rail.faults;
                          case 1 -> rail.pauses;
                          case 2 -> rail.probes;
                          default -> rail.failedOver;
                        };
                    m.record(count.get(), attributes[rail.index]);
                  }
                }));
  }

  /** Unregisters the metrics (the group closed). */
  void close() {
    for (AutoCloseable callback : metrics) {
      try {
        callback.close();
      } catch (Exception ignored) {
        // Closing an observable instrument only unregisters its callback; nothing to recover.
      }
    }
    metrics.clear();
  }

  /** The failure hook of device {@code device}'s worker. */
  FailureHook<T> hook(int device) {
    return rails[device];
  }

  /** Whether any device is paused (one volatile read: the healthy path's whole cost). */
  boolean anyPaused() {
    return paused.get() != 0;
  }

  /** Whether device {@code device} is paused while another is healthy: it then gets nothing new. */
  boolean avoid(int device) {
    return rails[device].paused && paused.get() < rails.length;
  }

  /**
   * A paused device whose cooldown has passed and which this caller may probe, claimed (its probe
   * in flight); -1 when none. Only reads are probes: one failing costs the caller nothing, as it is
   * posted again on a healthy device.
   */
  int claimProbe(TransferRequest<T> request) {
    if (!(request.direction() instanceof Direction.FromPeer)) {
      return -1;
    }
    long now = clock.nanoTime();
    for (Rail rail : rails) {
      if (rail.paused && now - rail.probeAtNs >= 0 && rail.probing.compareAndSet(false, true)) {
        return rail.index;
      }
    }
    return -1;
  }

  /**
   * Offers {@code request} as device {@code device}'s probe; gives the claim back if refused. The
   * device first drops the client incarnations it marked dead: they were judged while the device
   * itself failed, and a mark would refuse the probe at intake, so a device whose every client was
   * marked during a cut would never be probed for real and never come back.
   */
  @SuppressWarnings("unchecked")
  Offer offerProbe(TransferRequest<T> request, int device, FabricService<T> service) {
    service.forgetDeadPeers();
    Moved moved = new Moved(request.context(), null, 0, 1L << device, device);
    moved.probeRequest = request;
    Offer answer = service.offer((TransferRequest<T>) (TransferRequest<?>) rewrap(request, moved));
    if (answer == Offer.ACCEPTED) {
      rails[device].probes.incrementAndGet();
    } else {
      rails[device].probing.set(false);
    }
    return answer;
  }

  /**
   * A probe on {@code device} succeeded: the device is healthy again. Before any new transfer can
   * reach it, it drops the dead marks made since the probe was sent (a read that was in flight when
   * the device failed may reach its deadline late), so no client's reads are refused there for what
   * the device did.
   */
  void probeSucceeded(int device) {
    Rail rail = rails[device];
    FabricService<T>[] services = array;
    if (rail.paused && services != null) {
      services[device].forgetDeadPeers(); // queued ahead of every transfer the resume lets in
    }
    rail.resume();
  }

  /**
   * A probe failed without its hook seeing it (failed as its worker shut down; every intake refusal
   * and every failure while the worker runs reaches the hook): it ends as a failed probe (the claim
   * is given back and the next one comes after a longer cooldown; without this the claim would stay
   * taken and the device never be probed again), and it is posted on a healthy device, as a probe
   * failing on the device is, so probing costs the caller nothing.
   *
   * @return true when it was posted elsewhere: the router then delivers nothing for it now
   */
  @SuppressWarnings("unchecked")
  boolean probeRefused(Moved probe, DmaException error) {
    Rail rail = rails[probe.probeOf];
    rail.probeFailed();
    TransferRequest<?> request = probe.probeRequest;
    if (request == null) {
      return false;
    }
    Moved bare = new Moved(probe.context, null, 0, probe.devices, -1);
    return rail.failOver((TransferRequest<T>) request, bare, null, error, 0);
  }

  /** Each device's health, in device order. */
  List<DeviceHealth> health() {
    List<DeviceHealth> out = new ArrayList<>(rails.length);
    for (Rail rail : rails) {
      out.add(rail.snapshot());
    }
    return out;
  }

  private static <T extends Operands> TransferRequest<?> rewrap(
      TransferRequest<T> request, Operands context) {
    return new TransferRequest<>(
        request.clientId(),
        request.peerAddress(),
        request.remoteKey(),
        request.remoteAddress(),
        request.direction(),
        request.checksum(),
        context,
        request.remoteBase(),
        request.remoteLength(),
        request.retryWrite(),
        request.peer());
  }

  /**
   * Whether a failure says the device, not the peer or the caller, is at fault: a provider error, a
   * deadline, or an endpoint reset. An access refusal, an unreachable or dead peer, a bad request
   * or a close is about one client or the caller and never counts.
   */
  static boolean deviceFault(DmaException.Reason reason) {
    return reason == DmaException.Reason.PROVIDER
        || reason == DmaException.Reason.DEADLINE
        || reason == DmaException.Reason.ENDPOINT_RESET;
  }

  /**
   * A transfer the group posted on a device other than its first, or as a probe: the caller's
   * context (or a striped chunk), the operand the first device resolved, and which devices carried
   * it with how many posts. Allocated only on failover and for probes, never on the healthy path.
   */
  static final class Moved implements Operands {
    final Operands context;
    private final @Nullable MemorySegment operand;
    final int priorPosts;
    final long devices;
    // The device this is a probe of, or -1.
    final int probeOf;

    // Set by the probed device's hook when it judged this probe's failure; a probe the worker
    // failed without its hook (refused as it shut down) reaches the router unjudged, and the router
    // then ends the probe itself. Written on the worker before the completion is
    // handed on, read after: the completion's hand-over orders them.
    boolean probeJudged;

    // A probe's request as the caller gave it, so a probe refused at intake can still be moved.
    @Nullable TransferRequest<?> probeRequest;

    Moved(
        Operands context,
        @Nullable MemorySegment operand,
        int priorPosts,
        long devices,
        int probe) {
      this.context = context;
      this.operand = operand;
      this.priorPosts = priorPosts;
      this.devices = devices;
      this.probeOf = probe;
    }

    @Override
    public @Nullable MemorySegment source() {
      return operand != null ? operand : context.source();
    }

    @Override
    public @Nullable MemorySegment allocate(long lengthBytes) {
      return operand != null ? operand : context.allocate(lengthBytes);
    }

    @Override
    public @Nullable CacheableSpan cacheableSpan() {
      return context.cacheableSpan();
    }

    @Override
    public MemoryKind memoryKind() {
      return context.memoryKind();
    }

    @Override
    public String toString() {
      return context.toString();
    }
  }

  /**
   * One device's health. {@link #failed} runs on that device's worker only, so the streak needs no
   * synchronization; what submitters read is volatile or atomic.
   */
  private final class Rail implements FailureHook<T> {
    final int index;
    final String device;
    private final long firstCooldownNs;
    private final long maxCooldownNs;
    volatile boolean paused;
    volatile long probeAtNs;
    volatile long cooldownNs;
    final AtomicBoolean probing = new AtomicBoolean();
    final AtomicLong faults = new AtomicLong();
    final AtomicLong pauses = new AtomicLong();
    final AtomicLong probes = new AtomicLong();
    final AtomicLong failedOver = new AtomicLong();

    // The worker's success count at the streak's last fault: a different reading means the device
    // succeeded since, which ends the streak.
    private long successesAtLastFault = -1;
    private int streak;
    private long streakClient;
    private boolean streakOfSeveralClients;

    Rail(int index, String device, long firstCooldownNs, long maxCooldownNs) {
      this.index = index;
      this.device = device;
      this.firstCooldownNs = firstCooldownNs;
      this.maxCooldownNs = maxCooldownNs;
      this.cooldownNs = firstCooldownNs;
    }

    @Override
    public boolean failed(
        TransferRequest<T> request,
        @Nullable MemorySegment operand,
        DmaException error,
        int posts,
        long succeeded) {
      Operands context = request.context();
      Moved moved = context instanceof Moved m ? m : null;
      boolean fault = deviceFault(error.reason());
      boolean probe = moved != null && moved.probeOf == index;
      if (probe && moved != null) {
        moved.probeJudged = true;
        probeFailed();
      } else if (fault) {
        judge(request.clientId(), succeeded);
      }
      // A probe is moved whatever ended it: probing must cost the caller nothing. A provider error
      // or a reset ended the transfer at once, so it moves even before the device is judged (the
      // first faults of a failing NIC then cost nothing either); a deadline moves only once the
      // device is judged at fault, as one silent client would otherwise wait out a deadline on
      // every device in turn. A client this device finds unreachable moves too, whether refused
      // for its mark unposted or failed by its connection: that is this device's view (a rail
      // cut, or a connection a cut left stuck or reset), and another device may reach the client;
      // one that really is gone fails once on each device, at once or by its mark.
      boolean judged = paused || streakOfSeveralClients;
      boolean atOnce = error.reason() != DmaException.Reason.DEADLINE;
      boolean unreachableHere = error.reason() == DmaException.Reason.PEER_UNREACHABLE;
      if (!probe && !unreachableHere && (!fault || !(judged || atOnce))) {
        return false;
      }
      return failOver(request, moved, operand, error, posts);
    }

    /** Counts a device-fault failure and pauses the device once the rule says so. */
    private void judge(long clientId, long succeeded) {
      faults.incrementAndGet();
      if (succeeded != successesAtLastFault) {
        successesAtLastFault = succeeded;
        streak = 0;
        streakClient = clientId;
        streakOfSeveralClients = false;
      }
      streak++;
      if (clientId != streakClient) {
        streakOfSeveralClients = true;
      }
      if (!paused && streakOfSeveralClients && streak >= FAULTS_TO_PAUSE) {
        pause();
      }
    }

    private void pause() {
      cooldownNs = firstCooldownNs;
      probeAtNs = clock.nanoTime() + cooldownNs;
      paused = true;
      pauses.incrementAndGet();
      paused().incrementAndGet();
      LOG.log(
          System.Logger.Level.WARNING,
          "device {0} paused after {1} failures of its own across several clients; probing it in"
              + " {2} ms",
          device,
          streak,
          cooldownNs / 1_000_000);
    }

    void probeFailed() {
      long next = Math.min(maxCooldownNs, cooldownNs * 2);
      cooldownNs = next;
      probeAtNs = clock.nanoTime() + next;
      probing.set(false);
    }

    void resume() {
      probing.set(false);
      if (!paused) {
        return;
      }
      paused = false;
      // The streak is the worker's; the probe's success ends it there (a new success count).
      cooldownNs = firstCooldownNs;
      paused().decrementAndGet();
      LOG.log(System.Logger.Level.INFO, "device {0} healthy again: a probe succeeded", device);
    }

    /**
     * Posts a failed read (or a write that allows retries and left the target unchanged) on a
     * healthy device that has not carried it yet; false when none has room or none is left, and the
     * transfer then fails as it would have.
     */
    @SuppressWarnings("unchecked")
    boolean failOver(
        TransferRequest<T> request,
        @Nullable Moved moved,
        @Nullable MemorySegment operand,
        DmaException error,
        int posts) {
      boolean read = request.direction() instanceof Direction.FromPeer;
      if (!read
          && !(request.retryWrite()
              && error.targetMemory() == DmaException.TargetMemory.UNCHANGED)) {
        return false;
      }
      FabricService<T>[] services = array;
      if (services == null) {
        return false;
      }
      long carried = (moved != null ? moved.devices : 0) | (1L << index);
      Operands original = moved != null ? moved.context : request.context();
      MemorySegment resolved = operand != null ? operand : null;
      int prior = (moved != null ? moved.priorPosts : 0) + posts;
      for (int i = 1; i < services.length; i++) {
        int candidate = (index + i) % services.length;
        if ((carried & (1L << candidate)) != 0 || rails[candidate].paused) {
          continue;
        }
        Moved next = new Moved(original, resolved, prior, carried | (1L << candidate), -1);
        Offer answer =
            services[candidate].offer(
                (TransferRequest<T>) (TransferRequest<?>) rewrap(request, next));
        if (answer == Offer.ACCEPTED) {
          failedOver.incrementAndGet();
          return true;
        }
      }
      return false;
    }

    DeviceHealth snapshot() {
      return new DeviceHealth(
          device,
          paused ? DeviceHealth.State.PAUSED : DeviceHealth.State.HEALTHY,
          faults.get(),
          pauses.get(),
          probes.get(),
          failedOver.get(),
          Duration.ofNanos(cooldownNs));
    }
  }

  private AtomicInteger paused() {
    return paused;
  }
}
