package dev.dma.core;

import dev.dma.api.DmaConfiguration;
import io.opentelemetry.api.GlobalOpenTelemetry;
import io.opentelemetry.api.OpenTelemetry;
import java.util.Objects;
import java.util.function.Consumer;
import org.jspecify.annotations.Nullable;

/**
 * The options every service builder takes beyond the endpoint's ({@link EndpointOptions}), held
 * once: {@link FabricService.Builder}, {@link FabricServiceGroup.Builder} and {@link
 * AsyncFabricService.Builder} extend it, and a builder that starts other services hands them its
 * options whole, so an option added here reaches every service a group or the futures API starts.
 *
 * <p>Not thread-safe: one thread fills a builder and starts it. Applications do not extend it.
 *
 * @param <B> the builder's own type, which every setter returns
 */
public abstract class ServiceOptions<B extends ServiceOptions<B>> extends EndpointOptions<B> {
  @Nullable ChecksumPool pool;
  NanoClock clock = NanoClock.system();
  @Nullable OpenTelemetry openTelemetry;
  boolean traceWorkerPasses;
  Consumer<byte[]> addressListener = address -> {};
  // Test-only (Stepping): null in production, where workers run on threads of their own.
  @Nullable Stepping stepping;

  ServiceOptions(DmaConfiguration configuration) {
    super(configuration);
  }

  /**
   * Shares a checksum pool, which the caller keeps and closes after the service (over a group,
   * every device's service uses it); by default the service or group creates and closes its own.
   *
   * @param value the pool
   * @return this builder
   */
  public B checksumPool(ChecksumPool value) {
    this.pool = Objects.requireNonNull(value, "checksumPool");
    return self();
  }

  /**
   * Sets the clock of the completion and progress deadlines (every device's); by default {@link
   * NanoClock#system()} (tests step one by hand).
   *
   * @param value the clock
   * @return this builder
   */
  public B clock(NanoClock value) {
    this.clock = Objects.requireNonNull(value, "clock");
    return self();
  }

  /**
   * Sets where spans and metrics go (over a group, each service's {@code dma.device} attribute
   * names its device); by default {@link GlobalOpenTelemetry}, which records nothing (at no cost
   * per transfer) until the application installs an SDK.
   *
   * @param value the application's OpenTelemetry
   * @return this builder
   */
  public B openTelemetry(OpenTelemetry value) {
    this.openTelemetry = Objects.requireNonNull(value, "openTelemetry");
    return self();
  }

  /**
   * Records a {@code dma.worker_pass} span for every worker pass that moved something: a debug aid
   * with a real cost, off by default.
   *
   * @param value whether to trace worker passes
   * @return this builder
   */
  public B traceWorkerPasses(boolean value) {
    this.traceWorkerPasses = value;
    return self();
  }

  /**
   * Tells {@code value} an endpoint's new address whenever its worker reset the endpoint (to
   * recover from lost completions) and the address changed, so clients that insert the server's
   * address (efa-direct targets) can insert the new one. It runs on that endpoint's worker thread
   * (over a group, on several threads over the group's life), after the new address is in {@code
   * localAddresses()}: it must not block or call back into the service.
   *
   * @param value the listener
   * @return this builder
   */
  public B onLocalAddressChange(Consumer<byte[]> value) {
    this.addressListener = Objects.requireNonNull(value, "onLocalAddressChange");
    return self();
  }

  /** Hands every option held here to {@code other}, a builder of a service this one starts. */
  <O extends ServiceOptions<O>> O copyTo(O other) {
    other.provider = provider;
    other.pool = pool;
    other.clock = clock;
    other.openTelemetry = openTelemetry;
    other.traceWorkerPasses = traceWorkerPasses;
    other.addressListener = addressListener;
    other.stepping = stepping;
    return other;
  }

  /** The OpenTelemetry to use: the one set, or {@link GlobalOpenTelemetry}. */
  OpenTelemetry openTelemetryOrGlobal() {
    return openTelemetry != null ? openTelemetry : GlobalOpenTelemetry.get();
  }
}
