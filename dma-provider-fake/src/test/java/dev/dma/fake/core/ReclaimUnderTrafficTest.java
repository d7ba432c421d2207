package dev.dma.fake.core;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dma.api.Advertisement;
import dev.dma.api.CacheableSpan;
import dev.dma.api.Checksum;
import dev.dma.api.Checksums;
import dev.dma.api.Completion;
import dev.dma.api.DmaConfiguration;
import dev.dma.api.RemoteAccess;
import dev.dma.api.TransferRequest;
import dev.dma.core.FabricService;
import dev.dma.fake.FakeEndpoint;
import dev.dma.fake.FakeFabric;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;

/**
 * Descriptors stay valid while reclaims run underneath, with transfers in flight: submitters lease
 * cached spans while another thread invalidates them in a loop, on a fabric that fails any post
 * whose descriptor is stale or does not cover its buffer (as EFA would corrupt or fault).
 */
class ReclaimUnderTrafficTest {
  private static final int SPANS = 8;
  private static final int SPAN_BYTES = 32 * 1024;
  private static final int OP_BYTES = 1024;

  @Test
  void noPostEverUsesAClosedRegistration() throws Exception {
    try (FakeFabric fabric = FakeFabric.create("reclaim-under-traffic");
        Arena arena = Arena.ofShared()) {
      fabric.script().requireLocalRegistration(true).holdCompletions(op -> op.index() % 7 == 0);
      FakeEndpoint target = fabric.openEndpoint();
      MemorySegment remote = arena.allocate(SPAN_BYTES);
      Advertisement ad = target.expose(remote, RemoteAccess.READ_WRITE).advertisement();
      MemorySegment pool = arena.allocate((long) SPANS * SPAN_BYTES, 4096);
      for (long i = 0; i < pool.byteSize(); i++) {
        pool.set(java.lang.foreign.ValueLayout.JAVA_BYTE, i, (byte) (i * 3));
      }
      CacheableSpan[] spans = new CacheableSpan[SPANS];
      for (int s = 0; s < SPANS; s++) {
        spans[s] = CacheableSpan.of(pool.asSlice((long) s * SPAN_BYTES, SPAN_BYTES));
      }
      AtomicLong completed = new AtomicLong();
      AtomicInteger failures = new AtomicInteger();
      AtomicInteger badChecksums = new AtomicInteger();
      Semaphore window = new Semaphore(256);
      DmaConfiguration configuration =
          DmaConfiguration.builder().providers("fake").interfaces(List.of(fabric.name())).build();
      int perThread = 20_000;
      int threads = 3;
      try (FabricService<Buffer> service =
          FabricService.<Buffer>builder(configuration)
              .completer(
                  batch -> {
                    for (Completion<Buffer> completion : batch) {
                      if (!completion.outcome().isDone()) {
                        failures.incrementAndGet();
                      } else if (completion.outcome().done().checksum().isPresent()
                          && completion.outcome().done().checksum().getAsInt()
                              != Checksums.crc32c(completion.context().segment)) {
                        badChecksums.incrementAndGet();
                      }
                      completed.incrementAndGet();
                      window.release();
                    }
                  })
              .start()) {
        AtomicBoolean done = new AtomicBoolean();
        Thread reclaimer =
            Thread.ofPlatform()
                .start(
                    () -> {
                      int round = 0;
                      while (!done.get()) {
                        CacheableSpan span = spans[round++ % SPANS];
                        FabricService.invalidate(span.base(), span.end());
                        fabric.script().releaseCompletions();
                        Thread.onSpinWait();
                      }
                    });
        List<Thread> submitters = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
          int thread = t;
          submitters.add(
              Thread.ofPlatform()
                  .start(
                      () -> {
                        for (int i = 0; i < perThread; i++) {
                          int s = (i + thread) % SPANS;
                          long offset =
                              (long) s * SPAN_BYTES
                                  + (long) (i % (SPAN_BYTES / OP_BYTES)) * OP_BYTES;
                          Buffer buffer = new Buffer(i, pool.asSlice(offset, OP_BYTES), spans[s]);
                          // Bounded: lost completions would otherwise block this thread for ever.
                          try {
                            assertTrue(window.tryAcquire(30, TimeUnit.SECONDS), "no room in 30 s");
                          } catch (InterruptedException e) {
                            Thread.currentThread().interrupt();
                            return;
                          }
                          assertTrue(
                              service.submit(
                                  TransferRequest.write(thread, ad, buffer)
                                      .withChecksum(i % 8 == 0 ? Checksum.CRC32C : Checksum.NONE)));
                        }
                      }));
        }
        try {
          for (Thread submitter : submitters) {
            assertTrue(submitter.join(Duration.ofSeconds(60)), "a submitter did not finish");
          }
          long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
          while (completed.get() < (long) threads * perThread) {
            assertTrue(System.nanoTime() < deadline, completed.get() + " completed within 60 s");
            fabric.script().releaseCompletions();
            Thread.sleep(1);
          }
        } finally {
          // Also on failure: the reclaimer would otherwise spin for the rest of the run.
          done.set(true);
          assertTrue(reclaimer.join(Duration.ofSeconds(30)), "the reclaimer did not stop");
        }
        for (CacheableSpan span : spans) {
          FabricService.invalidate(span.base(), span.end());
        }
      }
      assertEquals(0, fabric.counters().violations(), fabric.counters().lastViolation());
      assertEquals(0, failures.get());
      assertEquals(0, badChecksums.get());
      assertTrue(
          fabric.counters().registrations() > SPANS, "the reclaims never forced a re-registration");
      assertEquals(fabric.counters().registrations(), fabric.counters().deregistrations());
      assertEquals(0, fabric.counters().liveRegistrations());
      target.close();
    }
  }
}
