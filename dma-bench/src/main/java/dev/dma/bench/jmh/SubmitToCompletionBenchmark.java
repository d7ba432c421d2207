package dev.dma.bench.jmh;

import dev.dma.api.Direction;
import dev.dma.api.DmaConfiguration;
import dev.dma.api.RemoteAccess;
import dev.dma.bench.ClosedLoop;
import dev.dma.core.FabricProviders;
import dev.dma.core.FabricService;
import dev.dma.core.MemoryRegion;
import dev.dma.core.PassiveTarget;
import dev.dma.core.TargetRegion;
import dev.dma.spi.FabricProvider;
import io.opentelemetry.api.OpenTelemetry;
import io.opentelemetry.sdk.OpenTelemetrySdk;
import io.opentelemetry.sdk.common.CompletableResultCode;
import io.opentelemetry.sdk.metrics.SdkMeterProvider;
import io.opentelemetry.sdk.testing.exporter.InMemoryMetricReader;
import io.opentelemetry.sdk.trace.SdkTracerProvider;
import io.opentelemetry.sdk.trace.data.SpanData;
import io.opentelemetry.sdk.trace.export.BatchSpanProcessor;
import io.opentelemetry.sdk.trace.export.SpanExporter;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.Collection;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OperationsPerInvocation;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;

/**
 * The core's whole per-transfer path over the fake provider, on one worker: submit, intake, post (a
 * real byte copy in the fake), reap, complete, and resubmit from the completer, exactly as {@code
 * dma-bench run --provider fake} drives it. One invocation is {@value #TRANSFERS} transfers of 64 B
 * kept {@code window} deep; the score is per transfer.
 *
 * <p>Run with {@code -prof gc}: {@code gc.alloc.rate.norm} is the bytes allocated per transfer by
 * every thread (the worker, the completer and this thread), which is what the worker allocates
 * beyond the {@code Completion} it hands over.
 *
 * <p>{@code telemetry}: {@code none} leaves {@code GlobalOpenTelemetry} alone (no SDK: the default
 * every user gets); {@code sdk} installs the OpenTelemetry SDK with every span sampled into a
 * discarding exporter and metrics into an in-memory reader, to show what telemetry costs when on
 * and that it costs nothing when off.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(
    value = 1,
    jvmArgsAppend = {"-Xmx1g", "--enable-native-access=ALL-UNNAMED"})
public class SubmitToCompletionBenchmark {
  static final int TRANSFERS = 100_000;

  /** Transfers kept outstanding. */
  @Param({"64", "1"})
  public int window;

  /** {@code none} or {@code sdk}. */
  @Param({"none", "sdk"})
  public String telemetry;

  /** {@code write} or {@code read}. */
  @Param({"write"})
  public String op;

  private Arena arena;
  private PassiveTarget target;
  private TargetRegion exposed;
  private FabricService<ClosedLoop.Slot> service;
  private MemoryRegion region;
  private ClosedLoop loop;
  private OpenTelemetrySdk sdk;

  /** The benchmark's state, created by JMH. */
  public SubmitToCompletionBenchmark() {}

  /** Starts a fake service and target and registers the operand. */
  @Setup(Level.Trial)
  public void setUp() {
    DmaConfiguration configuration =
        DmaConfiguration.builder().providers("fake").maxInFlight(window).build();
    // Looked up, not named: FakeProvider's @AutoService annotation is not on this class path.
    FabricProvider provider = FabricProviders.select(configuration);
    arena = Arena.ofShared();
    target = PassiveTarget.start(configuration, provider, Duration.ofMillis(1));
    MemorySegment remote = arena.allocate(4096, 4096);
    exposed = target.expose(remote, RemoteAccess.READ_WRITE);
    loop = new ClosedLoop(window);
    OpenTelemetry otel = OpenTelemetry.noop();
    if (telemetry.equals("sdk")) {
      sdk =
          OpenTelemetrySdk.builder()
              .setTracerProvider(
                  SdkTracerProvider.builder()
                      .addSpanProcessor(
                          BatchSpanProcessor.builder(new DiscardingExporter()).build())
                      .build())
              .setMeterProvider(
                  SdkMeterProvider.builder()
                      .registerMetricReader(InMemoryMetricReader.create())
                      .build())
              .build();
      otel = sdk;
    }
    FabricService.Builder<ClosedLoop.Slot> builder =
        FabricService.<ClosedLoop.Slot>builder(configuration).provider(provider).completer(loop);
    if (sdk != null) {
      builder.openTelemetry(otel);
    }
    service = builder.start();
    loop.bind(service);
    service.addPeer(1, exposed.advertisement().address());
    MemorySegment local = arena.allocate(4096, 4096);
    region = service.register(local);
    Direction direction = op.equals("read") ? Direction.fromPeer(64) : Direction.TO_PEER;
    loop.prepare(direction, local.asSlice(0, 64), List.of(exposed.advertisement()), false);
  }

  /**
   * {@value #TRANSFERS} transfers, {@code window} deep.
   *
   * @return transfers completed
   * @throws InterruptedException never in practice
   */
  @Benchmark
  @OperationsPerInvocation(TRANSFERS)
  public long transfers() throws InterruptedException {
    loop.beginMeasure(TRANSFERS);
    loop.start();
    loop.awaitFinished(TimeUnit.SECONDS.toNanos(60));
    loop.stop();
    loop.awaitDrained(TimeUnit.SECONDS.toNanos(60));
    ClosedLoop.Snapshot s = loop.snapshot();
    if (s.failed() != 0) {
      throw new IllegalStateException(s.failed() + " transfers failed: " + loop.firstError());
    }
    // prepare() resets the counters for the next invocation without allocating per transfer.
    loop.prepareAgain();
    return s.completed();
  }

  /** Closes everything in reverse order. */
  @TearDown(Level.Trial)
  public void tearDown() {
    region.close();
    service.close();
    exposed.close();
    target.close();
    arena.close();
    if (sdk != null) {
      sdk.close();
    }
  }

  /** Accepts every span and keeps none. */
  private static final class DiscardingExporter implements SpanExporter {
    @Override
    public CompletableResultCode export(Collection<SpanData> spans) {
      return CompletableResultCode.ofSuccess();
    }

    @Override
    public CompletableResultCode flush() {
      return CompletableResultCode.ofSuccess();
    }

    @Override
    public CompletableResultCode shutdown() {
      return CompletableResultCode.ofSuccess();
    }
  }
}
