package dev.dma.fake.core;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dma.api.Advertisement;
import dev.dma.api.Completion;
import dev.dma.api.DmaConfiguration;
import dev.dma.api.DmaException;
import dev.dma.api.RemoteAccess;
import dev.dma.api.TransferRequest;
import dev.dma.core.NanoClock;
import dev.dma.fake.FakeEndpoint;
import dev.dma.fake.FakeFabric;
import dev.dma.fake.OpMatcher;
import java.lang.foreign.Arena;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The worker's use of {@code FabricEndpoint.peerGone} (issue 20: a stale advertisement fails the
 * same way everywhere): a gone peer is told from a partitioned one, and the question is asked at a
 * bounded rate. The worker is stepped on the test's thread ({@link SteppedWorker}).
 */
@Timeout(60)
class GonePeerProbeTest {
  private static final AtomicInteger FABRICS = new AtomicInteger();
  private static final Duration PROGRESS_DEADLINE = Duration.ofMillis(1000);

  private FakeFabric fabric;
  private Arena arena;
  private final Recorder<Buffer> recorder = new Recorder<>();
  private SteppedWorker<Buffer> service;

  @BeforeEach
  void open() {
    fabric = FakeFabric.create("gone-peer-" + FABRICS.incrementAndGet());
    arena = Arena.ofShared();
    // Stepped on the test's thread, on the system clock: the deadline and the probes' rate are
    // the worker's, measured against the time the test measures.
    service =
        SteppedWorker.start(
            DmaConfiguration.builder()
                .providers("fake")
                .interfaces(List.of(fabric.name()))
                .progressDeadline(PROGRESS_DEADLINE)
                .build(),
            recorder,
            NanoClock.system());
    recorder.steppedBy(service);
  }

  @AfterEach
  void close() {
    service.close();
    fabric.close();
    arena.close();
  }

  private Advertisement expose(FakeEndpoint target) {
    return target.expose(arena.allocate(4096), RemoteAccess.READ_WRITE).advertisement();
  }

  private Completion<Buffer> write(long client, Advertisement ad, long id) throws Exception {
    assertTrue(
        service.submit(TransferRequest.write(client, ad, new Buffer(id, arena.allocate(64)))));
    return recorder.take();
  }

  /**
   * A partitioned peer is not gone: its transfer ends at the progress deadline as {@code DEADLINE},
   * and it was asked about about once per tenth of that deadline, not once per refused post.
   */
  @Test
  void aPartitionedPeerEndsAtTheDeadlineAndIsProbedAtABoundedRate() throws Exception {
    FakeEndpoint target = fabric.openEndpoint();
    Advertisement ad = expose(target);
    fabric.script().unreachable(target.localAddress());
    long started = System.nanoTime();
    Completion<Buffer> failed = write(1, ad, 0);
    long tookMs = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - started);
    assertFalse(failed.outcome().isDone());
    assertEquals(DmaException.Reason.DEADLINE, failed.outcome().error().reason());
    assertTrue(tookMs >= PROGRESS_DEADLINE.toMillis(), "took " + tookMs + " ms");
    long probes = fabric.counters().peerProbes();
    long againAnswers = fabric.counters().againAnswers();
    // A tenth of the deadline apart: at most about ten over the deadline (a few more if the
    // loaded machine stretched it), against thousands of refused posts.
    assertTrue(
        probes >= 1 && probes <= 10 * tookMs / PROGRESS_DEADLINE.toMillis() + 2, "" + probes);
    assertTrue(againAnswers > 10 * probes, againAnswers + " refusals, " + probes + " probes");
  }

  /** A gone peer is found at the first probe, a tenth of the progress deadline in. */
  @Test
  void aGonePeerFailsPeerUnreachableBeforeTheDeadline() throws Exception {
    FakeEndpoint target = fabric.openEndpoint();
    Advertisement ad = expose(target);
    target.close();
    long started = System.nanoTime();
    Completion<Buffer> failed = write(1, ad, 0);
    long tookMs = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - started);
    DmaException error = failed.outcome().error();
    assertEquals(DmaException.Reason.PEER_UNREACHABLE, error.reason(), error::toString);
    assertTrue(
        error.getMessage().contains("its endpoint is gone: no open fake endpoint"),
        error::getMessage);
    assertEquals(0, failed.posts());
    assertTrue(tookMs < PROGRESS_DEADLINE.toMillis() / 2, "took " + tookMs + " ms");
  }

  /**
   * A refusal by a live target stays {@code ACCESS_DENIED}: asked, the endpoint says the peer is
   * there.
   */
  @Test
  void aRefusedKeyOfALivePeerStaysAccessDenied() throws Exception {
    FakeEndpoint target = fabric.openEndpoint();
    Advertisement ad = expose(target);
    Advertisement wrongKey =
        new Advertisement(ad.address(), ad.remoteKey() + 1, ad.remoteAddress(), ad.lengthBytes());
    DmaException error = write(1, wrongKey, 0).outcome().error();
    assertEquals(DmaException.Reason.ACCESS_DENIED, error.reason(), error::toString);
    assertEquals(1, fabric.counters().peerProbes());
    assertTrue(write(1, ad, 1).outcome().isDone());
  }

  /**
   * A completion that fails as unreachable is asked about as a refusal is: a live peer's failure
   * stays as the provider reported it, after one question.
   */
  @Test
  void anUnreachableCompletionOfALivePeerIsAskedAboutOnce() throws Exception {
    FakeEndpoint target = fabric.openEndpoint();
    Advertisement ad = expose(target);
    fabric.script().failOp(OpMatcher.toPeer(target.localAddress()), 111, 0, "refused");
    DmaException error = write(1, ad, 0).outcome().error();
    assertEquals(DmaException.Reason.PEER_UNREACHABLE, error.reason(), error::toString);
    assertFalse(error.getMessage().contains("its endpoint is gone"), error::getMessage);
    assertEquals(1, fabric.counters().peerProbes());
  }
}
