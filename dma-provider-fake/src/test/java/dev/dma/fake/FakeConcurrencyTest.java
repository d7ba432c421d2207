package dev.dma.fake;

import static dev.dma.spi.FabricEndpoint.POSTED;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dma.spi.CompletionSink;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;

/** Several threads on one fabric; every hand-off is explicit, so nothing depends on timing. */
class FakeConcurrencyTest {
  private static final int OPS = 20_000;

  @Test
  void registrationsCloseOnAnotherThreadWhilePosting() throws Exception {
    try (Pair pair = new Pair(8, 4096, script -> script.requireLocalRegistration(true))) {
      MemorySegment local = pair.local(64, 1);
      long key = pair.region.advertisement().remoteKey();
      // The poster registers per op and hands each reaped op's registration to the closer thread,
      // as a cache does when a lease drops on a checksum-pool thread.
      BlockingQueue<Long> toClose = new ArrayBlockingQueue<>(OPS + 1);
      AtomicReference<Throwable> closerFailure = new AtomicReference<>();
      Thread closer =
          new Thread(
              () -> {
                try {
                  for (int i = 0; i < OPS; i++) {
                    Long registration = toClose.poll(30, TimeUnit.SECONDS);
                    if (registration == null) {
                      throw new AssertionError("the poster stopped handing over registrations");
                    }
                    pair.initiator.deregister(registration);
                  }
                } catch (Throwable failure) {
                  closerFailure.set(failure);
                }
              },
              "closer");
      closer.start();

      long[] registrationBySlot = new long[8];
      int[] completed = new int[1];
      CompletionSink sink =
          new CompletionSink() {
            @Override
            public void completed(int slot) {
              completed[0]++;
              toClose.add(registrationBySlot[slot]);
            }

            @Override
            public void failed(int slot, int errno, int providerErrno, String message) {
              throw new AssertionError(message);
            }
          };
      int posted = 0;
      while (completed[0] < OPS) {
        for (int slot = 0; slot < 8 && posted < OPS; slot++) {
          if (posted - completed[0] >= 8) {
            break;
          }
          int free = posted % 8;
          long registration = pair.initiator.register(local.address(), 64);
          registrationBySlot[free] = registration;
          assertEquals(
              POSTED,
              pair.initiator.postWrite(
                  free,
                  pair.peer,
                  local.address(),
                  64,
                  pair.initiator.descriptor(registration),
                  (posted % 64) * 64L,
                  key));
          posted++;
        }
        pair.initiator.reap(sink, 10);
      }
      assertTrue(closer.join(Duration.ofSeconds(30)), "the closer did not finish");
      if (closerFailure.get() != null) {
        throw new AssertionError(closerFailure.get());
      }
      FakeCounters counters = pair.counters();
      assertEquals(0, counters.violations(), counters.lastViolation());
      assertEquals(OPS, counters.registrations());
      assertEquals(OPS, counters.deregistrations());
      assertEquals(0, counters.liveRegistrations());
      assertEquals(OPS, counters.completions());
    }
  }

  @Test
  void aTestThreadReleasesHeldCompletionsWhileTheOwnerReaps() throws Exception {
    try (Pair pair = new Pair(4, 64)) {
      pair.fabric.script().holdCompletions();
      MemorySegment local = pair.local(8, 0);
      for (int slot = 0; slot < 4; slot++) {
        pair.write(slot, local, 0);
      }
      RecordingSink sink = new RecordingSink();
      Thread releaser = new Thread(() -> pair.fabric.script().releaseCompletionsReversed());
      releaser.start();
      // Spins until the release lands; it must, whatever the scheduling (within 30 s).
      long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
      while (sink.entries.size() < 4) {
        assertTrue(System.nanoTime() < deadline, "released completions never reaped");
        pair.initiator.reap(sink, 4);
        Thread.onSpinWait();
      }
      assertTrue(releaser.join(Duration.ofSeconds(30)), "the releaser did not finish");
      assertEquals(java.util.List.of(3, 2, 1, 0), sink.slots());
    }
  }

  @Test
  void aTargetProgressesOnItsOwnThread() throws Exception {
    try (Pair pair = new Pair(4, 4096, script -> script.targetProgressRequired(true))) {
      MemorySegment local = pair.local(64, 2);
      java.util.concurrent.atomic.AtomicBoolean done =
          new java.util.concurrent.atomic.AtomicBoolean();
      Thread target =
          new Thread(
              () -> {
                while (!done.get()) {
                  pair.target.progress();
                  Thread.onSpinWait();
                }
              });
      target.start();
      int[] completed = new int[1];
      CompletionSink sink =
          new CompletionSink() {
            @Override
            public void completed(int slot) {
              completed[0]++;
            }

            @Override
            public void failed(int slot, int errno, int providerErrno, String message) {
              throw new AssertionError(message);
            }
          };
      int posted = 0;
      long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
      try {
        while (completed[0] < 2_000) {
          assertTrue(System.nanoTime() < deadline, completed[0] + " of 2000 within 60 s");
          while (posted < 2_000 && posted - completed[0] < 4) {
            assertEquals(POSTED, pair.write(posted % 4, local, 0));
            posted++;
          }
          pair.initiator.reap(sink, 4);
        }
      } finally {
        // Also on failure: the target thread would otherwise spin for the rest of the run.
        done.set(true);
        assertTrue(target.join(Duration.ofSeconds(30)), "the target thread did not stop");
      }
      assertEquals(0, pair.counters().violations(), pair.counters().lastViolation());
      assertEquals(2_000 * 64L, pair.counters().bytesWritten());
    }
  }
}
