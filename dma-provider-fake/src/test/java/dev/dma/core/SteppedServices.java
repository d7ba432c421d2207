package dev.dma.core;

import dev.dma.core.internal.FabricWorker;
import dev.dma.core.internal.WorkerChannel;
import java.lang.reflect.Field;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Executor;
import java.util.function.Consumer;
import java.util.random.RandomGenerator;

/**
 * Test-only: sets the package-private stepping seam ({@link Stepping}) on a builder, for the seeded
 * simulator in another package. A builder so marked starts no worker thread: each device's worker
 * goes to {@code workers} and the caller steps it; a group's off-thread deliveries go to {@code
 * deliveries}; its device choice draws from {@code random}. The builder must share a checksum pool
 * (a closed one runs each job on the thread that submits it).
 *
 * <p>Threads: the caller's only.
 */
public final class SteppedServices {
  private SteppedServices() {}

  /**
   * Marks {@code builder} (a service's, a group's or the async API's) as stepped.
   *
   * @param <B> the builder type
   * @param builder the builder
   * @param workers receives each worker, in device order
   * @param deliveries runs or queues a group's off-thread completions
   * @param random the group's device choice
   * @return the builder
   */
  public static <B extends ServiceOptions<B>> B stepped(
      B builder, Consumer<FabricWorker<?>> workers, Executor deliveries, RandomGenerator random) {
    builder.stepping = new Stepping(workers, deliveries, random);
    return builder;
  }

  /**
   * The worker channels of a stepped service, group, or async API over either, in device order: the
   * simulator sends its peer and pin commands on them directly, because the services' own {@code
   * addPeer} and {@code register} wait for a worker that only the caller runs.
   *
   * @param front a {@link FabricService}, {@link FabricServiceGroup} or {@link AsyncFabricService}
   * @return the channels
   */
  public static List<WorkerChannel> channels(Object front) {
    Object inner = front instanceof AsyncFabricService<?> async ? field(async, "inner") : front;
    List<? extends FabricService<?>> services =
        inner instanceof FabricServiceGroup<?> group
            ? group.services()
            : List.of((FabricService<?>) inner);
    List<WorkerChannel> channels = new ArrayList<>();
    for (FabricService<?> service : services) {
      channels.add((WorkerChannel) field(service, "channel"));
    }
    return channels;
  }

  private static Object field(Object owner, String name) {
    try {
      Field field = owner.getClass().getDeclaredField(name);
      field.setAccessible(true);
      return field.get(owner);
    } catch (ReflectiveOperationException e) {
      throw new IllegalStateException(e);
    }
  }
}
