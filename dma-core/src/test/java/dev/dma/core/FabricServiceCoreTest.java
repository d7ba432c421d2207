package dev.dma.core;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dma.api.Advertisement;
import dev.dma.api.Checksum;
import dev.dma.api.Checksums;
import dev.dma.api.Completion;
import dev.dma.api.DmaConfiguration;
import dev.dma.api.DmaException;
import dev.dma.api.Operands;
import dev.dma.api.RemoteAccess;
import dev.dma.api.TransferRequest;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The fabric worker run by dma-core's own suite, over {@link LoopbackTestEndpoint}: bytes land,
 * each transfer completes exactly once, close drains, a refused post fails only its transfer, and
 * the completion deadline fails a never-completing op once the endpoint's reset discarded it. The
 * scripted cases stay in dma-provider-fake.
 */
class FabricServiceCoreTest {
  private static final int SLICE = 256;

  /** A transfer's context: an id and its local operand (the source, or where a read lands). */
  record Buffer(long id, MemorySegment segment) implements Operands {
    @Override
    public MemorySegment source() {
      return segment;
    }

    @Override
    public MemorySegment allocate(long lengthBytes) {
      return segment;
    }
  }

  private final Arena arena = Arena.ofShared();
  private final LoopbackTestEndpoint endpoint = new LoopbackTestEndpoint();
  private final LinkedBlockingQueue<Completion<Buffer>> completions = new LinkedBlockingQueue<>();
  private FabricService<Buffer> service;

  @AfterEach
  void close() {
    if (service != null) {
      service.close();
    }
    arena.close();
  }

  private FabricService<Buffer> start(DmaConfiguration configuration) {
    service =
        FabricService.<Buffer>builder(configuration)
            .provider(endpoint.provider())
            .completer(completions::addAll)
            .start();
    return service;
  }

  private FabricService<Buffer> start() {
    return start(DmaConfiguration.builder().maxInFlight(8).build());
  }

  private Buffer pattern(long id, int size) {
    MemorySegment segment = arena.allocate(size);
    for (int i = 0; i < size; i++) {
      segment.set(ValueLayout.JAVA_BYTE, i, (byte) (id * 31 + i * 7 + 1));
    }
    return new Buffer(id, segment);
  }

  /** The advertisement of {@code slice}'s {@link #SLICE} bytes of {@code region}. */
  private static Advertisement slice(Advertisement region, int slice) {
    return new Advertisement(
        region.address(), region.remoteKey(), region.remoteAddress() + (long) slice * SLICE, SLICE);
  }

  private Completion<Buffer> take() throws InterruptedException {
    Completion<Buffer> completion = completions.poll(10, TimeUnit.SECONDS);
    assertNotNull(completion, "no completion within 10 s");
    return completion;
  }

  @Test
  void aWriteAndAReadLandTheirBytes() throws Exception {
    start();
    MemorySegment target = arena.allocate(4096);
    Advertisement ad = endpoint.expose(target, RemoteAccess.READ_WRITE).advertisement();
    Buffer source = pattern(1, 4096);
    assertTrue(service.submit(TransferRequest.write(7, ad, source).withChecksum(Checksum.CRC32C)));
    Completion<Buffer> written = take();
    assertEquals(4096, written.outcome().done().bytes());
    assertEquals(
        Checksums.crc32c(source.segment()), written.outcome().done().checksum().orElseThrow());
    assertEquals(-1, target.mismatch(source.segment()), "the write did not land");

    Buffer back = new Buffer(2, arena.allocate(4096));
    assertTrue(service.submit(TransferRequest.read(7, ad, 4096, back)));
    Completion<Buffer> read = take();
    assertTrue(read.outcome().done().checksum().isEmpty());
    assertEquals(-1, back.segment().mismatch(source.segment()), "the read did not land");
  }

  @Test
  void everyTransferCompletesExactlyOnce() throws Exception {
    start();
    int count = 200;
    MemorySegment target = arena.allocate((long) count * SLICE);
    Advertisement ad = endpoint.expose(target, RemoteAccess.READ_WRITE).advertisement();
    List<Buffer> sources = new ArrayList<>();
    for (int i = 0; i < count; i++) {
      Buffer source = pattern(i, SLICE);
      sources.add(source);
      assertTrue(
          service.submit(
              TransferRequest.write(1 + i % 3, slice(ad, i), source)
                  .withChecksum(i % 2 == 0 ? Checksum.CRC32C : Checksum.NONE)));
    }
    Set<Long> seen = new HashSet<>();
    for (int i = 0; i < count; i++) {
      Completion<Buffer> completion = take();
      assertTrue(completion.outcome().isDone(), () -> completion.outcome().error().getMessage());
      assertTrue(
          seen.add(completion.context().id()), "completed twice: " + completion.context().id());
    }
    assertNull(
        completions.poll(200, TimeUnit.MILLISECONDS), "a completion beyond one per transfer");
    assertEquals(count, endpoint.completions());
    assertEquals(0, service.outstanding());
    for (int i = 0; i < count; i++) {
      assertEquals(
          -1,
          target.asSlice((long) i * SLICE, SLICE).mismatch(sources.get(i).segment()),
          "slice " + i);
    }
  }

  @Test
  void closeDrainsWhatWasSubmitted() throws Exception {
    start();
    int count = 50;
    MemorySegment target = arena.allocate((long) count * SLICE);
    Advertisement ad = endpoint.expose(target, RemoteAccess.READ_WRITE).advertisement();
    List<Buffer> sources = new ArrayList<>();
    for (int i = 0; i < count; i++) {
      Buffer source = pattern(i, SLICE);
      sources.add(source);
      assertTrue(service.submit(TransferRequest.write(1, slice(ad, i), source)));
    }
    service.close();
    assertEquals(count, completions.size(), "close returned before every transfer completed");
    for (Completion<Buffer> completion : completions) {
      assertTrue(completion.outcome().isDone(), () -> completion.outcome().error().getMessage());
    }
    for (int i = 0; i < count; i++) {
      assertEquals(
          -1,
          target.asSlice((long) i * SLICE, SLICE).mismatch(sources.get(i).segment()),
          "slice " + i);
    }
    assertEquals(1, endpoint.closes());
    assertFalse(service.isRunning());
  }

  @Test
  void aPostTheEndpointRefusesFailsThatTransferOnly() throws Exception {
    start();
    MemorySegment target = arena.allocate(2L * SLICE);
    Advertisement ad = endpoint.expose(target, RemoteAccess.READ_WRITE).advertisement();
    Advertisement refused = endpoint.advertisementFor(LoopbackTestEndpoint.REFUSED_KEY);
    assertTrue(service.submit(TransferRequest.write(1, slice(ad, 0), pattern(0, SLICE))));
    assertTrue(service.submit(TransferRequest.write(1, refused, pattern(1, SLICE))));
    assertTrue(service.submit(TransferRequest.write(1, slice(ad, 1), pattern(2, SLICE))));
    Set<Long> done = new HashSet<>();
    DmaException failure = null;
    for (int i = 0; i < 3; i++) {
      Completion<Buffer> completion = take();
      if (completion.outcome().isDone()) {
        done.add(completion.context().id());
      } else {
        assertEquals(1, completion.context().id(), "the wrong transfer failed");
        failure = completion.outcome().error();
      }
    }
    assertEquals(Set.of(0L, 2L), done);
    assertNotNull(failure, "the refused post did not fail");
    assertTrue(
        failure.getMessage().matches("client 1 at [0-9a-f]+: post: Invalid argument \\(-22\\)"),
        failure.getMessage());
    assertEquals(22, failure.fabricErrno());
    assertEquals(0, endpoint.resets(), "a refused post is no reason to reset");
    assertEquals(0, service.outstanding());
  }

  @Test
  void theCompletionDeadlineFailsANeverCompletingOpAfterTheResetDiscardedIt() throws Exception {
    start(
        DmaConfiguration.builder()
            .maxInFlight(8)
            .completionDeadline(Duration.ofMillis(300))
            .build());
    MemorySegment target = arena.allocate(SLICE);
    Advertisement ad = endpoint.expose(target, RemoteAccess.READ_WRITE).advertisement();
    Advertisement hole = endpoint.advertisementFor(LoopbackTestEndpoint.BLACK_HOLE_KEY);
    assertTrue(service.submit(TransferRequest.write(9, hole, pattern(0, SLICE))));
    assertNull(completions.poll(100, TimeUnit.MILLISECONDS), "failed before its deadline");
    assertEquals(1, endpoint.posted());
    Completion<Buffer> expired = take();
    assertEquals(0, expired.context().id());
    DmaException error = expired.outcome().error();
    assertEquals(DmaException.Reason.DEADLINE, error.reason(), error.getMessage());
    // Failed only once nothing could touch its operand any more: the reset discarded it.
    assertEquals(1, endpoint.resets());
    assertEquals(0, endpoint.posted());
    assertEquals(0, service.outstanding());
    // Another client is served as before.
    Buffer source = pattern(1, SLICE);
    assertTrue(service.submit(TransferRequest.write(1, ad, source)));
    assertTrue(take().outcome().isDone());
    assertEquals(-1, target.mismatch(source.segment()));
  }

  @Test
  @Timeout(30)
  void aResetWhoseEndpointCloseFailsDeliversNothingAsDiscardedAndSaysTheOperandMayBeTouched()
      throws Exception {
    start(
        DmaConfiguration.builder()
            .maxInFlight(8)
            .completionDeadline(Duration.ofMillis(300))
            .build());
    endpoint.failTransportClose();
    Advertisement hole = endpoint.advertisementFor(LoopbackTestEndpoint.BLACK_HOLE_KEY);
    assertTrue(service.submit(TransferRequest.write(9, hole, pattern(0, SLICE))));
    Completion<Buffer> failed = take();
    DmaException error = failed.outcome().error();
    // Not "discarded by a reset": the provider never confirmed it stopped, and the service said
    // so rather than hand the operand back as safe.
    assertTrue(
        error.getMessage().startsWith("the provider could not be closed while this transfer was"),
        error.getMessage());
    assertEquals(DmaException.TargetMemory.MAY_HAVE_CHANGED, error.targetMemory());
    assertEquals(1, failed.posts());
    assertEquals(1, endpoint.resets());
    assertEquals(1, endpoint.posted(), "the op was dropped as if the reset had discarded it");
    assertFalse(service.isRunning(), "the service went on over an endpoint it could not reset");
    assertEquals(0, service.outstanding());
  }
}
