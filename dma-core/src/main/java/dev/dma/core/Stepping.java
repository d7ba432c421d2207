package dev.dma.core;

import dev.dma.core.internal.FabricWorker;
import java.util.concurrent.Executor;
import java.util.function.Consumer;
import java.util.random.RandomGenerator;

/**
 * Test-only: a service or group built to be stepped by its caller instead of run by threads, for
 * the seeded simulator (dma-provider-fake's {@code dev.dma.fake.sim}). Set on a builder's options
 * (package-private, so only code in this package, such as a test helper placed in it, can set it);
 * production builders never carry one, and then nothing here is consulted.
 *
 * <p>With it: each service opens its endpoint and builds its {@link FabricWorker} on the thread
 * that calls {@code start()}, hands the worker to {@link #workers} and starts no thread (the caller
 * drives it with {@link FabricWorker#doWork}; {@code close} then only closes the channel, and the
 * caller steps the worker until it is finished); a group's striping hands the completions it would
 * deliver off the submitting thread to {@link #deliveries} instead of a checksum-pool or platform
 * thread; a group chooses devices with {@link #random} instead of {@link
 * java.util.concurrent.ThreadLocalRandom}, and judges its rails on the builder's clock. The caller
 * must share a checksum pool (a closed one runs each job inline), or the service would start one.
 *
 * <p>Threads: the one caller that starts and steps everything.
 *
 * @param workers receives each device's worker, in device order
 * @param deliveries runs (or queues, for the caller to run later) a striped transfer's completion
 * @param random the group's device choice
 */
record Stepping(Consumer<FabricWorker<?>> workers, Executor deliveries, RandomGenerator random) {}
