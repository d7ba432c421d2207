package dev.dma.core.internal;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dma.api.BatchCompleter;
import dev.dma.api.Checksums;
import dev.dma.api.Completion;
import dev.dma.api.DmaException;
import dev.dma.core.ChecksumPool;
import io.opentelemetry.api.OpenTelemetry;
import io.opentelemetry.api.trace.Span;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.reflect.Proxy;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.logging.Handler;
import java.util.logging.LogRecord;
import java.util.logging.Logger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Issue 18, the checksum pool's part: no throwable from a user callback (the completer, or the
 * application's telemetry inside the checksum step) or from the checksum itself loses a completion.
 * A failing member fails alone, every other member completes exactly once, a throwing completer's
 * batch counts as delivered (as on the worker), and the pool keeps serving.
 */
@Timeout(60)
class ChecksumBatchTest {
  private final WorkerTelemetry telemetry =
      new WorkerTelemetry(new Telemetry(OpenTelemetry.noop(), "fake", "test", false));
  private final Arena arena = Arena.ofShared();
  private final ChecksumPool pool = new ChecksumPool(1);
  private final Logger poolLog = Logger.getLogger(ChecksumPool.class.getName());
  private final List<LogRecord> poolRecords = new CopyOnWriteArrayList<>();
  private final Handler capture =
      new Handler() {
        @Override
        public void publish(LogRecord logRecord) {
          poolRecords.add(logRecord);
        }

        @Override
        public void flush() {}

        @Override
        public void close() {}
      };

  @BeforeEach
  void capturePoolLog() {
    poolLog.addHandler(capture);
  }

  @AfterEach
  void closeAll() {
    poolLog.removeHandler(capture);
    pool.close();
    arena.close();
  }

  /** Records each batch; the first {@code throwing} calls throw what the test chose. */
  private static final class Hook implements BatchCompleter<String> {
    final LinkedBlockingQueue<List<Completion<String>>> batches = new LinkedBlockingQueue<>();
    final List<Throwable> toThrow = new CopyOnWriteArrayList<>();

    @Override
    public void complete(List<Completion<String>> batch) {
      batches.add(List.copyOf(batch));
      if (!toThrow.isEmpty()) {
        Throwable next = toThrow.removeFirst();
        if (next instanceof Error error) {
          throw error;
        }
        throw (RuntimeException) next;
      }
    }

    List<Completion<String>> take() throws InterruptedException {
      List<Completion<String>> batch = batches.poll(30, TimeUnit.SECONDS);
      assertNotNull(batch, "no batch within 30 s");
      return batch;
    }
  }

  /**
   * A wire span from the application's telemetry SDK whose every use throws {@code failure}: the
   * checksum step parents its span on it, so the throwable comes out of the step, as one from a
   * misbehaving SDK (or a stack overflow, or the heap running out) inside it would.
   */
  private static Span throwingSpan(Throwable failure) {
    return (Span)
        Proxy.newProxyInstance(
            Span.class.getClassLoader(),
            new Class<?>[] {Span.class},
            (proxy, method, args) -> {
              throw failure;
            });
  }

  private MemorySegment bytes(int seed) {
    MemorySegment segment = arena.allocate(256);
    for (int i = 0; i < 256; i++) {
      segment.set(ValueLayout.JAVA_BYTE, i, (byte) (seed * 31 + i));
    }
    return segment;
  }

  private static Map<String, Completion<String>> byContext(List<Completion<String>> batch) {
    Map<String, Completion<String>> map = new HashMap<>();
    for (Completion<String> completion : batch) {
      assertEquals(null, map.put(completion.context(), completion), "completed twice");
    }
    return map;
  }

  @Test
  void eachFailingMemberFailsAloneAndTheRestCompleteOnce() throws Exception {
    Hook hook = new Hook();
    ChecksumBatch<String> checksums = new ChecksumBatch<>(pool, hook, telemetry);
    MemorySegment good = bytes(1);
    Arena gone = Arena.ofShared();
    MemorySegment closed = gone.allocate(256);
    gone.close();
    DmaException reaped = new DmaException(DmaException.Kind.TRANSFER, "failed on the wire");
    checksums.add("good", good, 256, null, 1, null);
    checksums.add("overflow", bytes(2), 256, null, 1, throwingSpan(new StackOverflowError("test")));
    checksums.add("assertion", bytes(3), 256, null, 1, throwingSpan(new AssertionError("test")));
    checksums.add(
        "runtime", bytes(4), 256, null, 1, throwingSpan(new IllegalStateException("sdk")));
    checksums.add("arena closed", closed, 256, null, 1, null);
    checksums.add("wire error", bytes(5), 256, reaped, 1, null);
    checksums.add("partial", good, 100, null, 1, null);
    checksums.flush();

    Map<String, Completion<String>> done = byContext(hook.take());
    assertEquals(7, done.size());
    assertEquals(
        Checksums.crc32c(good), done.get("good").outcome().done().checksum().orElseThrow());
    assertEquals(
        Checksums.crc32c(good.asSlice(0, 100)),
        done.get("partial").outcome().done().checksum().orElseThrow());
    assertInstanceOf(StackOverflowError.class, cause(done.get("overflow")));
    assertInstanceOf(AssertionError.class, cause(done.get("assertion")));
    assertInstanceOf(IllegalStateException.class, cause(done.get("runtime")));
    assertInstanceOf(IllegalStateException.class, cause(done.get("arena closed")));
    assertSame(reaped, done.get("wire error").outcome().error());

    // The pool thread survived all of it.
    checksums.add("after", good, 256, null, 1, null);
    checksums.flush();
    assertTrue(hook.take().getFirst().outcome().isDone());
  }

  @Test
  void aFatalErrorInTheChecksumStepEscapesOnlyAfterTheWholeBatchWasDelivered() throws Exception {
    Hook hook = new Hook();
    ChecksumBatch<String> checksums = new ChecksumBatch<>(pool, hook, telemetry);
    OutOfMemoryError oom = new OutOfMemoryError("test: the heap ran out in the checksum step");
    checksums.add("before", bytes(1), 256, null, 1, null);
    checksums.add("oom", bytes(2), 256, null, 1, throwingSpan(oom));
    checksums.add("after", bytes(3), 256, null, 1, null);
    checksums.flush();

    Map<String, Completion<String>> done = byContext(hook.take());
    assertEquals(3, done.size());
    assertTrue(done.get("before").outcome().isDone());
    assertTrue(done.get("after").outcome().isDone());
    assertSame(oom, cause(done.get("oom")));
    // Delivered above, and only then rethrown to the pool, which logged it as fatal.
    waitForPoolRecord(oom);
    // And the pool carries on.
    checksums.add("next", bytes(4), 256, null, 1, null);
    checksums.flush();
    assertEquals("next", hook.take().getFirst().context());
  }

  @Test
  void aThrowingCompleterHasItsBatchCountedDeliveredAndThePoolCarriesOn() throws Exception {
    Hook hook = new Hook();
    hook.toThrow.add(new AssertionError("test: the completer's own assertion"));
    hook.toThrow.add(new IllegalArgumentException("test: a completer bug"));
    StackOverflowError overflow = new StackOverflowError("test: the completer recursed");
    hook.toThrow.add(overflow);
    ChecksumBatch<String> checksums = new ChecksumBatch<>(pool, hook, telemetry);
    List<String> delivered = new ArrayList<>();
    for (int round = 0; round < 4; round++) {
      checksums.add("a" + round, bytes(round), 256, null, 1, null);
      checksums.add("b" + round, bytes(round + 1), 256, null, 1, null);
      checksums.flush();
      for (Completion<String> completion : hook.take()) {
        assertTrue(completion.outcome().isDone());
        delivered.add(completion.context());
      }
    }
    assertEquals(List.of("a0", "b0", "a1", "b1", "a2", "b2", "a3", "b3"), delivered);
    // A fatal error from the completer reaches the pool (which logs it as fatal) once the batch
    // was delivered; the two before it were the completer's own and stayed in the job.
    waitForPoolRecord(overflow);
    assertTrue(
        poolRecords.stream().noneMatch(r -> r.getThrown() != overflow && r.getThrown() != null),
        "the pool was handed a non-fatal completer failure");
    // Never handed over again: a completer that threw may have taken any prefix of its batch.
    assertEquals(null, hook.batches.poll(200, TimeUnit.MILLISECONDS));
  }

  @Test
  void drainingAtShutdownFailsAThrowingMemberAndKeepsTheOthers() {
    Hook hook = new Hook();
    ChecksumBatch<String> checksums = new ChecksumBatch<>(pool, hook, telemetry);
    checksums.add("good", bytes(1), 256, null, 1, null);
    checksums.add("oom", bytes(2), 256, null, 1, throwingSpan(new OutOfMemoryError("test")));
    checksums.add("also good", bytes(3), 256, null, 1, null);
    List<Completion<String>> leftover = new ArrayList<>();
    checksums.drainInto(leftover);
    Map<String, Completion<String>> done = byContext(leftover);
    assertEquals(3, done.size());
    assertTrue(done.get("good").outcome().isDone());
    assertTrue(done.get("also good").outcome().isDone());
    assertFalse(done.get("oom").outcome().isDone());
    assertEquals(0, checksums.size());
  }

  private static Throwable cause(Completion<String> completion) {
    assertFalse(completion.outcome().isDone(), completion.context() + " should have failed");
    DmaException error = completion.outcome().error();
    assertTrue(
        error.getMessage().contains("checksum failed"), () -> "message: " + error.getMessage());
    return error.getCause();
  }

  private void waitForPoolRecord(Throwable thrown) throws InterruptedException {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
    while (poolRecords.stream().noneMatch(r -> r.getThrown() == thrown)) {
      assertTrue(System.nanoTime() < deadline, "the pool never reported " + thrown);
      Thread.sleep(5);
    }
  }
}
