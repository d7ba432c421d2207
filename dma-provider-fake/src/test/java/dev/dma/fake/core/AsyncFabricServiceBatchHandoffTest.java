package dev.dma.fake.core;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dma.api.Advertisement;
import dev.dma.api.Completion;
import dev.dma.api.DmaConfiguration;
import dev.dma.api.RemoteAccess;
import dev.dma.api.TransferRequest;
import dev.dma.core.AsyncFabricService;
import dev.dma.fake.FakeEndpoint;
import dev.dma.fake.FakeFabric;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executor;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * How completions reach their futures: one executor task per completion batch, completing every
 * future of the batch exactly once, in order; a rejecting executor completes them inline.
 */
@Timeout(60)
class AsyncFabricServiceBatchHandoffTest {
  private static final int TRANSFERS = 8;

  private FakeFabric fabric;
  private Arena arena;
  private FakeEndpoint target;
  private Advertisement ad;
  private ExecutorService pool;

  @BeforeEach
  void setUp() {
    fabric = FakeFabric.create("async-batch-test");
    arena = Arena.ofShared();
    target = fabric.openEndpoint();
    MemorySegment remote = arena.allocate(4096);
    ad = target.expose(remote, RemoteAccess.READ_WRITE).advertisement();
    pool = Executors.newSingleThreadExecutor(r -> new Thread(r, "user-stages"));
  }

  @AfterEach
  void tearDown() {
    pool.shutdownNow();
    target.close();
    arena.close();
    fabric.close();
  }

  private AsyncFabricService<Buffer> start(Executor executor) {
    return AsyncFabricService.<Buffer>builder(
            DmaConfiguration.builder().providers("fake").interfaces(List.of(fabric.name())).build())
        .executor(executor)
        .start();
  }

  /** Submits TRANSFERS writes while completions are held, then releases them all at once. */
  private List<CompletableFuture<Completion<Buffer>>> heldBatch(
      AsyncFabricService<Buffer> service, List<Buffer> buffers, List<String> order) {
    fabric.script().holdCompletions();
    List<CompletableFuture<Completion<Buffer>>> futures = new ArrayList<>();
    for (int i = 0; i < TRANSFERS; i++) {
      Buffer buffer = new Buffer(1, arena.allocate(64));
      buffers.add(buffer);
      CompletableFuture<Completion<Buffer>> future =
          service.transfer(TransferRequest.write(1, ad, buffer));
      int index = i;
      future.thenRun(
          () -> {
            synchronized (order) {
              order.add(index + "@" + Thread.currentThread().getName());
            }
          });
      futures.add(future);
    }
    fabric.script().stopHolding();
    fabric.script().releaseCompletions();
    return futures;
  }

  /**
   * Waits through a combined future: a thread waiting in {@code get} on a transfer's own future
   * would help run its stages (CompletableFuture's waiters do), hiding which thread ran them.
   */
  private static void awaitAll(List<CompletableFuture<Completion<Buffer>>> futures)
      throws Exception {
    CompletableFuture.allOf(futures.toArray(CompletableFuture<?>[]::new)).get(10, TimeUnit.SECONDS);
  }

  @Test
  void aBatchOfCompletionsIsOneExecutorTaskCompletingEveryFutureOnceInOrder() throws Exception {
    AtomicInteger tasks = new AtomicInteger();
    Executor counting =
        task -> {
          tasks.incrementAndGet();
          pool.execute(task);
        };
    try (AsyncFabricService<Buffer> service = start(counting)) {
      List<Buffer> buffers = new ArrayList<>();
      List<String> order = new ArrayList<>();
      List<CompletableFuture<Completion<Buffer>>> futures = heldBatch(service, buffers, order);
      awaitAll(futures);
      for (int i = 0; i < TRANSFERS; i++) {
        Completion<Buffer> done = futures.get(i).join();
        assertTrue(done.outcome().isDone());
        assertSame(buffers.get(i), done.context());
      }
      assertEquals(0, service.outstanding());
      // The held completions were reaped together: one task for the whole batch, not eight.
      assertEquals(1, tasks.get(), "executor tasks for " + TRANSFERS + " completions");
      pool.submit(() -> {}).get(10, TimeUnit.SECONDS); // the stages ran before this
      List<String> expected = new ArrayList<>();
      for (int i = 0; i < TRANSFERS; i++) {
        expected.add(i + "@user-stages");
      }
      synchronized (order) {
        assertEquals(expected, order, "every future once, in completion order, on the executor");
      }
    }
  }

  @Test
  void aRejectingExecutorCompletesTheWholeBatchInline() throws Exception {
    AtomicInteger rejected = new AtomicInteger();
    Executor rejecting =
        task -> {
          rejected.incrementAndGet();
          throw new RejectedExecutionException("full");
        };
    try (AsyncFabricService<Buffer> service = start(rejecting)) {
      List<Buffer> buffers = new ArrayList<>();
      List<String> order = new ArrayList<>();
      List<CompletableFuture<Completion<Buffer>>> futures = heldBatch(service, buffers, order);
      awaitAll(futures);
      for (int i = 0; i < TRANSFERS; i++) {
        assertSame(buffers.get(i), futures.get(i).join().context());
      }
      assertEquals(1, rejected.get());
      // The last future's stages may still be running on the worker when allOf completes.
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
      while (true) {
        synchronized (order) {
          if (order.size() >= TRANSFERS || System.nanoTime() > deadline) {
            break;
          }
        }
        Thread.sleep(1); // polling a condition, not ordering events
      }
      synchronized (order) {
        assertEquals(TRANSFERS, order.size(), String.valueOf(order));
        for (String each : order) {
          assertTrue(each.contains("@fabric-"), each);
        }
      }
    }
  }
}
