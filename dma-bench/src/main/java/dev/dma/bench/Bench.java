package dev.dma.bench;

import dev.dma.api.Advertisement;
import dev.dma.api.Direction;
import dev.dma.api.DmaConfiguration;
import dev.dma.core.AsyncFabricService;
import dev.dma.core.DeviceHealth;
import dev.dma.core.FabricProviders;
import dev.dma.core.FabricService;
import dev.dma.core.FabricServiceGroup;
import dev.dma.libfabric.Libfabric;
import dev.dma.spi.FabricProvider;
import io.opentelemetry.api.OpenTelemetry;
import java.io.BufferedReader;
import java.io.File;
import java.io.IOException;
import java.io.InputStreamReader;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.TimeUnit;

/**
 * Runs a {@link Plan}: one {@link FabricService} driving a {@link ClosedLoop} against targets in
 * this process, in a child process, or on another host, one point (operation, size) after another.
 *
 * <p>Threads: the calling thread controls the run and draws progress; transfers complete and are
 * resubmitted on the service's worker.
 */
final class Bench {
  /**
   * No completion for this long means the fabric is stuck (the C anchor's watchdog is 10 s too).
   */
  static final long STALL_NANOS = TimeUnit.SECONDS.toNanos(10);

  /** How often the progress line is redrawn. */
  private static final long TICK_MILLIS = 100;

  private Bench() {}

  /** The service's configuration: the provider, the bind address and the window as cap. */
  static DmaConfiguration configuration(String provider, String bind, int window) {
    DmaConfiguration.Builder builder =
        DmaConfiguration.builder().providers(provider).maxInFlight(window);
    if (bind != null && !provider.equals("fake")) {
      builder.bind(bind);
    }
    return builder.build();
  }

  /**
   * Runs every point of the plan.
   *
   * @param plan what to measure
   * @param progress where to draw progress
   * @return one result per point, in order
   * @throws Exception when set-up fails (provider, endpoint, target, control connection)
   */
  static List<Result> run(Plan plan, Progress progress) throws Exception {
    return run(plan, progress, OpenTelemetry.noop());
  }

  /**
   * Runs every point of the plan, recording the service's telemetry into {@code openTelemetry}.
   *
   * @param plan what to measure
   * @param progress where to draw progress
   * @param openTelemetry where the service's spans and metrics go
   * @return one result per point, in order
   * @throws Exception when set-up fails (provider, endpoint, target, control connection)
   */
  static List<Result> run(Plan plan, Progress progress, OpenTelemetry openTelemetry)
      throws Exception {
    return run(plan, progress, openTelemetry, Striping.NONE);
  }

  /**
   * How many devices the initiating side drives and from what size it stripes over them.
   *
   * @param devices services in a {@link FabricServiceGroup}; 1 is one plain {@link FabricService}
   * @param device the domain each of the group's services opens (loopback: N endpoints on it)
   * @param thresholdBytes transfers of at least this size are striped over every device
   */
  record Striping(int devices, String device, long thresholdBytes) {
    static final Striping NONE = new Striping(1, null, 0);
  }

  /**
   * Runs every point of the plan on one service or, with {@code striping.devices() > 1}, on a group
   * of that many services that stripes transfers at the threshold.
   *
   * @param plan what to measure
   * @param progress where to draw progress
   * @param openTelemetry where a single service's spans and metrics go (a group records none)
   * @param striping the devices
   * @return one result per point, in order
   * @throws Exception when set-up fails (provider, endpoint, target, control connection)
   */
  static List<Result> run(
      Plan plan, Progress progress, OpenTelemetry openTelemetry, Striping striping)
      throws Exception {
    return run(plan, progress, openTelemetry, striping, Driver.PIPELINED);
  }

  /**
   * What keeps a point's transfers outstanding: a {@link ClosedLoop} resubmitting to a service from
   * its completer (the default); {@code virtualThreads} virtual threads on the async API, each
   * blocking on its future ({@link VirtualThreadLoop}); or, with {@code endpointOnly}, the same
   * {@link ClosedLoop} on the provider's endpoint with no dma core ({@link EndpointDriver}).
   *
   * @param virtualThreads 0, or the number of virtual threads
   * @param endpointOnly whether to drive the endpoint directly
   */
  record Driver(int virtualThreads, boolean endpointOnly) {
    /** The pipelined loop on a service. */
    static final Driver PIPELINED = new Driver(0, false);
  }

  /**
   * Runs every point of the plan as {@link #run(Plan, Progress, OpenTelemetry, Striping)} does,
   * kept outstanding by {@code driver}: with virtual threads through {@link
   * dev.dma.core.AsyncFabricService} (the window stays the service's cap on posted transfers), or
   * on the bare endpoint.
   *
   * @param plan what to measure
   * @param progress where to draw progress
   * @param openTelemetry where a single service's spans and metrics go (a group records none)
   * @param striping the devices
   * @param driver what keeps the transfers outstanding
   * @return one result per point, in order
   * @throws Exception when set-up fails (provider, endpoint, target, control connection)
   */
  static List<Result> run(
      Plan plan, Progress progress, OpenTelemetry openTelemetry, Striping striping, Driver driver)
      throws Exception {
    int virtualThreads = driver.virtualThreads();
    DmaConfiguration configuration =
        configuration(plan.provider(), plan.bind().orElse(null), plan.window());
    if (plan.targetIdle().isPresent()) {
      configuration = configuration.toBuilder().targetIdle(plan.targetIdle().get()).build();
    }
    FabricProvider provider = FabricProviders.select(configuration);
    PointLoop loop =
        virtualThreads > 0 ? new VirtualThreadLoop(virtualThreads) : new ClosedLoop(plan.window());
    List<Result> results = new ArrayList<>();
    try (Arena arena = Arena.ofShared();
        Side service =
            Side.open(
                configuration, provider, loop, openTelemetry, striping, driver.endpointOnly());
        Targets targets = Targets.open(plan, configuration, provider, service.localAddresses())) {
      if (virtualThreads > 0) {
        progress.note(
            String.format(
                Locale.ROOT,
                "note: %d virtual threads, each blocking on its transfer's future"
                    + " (AsyncFabricService), at most %d posted",
                virtualThreads,
                plan.window()));
      }
      if (driver.endpointOnly()) {
        progress.note(
            "note: the endpoint driven directly from one thread, with no dma core (a diagnostic:"
                + " no deadlines, recovery or checks)");
      }
      if (striping.devices() > 1) {
        progress.note(
            String.format(
                Locale.ROOT,
                "note: %d devices (%s each), transfers of %s or more striped over all of them",
                striping.devices(),
                striping.device(),
                Sizes.format(striping.thresholdBytes())));
      }
      for (Control.TargetAd ad : targets.ads()) {
        if (ad.lengthBytes() < plan.maxSize()) {
          throw new IllegalArgumentException(
              "the target exposes "
                  + ad.lengthBytes()
                  + " bytes, less than the largest size "
                  + plan.maxSize()
                  + "; start it with --buffer "
                  + plan.maxSize());
        }
      }
      if (service.inFlightCap() < plan.window()) {
        progress.note(
            String.format(
                Locale.ROOT,
                "note: provider %s posts at most %d transfers at once; the rest of window %d"
                    + " queue in the worker",
                plan.provider(),
                service.inFlightCap(),
                plan.window()));
      }
      String fabric = service.endpointInfo().provider();
      MemorySegment buffer = arena.allocate(plan.maxSize(), 4096);
      buffer.fill((byte) 0xa5);
      List<Advertisement> ads = new ArrayList<>();
      for (int i = 0; i < targets.ads().size(); i++) {
        Advertisement ad = targets.ads().get(i).advertisement();
        service.addPeer(i + 1, ad.address());
        ads.add(ad);
      }
      int points = plan.ops().size() * plan.sizes().size();
      int point = 0;
      try (AutoCloseable _ = service.register(buffer)) {
        for (String op : plan.ops()) {
          for (long size : plan.sizes()) {
            point++;
            Direction direction = op.equals("read") ? Direction.fromPeer(size) : Direction.TO_PEER;
            String label =
                String.format(
                    Locale.ROOT, "[%d/%d] %-5s %-7s", point, points, op, Sizes.format(size));
            Result result =
                measure(
                    plan,
                    loop,
                    direction,
                    buffer.asSlice(0, size),
                    ads,
                    label,
                    progress,
                    fabric,
                    op,
                    size);
            results.add(result);
            if (result.firstError().startsWith("stalled")) {
              progress.note("stopping: " + result.firstError());
              return results;
            }
          }
        }
      }
      service.noteHealth(progress);
    }
    return results;
  }

  private static Result measure(
      Plan plan,
      PointLoop loop,
      Direction direction,
      MemorySegment operand,
      List<Advertisement> ads,
      String label,
      Progress progress,
      String fabric,
      String op,
      long size)
      throws InterruptedException {
    loop.prepare(direction, operand, ads, plan.checksum());
    long started = System.nanoTime();
    loop.start();
    String stall = null;
    long lastTotal = -1;
    long lastMove = started;
    long warmupEnd = started + plan.warmup().toNanos();
    boolean counted = plan.iterations() > 0;
    long durationNanos = plan.duration().toNanos();
    boolean measuring = false;
    while (true) {
      long now = System.nanoTime();
      ClosedLoop.Snapshot s = loop.snapshot();
      if (s.total() != lastTotal) {
        lastTotal = s.total();
        lastMove = now;
      } else if (now - lastMove > STALL_NANOS) {
        stall =
            "stalled: no transfer completed for 10 s ("
                + s.outstanding()
                + " outstanding); is the target progressing?";
        break;
      }
      if (s.finished()) {
        break;
      }
      if (!measuring && now >= warmupEnd) {
        loop.beginMeasure(counted ? plan.iterations() : Long.MAX_VALUE);
        measuring = true;
      } else if (measuring && !counted && now - s.measureStartNanos() >= durationNanos) {
        break;
      }
      if (measuring && s.measuring()) {
        double seconds = Math.max(1e-9, (now - s.measureStartNanos()) / 1e9);
        String target =
            counted
                ? String.format(
                    Locale.ROOT, "%,d/%,d", s.completed() + s.failed(), plan.iterations())
                : String.format(Locale.ROOT, "%.1f/%.1fs", seconds, durationNanos / 1e9);
        progress.update(
            String.format(
                Locale.ROOT,
                "%s %s  %,.1f MB/s  %,.0f transfers/s  errors %d",
                label,
                target,
                s.completed() * (double) operand.byteSize() / seconds / 1e6,
                s.completed() / seconds,
                s.failed()));
      } else {
        progress.update(label + " warm-up");
      }
      loop.awaitFinished(TimeUnit.MILLISECONDS.toNanos(TICK_MILLIS));
    }
    loop.stop();
    boolean drained = loop.awaitDrained(STALL_NANOS);
    if (!drained && stall == null) {
      stall = "stalled: transfers did not complete within 10 s after the point ended";
    }
    ClosedLoop.Snapshot end = loop.snapshot();
    LatencyHistogram latencies = loop.latencies();
    double seconds =
        end.measureStartNanos() == 0
            ? 0
            : Math.max(0, (end.measureEndNanos() - end.measureStartNanos()) / 1e9);
    String error = stall != null ? stall : loop.firstError();
    Result result =
        new Result(
            plan.provider(),
            fabric,
            op,
            size,
            plan.window(),
            plan.processes(),
            end.completed(),
            end.failed(),
            seconds,
            latencies.percentile(50),
            latencies.percentile(99),
            latencies.max(),
            latencies.mean(),
            error);
    progress.done(
        String.format(
            Locale.ROOT,
            "%s %,.1f MB/s  %,.0f transfers/s  p50 %.1f us  p99 %.1f us  errors %d",
            label,
            result.megabytesPerSecond(),
            result.transfersPerSecond(),
            result.p50Nanos() / 1e3,
            result.p99Nanos() / 1e3,
            result.errors()));
    return result;
  }

  /**
   * The initiating side: one service, a group of services that stripes, the async API, or the bare
   * endpoint ({@code --endpoint-only}). Used by the run's thread; the loop resubmits to it from
   * completer threads.
   */
  private static final class Side implements AutoCloseable {
    private final FabricService<ClosedLoop.Slot> service;
    private final FabricServiceGroup<ClosedLoop.Slot> group;
    private final AsyncFabricService<VirtualThreadLoop.Slot> async;
    private final EndpointDriver driver;

    private Side(
        FabricService<ClosedLoop.Slot> service,
        FabricServiceGroup<ClosedLoop.Slot> group,
        AsyncFabricService<VirtualThreadLoop.Slot> async,
        EndpointDriver driver) {
      this.service = service;
      this.group = group;
      this.async = async;
      this.driver = driver;
    }

    static Side open(
        DmaConfiguration configuration,
        FabricProvider provider,
        PointLoop pointLoop,
        OpenTelemetry openTelemetry,
        Striping striping,
        boolean endpointOnly) {
      if (endpointOnly) {
        return new Side(
            null,
            null,
            null,
            EndpointDriver.open(
                configuration, provider, (ClosedLoop) pointLoop, configuration.maxInFlight()));
      }
      if (pointLoop instanceof VirtualThreadLoop threads) {
        AsyncFabricService.Builder<VirtualThreadLoop.Slot> builder =
            AsyncFabricService.<VirtualThreadLoop.Slot>builder(
                    striping.devices() <= 1
                        ? configuration
                        : configuration.toBuilder()
                            .interfaces(
                                java.util.Collections.nCopies(
                                    striping.devices(), striping.device()))
                            .build())
                .provider(provider)
                .openTelemetry(openTelemetry);
        if (striping.devices() > 1) {
          builder.stripeThresholdBytes(striping.thresholdBytes());
        }
        AsyncFabricService<VirtualThreadLoop.Slot> started = builder.start();
        threads.bind(started);
        return new Side(null, null, started, null);
      }
      ClosedLoop loop = (ClosedLoop) pointLoop;
      if (striping.devices() <= 1) {
        FabricService<ClosedLoop.Slot> service =
            FabricService.<ClosedLoop.Slot>builder(configuration)
                .provider(provider)
                .completer(loop)
                .openTelemetry(openTelemetry)
                .start();
        loop.bind(service);
        return new Side(service, null, null, null);
      }
      DmaConfiguration devices =
          configuration.toBuilder()
              .interfaces(java.util.Collections.nCopies(striping.devices(), striping.device()))
              .build();
      FabricServiceGroup<ClosedLoop.Slot> group =
          FabricServiceGroup.<ClosedLoop.Slot>builder(devices)
              .provider(provider)
              .completer(loop)
              .openTelemetry(openTelemetry)
              .stripeThresholdBytes(striping.thresholdBytes())
              .start();
      loop.bind(group);
      return new Side(null, group, null, null);
    }

    private FabricService<ClosedLoop.Slot> first() {
      return service != null ? service : group.services().getFirst();
    }

    /** Every device's fabric address, the first device's first: a target inserts them all. */
    List<byte[]> localAddresses() {
      if (driver != null) {
        return List.of(driver.localAddress());
      }
      if (async != null) {
        return async.localAddresses();
      }
      if (service != null) {
        return List.of(service.localAddress());
      }
      List<byte[]> addresses = new ArrayList<>();
      for (FabricService<ClosedLoop.Slot> each : group.services()) {
        addresses.add(each.localAddress());
      }
      return addresses;
    }

    /**
     * With a group: one note per device, its health at the end of the run (state, faults, pauses,
     * probes, transfers moved to another device), so a run over several devices shows a rail that
     * failed. The futures API over a group does not expose its group, so it shows none.
     */
    void noteHealth(Progress progress) {
      if (group == null) {
        return;
      }
      for (DeviceHealth health : group.health()) {
        progress.note(
            String.format(
                Locale.ROOT,
                "device %s: %s, %d faults, %d pauses, %d probes, %d moved to another device",
                health.device(),
                health.state().name().toLowerCase(Locale.ROOT),
                health.faults(),
                health.pauses(),
                health.probes(),
                health.failedOver()));
      }
    }

    /** The first service's cap; the async API does not expose one, so there no note is shown. */
    int inFlightCap() {
      if (driver != null) {
        return driver.inFlightCap();
      }
      return async != null ? Integer.MAX_VALUE : first().inFlightCap();
    }

    dev.dma.spi.EndpointInfo endpointInfo() {
      if (driver != null) {
        return driver.endpointInfo();
      }
      return async != null ? async.endpointInfo() : first().endpointInfo();
    }

    void addPeer(long clientId, byte[] address) {
      if (driver != null) {
        driver.addPeer(clientId, address);
      } else if (async != null) {
        async.addPeer(clientId, address);
      } else if (service != null) {
        service.addPeer(clientId, address);
      } else {
        group.addPeer(clientId, address);
      }
    }

    AutoCloseable register(MemorySegment segment) {
      if (driver != null) {
        return driver.register(segment);
      }
      if (async != null) {
        return async.register(segment);
      }
      return service != null ? service.register(segment) : group.register(segment);
    }

    @Override
    public void close() {
      if (driver != null) {
        driver.close();
      } else if (async != null) {
        async.close();
      } else if (service != null) {
        service.close();
      } else {
        group.close();
      }
    }
  }

  /** The targets of a run, wherever they are; closing releases them. */
  abstract static class Targets implements AutoCloseable {
    abstract List<Control.TargetAd> ads();

    @Override
    public abstract void close();

    static Targets open(
        Plan plan,
        DmaConfiguration configuration,
        FabricProvider provider,
        List<byte[]> serverAddresses)
        throws IOException {
      if (!plan.pasted().isEmpty()) {
        List<Control.TargetAd> pasted = plan.pasted();
        return new Targets() {
          @Override
          List<Control.TargetAd> ads() {
            return pasted;
          }

          @Override
          public void close() {}
        };
      }
      if (plan.connect().isPresent()) {
        return remote(plan.connect().get(), serverAddresses, null);
      }
      if (plan.processes() == 2) {
        return child(plan, serverAddresses);
      }
      LocalTargets local =
          new LocalTargets(configuration, provider, plan.clients(), plan.maxSize());
      return new Targets() {
        @Override
        List<Control.TargetAd> ads() {
          return local.ads();
        }

        @Override
        public void close() {
          local.close();
        }
      };
    }

    private static Targets remote(String hostPort, List<byte[]> serverAddresses, Process child) {
      int colon = hostPort.lastIndexOf(':');
      if (colon <= 0) {
        throw new IllegalArgumentException("--connect wants HOST:PORT, not \"" + hostPort + "\"");
      }
      String host = hostPort.substring(0, colon);
      int port = Integer.parseInt(hostPort.substring(colon + 1));
      Control.Session session = Control.connect(host, port, serverAddresses);
      return new Targets() {
        @Override
        List<Control.TargetAd> ads() {
          return session.offer().targets();
        }

        @Override
        public void close() {
          session.close();
          if (child != null) {
            stopChild(child);
          }
        }
      };
    }

    /**
     * Starts {@code dma-bench target} in a child JVM on loopback and connects to it. The child
     * exits when its standard input closes, so it never outlives this process.
     */
    private static Targets child(Plan plan, List<byte[]> serverAddresses) throws IOException {
      String java =
          ProcessHandle.current()
              .info()
              .command()
              .orElse(
                  System.getProperty("java.home")
                      + File.separator
                      + "bin"
                      + File.separator
                      + "java");
      List<String> command = new ArrayList<>();
      command.add(java);
      command.add("--enable-native-access=ALL-UNNAMED");
      // The child must load the same libfabric: a 1.17 shm target mapping a 2.1 server's region
      // (or the reverse) dies with SIGSEGV in fi_av_insert, and other providers need not talk
      // across versions either.
      String library = System.getProperty(Libfabric.LIBRARY_PROPERTY);
      if (library != null) {
        command.add("-D" + Libfabric.LIBRARY_PROPERTY + "=" + library);
      }
      command.add("-cp");
      command.add(System.getProperty("java.class.path"));
      command.add(Main.class.getName());
      command.add("target");
      command.add("--listen=127.0.0.1:0");
      command.add("--once");
      command.add("--exit-with-parent");
      command.add("--provider=" + plan.provider());
      plan.bind().ifPresent(bind -> command.add("--bind=" + bind));
      command.add("--clients=" + plan.clients());
      command.add("--buffer=" + plan.maxSize());
      plan.targetIdle().ifPresent(idle -> command.add("--target-idle=" + idle));
      Process process =
          new ProcessBuilder(command).redirectError(ProcessBuilder.Redirect.INHERIT).start();
      try {
        BufferedReader out =
            new BufferedReader(
                new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8));
        String line;
        String listening = null;
        while ((line = out.readLine()) != null) {
          if (line.startsWith("listening ")) {
            listening = line.substring("listening ".length()).strip();
            break;
          }
        }
        if (listening == null) {
          throw new IOException(
              "the target process exited before listening (exit code "
                  + (process.waitFor(5, TimeUnit.SECONDS) ? process.exitValue() : -1)
                  + ")");
        }
        // Keep draining its output so it never blocks on a full pipe.
        Thread drain =
            new Thread(
                () -> {
                  try {
                    while (out.readLine() != null) {
                      // discard
                    }
                  } catch (IOException ignored) {
                    // the child is gone
                  }
                },
                "dma-bench-child-out");
        drain.setDaemon(true);
        drain.start();
        return remote(listening, serverAddresses, process);
      } catch (IOException | RuntimeException | InterruptedException e) {
        stopChild(process);
        if (e instanceof InterruptedException) {
          Thread.currentThread().interrupt();
        }
        throw e instanceof IOException io ? io : new IOException(e.getMessage(), e);
      }
    }

    private static void stopChild(Process child) {
      try {
        child.getOutputStream().close();
        if (!child.waitFor(10, TimeUnit.SECONDS)) {
          child.destroy();
          child.waitFor(5, TimeUnit.SECONDS);
        }
      } catch (IOException | InterruptedException e) {
        child.destroyForcibly();
      }
    }
  }
}
