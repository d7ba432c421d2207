package dev.dma.fake.core;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dma.api.Advertisement;
import dev.dma.api.Checksum;
import dev.dma.api.Checksums;
import dev.dma.api.Completion;
import dev.dma.api.Direction;
import dev.dma.api.DmaConfiguration;
import dev.dma.api.DmaException;
import dev.dma.api.RemoteAccess;
import dev.dma.api.TransferRequest;
import dev.dma.core.FabricService;
import dev.dma.fake.FakeEndpoint;
import dev.dma.fake.FakeFabric;
import dev.dma.fake.FakeScript;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicIntegerArray;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Every submitted transfer gets exactly one completion, whatever fails: four submitting threads, a
 * million transfers, and a script injecting completion errors, {@code -FI_EAGAIN} storms, held and
 * reordered completions, failed completion-queue reads, and writes to a silent target whose
 * completions never come (each one ends by the completion deadline and an endpoint reset, which
 * catches other clients' transfers in flight: reads are posted again, writes fail saying they may
 * have landed), all from fixed seeds.
 *
 * <p>Bounded as a whole, and meaningful on a loaded machine: a worker that stalls (no CPU, a slow
 * completer) must not turn into deadline failures of transfers whose completions were waiting.
 */
class ExactlyOnceStressTest {
  private static final int THREADS = 4;
  private static final int PER_THREAD = 250_000;
  private static final int TOTAL = THREADS * PER_THREAD;
  private static final int SLICE = 64;
  private static final int SLICES = 1024;

  @Test
  @Timeout(300)
  void aMillionTransfersUnderFaultsCompleteExactlyOnce() throws Exception {
    AtomicIntegerArray seen = new AtomicIntegerArray(TOTAL);
    AtomicInteger duplicates = new AtomicInteger();
    AtomicInteger failures = new AtomicInteger();
    AtomicInteger badChecksums = new AtomicInteger();
    // Failures of the silent writes (by the deadline, or as unreachable when an earlier one's
    // deadline marked their client dead again), and anything else of another kind than injected.
    AtomicInteger silentFailures = new AtomicInteger();
    // Transfers of live clients caught in flight by a silent write's reset: writes fail (they may
    // have landed), reads fail only when out of reposts.
    AtomicInteger caughtByReset = new AtomicInteger();
    List<String> unexpected = new java.util.concurrent.CopyOnWriteArrayList<>();
    AtomicLong completed = new AtomicLong();
    Semaphore[] windows = new Semaphore[THREADS];
    for (int t = 0; t < THREADS; t++) {
      windows[t] = new Semaphore(512);
    }
    try (FakeFabric fabric = FakeFabric.create("exactly-once");
        Arena arena = Arena.ofShared()) {
      FakeEndpoint target = fabric.openEndpoint();
      // Writes land in the first SLICES slices; reads read the second SLICES, which no write
      // touches and which hold a known pattern, so every checksum has one right value.
      MemorySegment remote = arena.allocate(2L * SLICE * SLICES);
      int[] patternCrc = new int[SLICES];
      for (long i = SLICE * (long) SLICES; i < remote.byteSize(); i++) {
        remote.set(java.lang.foreign.ValueLayout.JAVA_BYTE, i, (byte) (i * 13 + 5));
      }
      for (int s = 0; s < SLICES; s++) {
        patternCrc[s] = Checksums.crc32c(remote.asSlice((long) (SLICES + s) * SLICE, SLICE));
      }
      Advertisement ad = target.expose(remote, RemoteAccess.READ_WRITE).advertisement();
      FakeEndpoint silent = fabric.openEndpoint();
      MemorySegment silentMemory = arena.allocate(SLICE);
      Advertisement silentAd = silent.expose(silentMemory, RemoteAccess.READ_WRITE).advertisement();
      byte[] silentAddress = silent.localAddress();
      MemorySegment sources = arena.allocate((long) SLICE * SLICES);
      for (long i = 0; i < sources.byteSize(); i++) {
        sources.set(java.lang.foreign.ValueLayout.JAVA_BYTE, i, (byte) (i * 31 + 7));
      }
      int[] sourceCrc = new int[SLICES];
      for (int s = 0; s < SLICES; s++) {
        sourceCrc[s] = Checksums.crc32c(sources.asSlice((long) s * SLICE, SLICE));
      }

      AtomicLong againCalls = new AtomicLong();
      FakeScript script = fabric.script();
      script
          .failOp(op -> op.index() % 101 == 7, 5, -5, "injected fault")
          .againWhile(() -> againCalls.incrementAndGet() % 37 == 0)
          .holdCompletions(op -> op.index() % 53 == 0)
          .completionOrder(FakeScript.CompletionOrder.NEWEST_FIRST)
          .loseCompletions(op -> java.util.Arrays.equals(op.peer(), silentAddress));

      DmaConfiguration configuration =
          DmaConfiguration.builder()
              .providers("fake")
              .interfaces(List.of(fabric.name()))
              .completionDeadline(java.time.Duration.ofSeconds(1))
              .build();
      try (FabricService<Buffer> service =
          FabricService.<Buffer>builder(configuration)
              .completer(
                  batch -> {
                    for (Completion<Buffer> completion : batch) {
                      int id = (int) completion.context().id;
                      if (seen.getAndIncrement(id) != 0) {
                        duplicates.incrementAndGet();
                      }
                      if (completion.outcome().isDone()) {
                        var checksum = completion.outcome().done().checksum();
                        if (isRead(id)) {
                          // What landed is the pattern, whether or not it was checksummed.
                          int landed = Checksums.crc32c(completion.context().segment);
                          if (landed != patternCrc[id % SLICES]
                              || (checksum.isPresent() && checksum.getAsInt() != landed)) {
                            badChecksums.incrementAndGet();
                          }
                        } else if (checksum.isPresent()
                            && checksum.getAsInt() != sourceCrc[id % SLICES]) {
                          badChecksums.incrementAndGet();
                        }
                      } else {
                        failures.incrementAndGet();
                        var error = completion.outcome().error();
                        if (isSilent(id)) {
                          if (error.reason() == DmaException.Reason.DEADLINE
                              || error.reason() == DmaException.Reason.PEER_UNREACHABLE
                              || error.reason() == DmaException.Reason.ENDPOINT_RESET) {
                            silentFailures.incrementAndGet();
                          } else {
                            unexpected.add(id + ": " + error);
                          }
                        } else if (error.reason() == DmaException.Reason.ENDPOINT_RESET
                            && error.targetMemory()
                                == (isRead(id)
                                    ? DmaException.TargetMemory.UNCHANGED
                                    : DmaException.TargetMemory.MAY_HAVE_CHANGED)) {
                          caughtByReset.incrementAndGet();
                        } else if (error.fabricErrno() != 5) {
                          unexpected.add(id + ": " + error);
                        }
                      }
                      windows[id / PER_THREAD].release();
                      completed.incrementAndGet();
                    }
                  })
              .start()) {
        // Held completions and failed CQ reads come from a side thread, at random moments.
        Thread chaos =
            Thread.ofPlatform()
                .start(
                    () -> {
                      SplittableRandom random = new SplittableRandom(1);
                      while (completed.get() < TOTAL) {
                        script.releaseCompletions();
                        if (random.nextInt(4) == 0) {
                          script.failNextCqRead(random.nextInt(5), 5);
                        }
                        try {
                          Thread.sleep(1);
                        } catch (InterruptedException e) {
                          return;
                        }
                      }
                    });
        List<Thread> submitters = new ArrayList<>();
        for (int t = 0; t < THREADS; t++) {
          int thread = t;
          submitters.add(
              Thread.ofPlatform()
                  .start(
                      () -> {
                        for (int i = 0; i < PER_THREAD; i++) {
                          int id = thread * PER_THREAD + i;
                          int slice = id % SLICES;
                          windows[thread].acquireUninterruptibly();
                          if (isSilent(id)) {
                            // A write to the silent target, from a client revived first (an
                            // earlier one's deadline marked it dead): its completion never
                            // comes, so the completion deadline and a reset end it.
                            long silentClient = 100 + thread;
                            service.addPeer(silentClient, silentAd.address());
                            assertTrue(
                                service.submit(
                                    TransferRequest.write(
                                        silentClient,
                                        silentAd,
                                        new Buffer(id, sources.asSlice(0, SLICE)))));
                            continue;
                          }
                          MemorySegment local = sources.asSlice((long) slice * SLICE, SLICE);
                          boolean read = isRead(id);
                          long offset = (long) (read ? SLICES + slice : slice) * SLICE;
                          Advertisement at =
                              new Advertisement(
                                  ad.address(), ad.remoteKey(), ad.remoteAddress() + offset);
                          // Reads land in a private buffer so writes keep the sources intact.
                          Buffer buffer =
                              read ? new Buffer(id, arena.allocate(SLICE)) : new Buffer(id, local);
                          TransferRequest<Buffer> request =
                              TransferRequest.of(
                                      thread,
                                      at,
                                      read ? Direction.fromPeer(SLICE) : Direction.TO_PEER,
                                      buffer)
                                  .withChecksum(i % 16 == 0 ? Checksum.CRC32C : Checksum.NONE);
                          assertTrue(service.submit(request));
                        }
                      }));
        }
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(200);
        for (Thread submitter : submitters) {
          assertTrue(
              submitter.join(java.time.Duration.ofNanos(Math.max(1, deadline - System.nanoTime()))),
              "a submitter was still blocked on its window; completed " + completed.get());
        }
        while (completed.get() < TOTAL && System.nanoTime() < deadline) {
          Thread.sleep(5);
        }
        chaos.interrupt();
        assertTrue(chaos.join(java.time.Duration.ofSeconds(10)), "the chaos thread did not stop");
        assertEquals(TOTAL, completed.get(), "completions");
        assertEquals(0, service.outstanding());
      }
      assertEquals(0, duplicates.get(), "duplicate completions");
      for (int id = 0; id < TOTAL; id++) {
        if (seen.get(id) != 1) {
          throw new AssertionError("transfer " + id + " completed " + seen.get(id) + " times");
        }
      }
      assertEquals(0, badChecksums.get(), "wrong checksums or landed bytes");
      // Each written slice took many writes that succeeded, each of the same source slice. (Every
      // fourth transfer is a read, and a transfer's slice is its id modulo SLICES, so slices
      // 3, 7, 11, ... of the write half are only ever read from the read half, and stay zero.)
      int zeroCrc = Checksums.crc32c(new byte[SLICE]);
      for (int s = 0; s < SLICES; s++) {
        assertEquals(
            s % 4 == 3 ? zeroCrc : sourceCrc[s],
            Checksums.crc32c(remote.asSlice((long) s * SLICE, SLICE)),
            "write slice " + s);
        assertEquals(
            patternCrc[s],
            Checksums.crc32c(remote.asSlice((long) (SLICES + s) * SLICE, SLICE)),
            "a write landed in read slice " + s);
      }
      assertTrue(failures.get() > 0, "the script injected no failure");
      assertTrue(fabric.counters().againAnswers() > 0, "the script injected no EAGAIN");
      // 4 threads x 10 silent writes, each failed; nothing else failed but what was injected.
      assertEquals(40, silentFailures.get(), "silent writes that failed");
      assertEquals(List.of(), unexpected);
      assertTrue(fabric.counters().resets() > 0, "no endpoint reset");
      assertTrue(allZero(silentMemory), "a lost write landed");
      assertEquals(0, fabric.counters().violations(), fabric.counters().lastViolation());
      target.close();
      silent.close();
    }
  }

  /** Whether transfer {@code id} is a read (of a slice no write touches). */
  private static boolean isRead(int id) {
    return !isSilent(id) && (id % PER_THREAD) % 4 == 3;
  }

  /** Whether transfer {@code id} is one of the writes to the silent target. */
  private static boolean isSilent(int id) {
    return (id % PER_THREAD) % 25_000 == 12_345;
  }

  private static boolean allZero(MemorySegment memory) {
    for (long i = 0; i < memory.byteSize(); i++) {
      if (memory.get(java.lang.foreign.ValueLayout.JAVA_BYTE, i) != 0) {
        return false;
      }
    }
    return true;
  }
}
