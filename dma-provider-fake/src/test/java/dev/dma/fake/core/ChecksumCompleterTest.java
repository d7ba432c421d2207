package dev.dma.fake.core;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dma.api.Advertisement;
import dev.dma.api.BatchCompleter;
import dev.dma.api.Checksum;
import dev.dma.api.Completion;
import dev.dma.api.DmaConfiguration;
import dev.dma.api.RemoteAccess;
import dev.dma.api.TransferRequest;
import dev.dma.core.FabricService;
import dev.dma.fake.FakeEndpoint;
import dev.dma.fake.FakeFabric;
import java.lang.foreign.Arena;
import java.time.Duration;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A BatchCompleter that misbehaves on a checksum-pool thread, through the public API: throwing
 * (Errors included) loses nothing and stops nothing, and blocking does not hold close() past its
 * timeout.
 */
@Timeout(90)
class ChecksumCompleterTest {
  private static final AtomicInteger FABRICS = new AtomicInteger();

  private FakeFabric fabric;
  private FakeEndpoint target;
  private Arena arena;
  private Advertisement ad;

  @BeforeEach
  void openFabric() {
    fabric = FakeFabric.create("checksum-completer-" + FABRICS.incrementAndGet());
    target = fabric.openEndpoint();
    arena = Arena.ofShared();
    ad = target.expose(arena.allocate(1 << 16), RemoteAccess.READ_WRITE).advertisement();
  }

  @AfterEach
  void closeFabric() {
    target.close();
    fabric.close();
    arena.close();
  }

  private FabricService<Buffer> start(Duration closeTimeout, BatchCompleter<Buffer> completer) {
    DmaConfiguration configuration =
        DmaConfiguration.builder()
            .providers("fake")
            .interfaces(List.of(fabric.name()))
            .crcPoolThreads(1)
            .closeTimeout(closeTimeout)
            .build();
    return FabricService.<Buffer>builder(configuration).completer(completer).start();
  }

  private TransferRequest<Buffer> checksummed(long id) {
    return TransferRequest.write(1, ad, new Buffer(id, arena.allocate(256)))
        .withChecksum(Checksum.CRC32C);
  }

  @Test
  void aCompleterThrowingOnThePoolLosesNoOtherCompletionAndThePoolKeepsServing() throws Exception {
    Set<Long> seen = ConcurrentHashMap.newKeySet();
    LinkedBlockingQueue<Long> delivered = new LinkedBlockingQueue<>();
    AtomicInteger calls = new AtomicInteger();
    List<Throwable> throwing =
        List.of(
            new AssertionError("test: an assertion in the completer"),
            new StackOverflowError("test: the completer recursed"),
            new OutOfMemoryError("test: the completer ran out of heap"),
            new IllegalStateException("test: a completer bug"));
    BatchCompleter<Buffer> completer =
        batch -> {
          for (Completion<Buffer> completion : batch) {
            long id = completion.context().id;
            boolean checksummed =
                completion.outcome().isDone() && completion.outcome().done().checksum().isPresent();
            // A wrong or repeated completion shows up as an id the loop below does not expect.
            delivered.add(checksummed && seen.add(id) ? id : -1 - id);
          }
          int call = calls.getAndIncrement();
          if (call < throwing.size()) {
            Throwable next = throwing.get(call);
            if (next instanceof Error error) {
              throw error;
            }
            throw (RuntimeException) next;
          }
        };
    try (FabricService<Buffer> service = start(Duration.ofSeconds(5), completer)) {
      // One at a time, so each throwing call holds exactly one transfer: its batch counts as
      // delivered and the next transfer still reaches the completer.
      for (long id = 0; id < 8; id++) {
        assertTrue(service.submit(checksummed(id)));
        Long got = delivered.poll(30, TimeUnit.SECONDS);
        assertNotNull(got, "transfer " + id + " never completed");
        assertEquals(id, got.longValue());
      }
      assertEquals(null, delivered.poll(200, TimeUnit.MILLISECONDS), "a transfer came again");
      assertEquals(0, service.outstanding());
    }
    assertEquals(8, new HashSet<>(seen).size());
  }

  @Test
  void closeReturnsWithinItsTimeoutWhenTheCompleterBlocksAPoolThread() throws Exception {
    CountDownLatch entered = new CountDownLatch(1);
    CountDownLatch release = new CountDownLatch(1);
    BatchCompleter<Buffer> blocking =
        batch -> {
          if (Thread.currentThread().getName().startsWith("f-pool-")) {
            entered.countDown();
            try {
              // Bounded so nothing outlives the test even if the finally below never ran.
              release.await(60, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
              Thread.currentThread().interrupt();
            }
          }
        };
    Thread stuck = null;
    FabricService<Buffer> service = null;
    try {
      service = start(Duration.ofSeconds(1), blocking);
      assertTrue(service.submit(checksummed(1)));
      assertTrue(entered.await(30, TimeUnit.SECONDS), "the completer never ran on the pool");
      stuck =
          Thread.getAllStackTraces().keySet().stream()
              .filter(t -> t.getName().startsWith("f-pool-") && t.isAlive())
              .filter(
                  t ->
                      java.util.Arrays.stream(t.getStackTrace())
                          .anyMatch(f -> f.getClassName().contains("ChecksumCompleterTest")))
              .findFirst()
              .orElseThrow();
      long started = System.nanoTime();
      service.close();
      long tookMs = (System.nanoTime() - started) / 1_000_000;
      // Was: still blocked after 10 s. Now the close timeout (1 s) plus slack.
      assertTrue(tookMs < 5_000, "close() with close_timeout 1 s took " + tookMs + " ms");
      assertFalse(service.isRunning());
      assertTrue(stuck.isAlive(), "the pool thread is left behind while its completer blocks");
    } finally {
      release.countDown();
      if (service != null) {
        service.close(); // idempotent; closes it when an assertion above failed first
      }
    }
    stuck.join(30_000);
    assertFalse(stuck.isAlive(), "the released pool thread did not end");
  }
}
