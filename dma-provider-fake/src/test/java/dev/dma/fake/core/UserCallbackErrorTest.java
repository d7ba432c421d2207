package dev.dma.fake.core;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dma.api.Advertisement;
import dev.dma.api.CacheableSpan;
import dev.dma.api.Completion;
import dev.dma.api.DmaConfiguration;
import dev.dma.api.DmaException;
import dev.dma.api.Operands;
import dev.dma.api.RemoteAccess;
import dev.dma.api.TransferRequest;
import dev.dma.core.FabricService;
import dev.dma.core.FabricServiceGroup;
import dev.dma.fake.FakeEndpoint;
import dev.dma.fake.FakeFabric;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * No Throwable from a user callback loses a completion: an Error from {@code allocate()}, {@code
 * source()}, {@code cacheableSpan()} or the {@code BatchCompleter} fails that transfer only (the
 * completer's: counts its batch as delivered), and the worker keeps serving everyone else.
 */
class UserCallbackErrorTest {

  /** A context whose callbacks throw what the test says, once armed. */
  private static final class Throwing implements Operands {
    final long id;
    final MemorySegment segment;
    final Throwable fromAllocate;
    final Throwable fromSource;
    final Throwable fromSpan;

    Throwing(
        long id,
        MemorySegment segment,
        Throwable fromAllocate,
        Throwable fromSource,
        Throwable fromSpan) {
      this.id = id;
      this.segment = segment;
      this.fromAllocate = fromAllocate;
      this.fromSource = fromSource;
      this.fromSpan = fromSpan;
    }

    static Throwing plain(long id, MemorySegment segment) {
      return new Throwing(id, segment, null, null, null);
    }

    @Override
    public MemorySegment source() {
      throwIfSet(fromSource);
      return segment;
    }

    @Override
    public MemorySegment allocate(long lengthBytes) {
      throwIfSet(fromAllocate);
      return segment;
    }

    @Override
    public CacheableSpan cacheableSpan() {
      throwIfSet(fromSpan);
      return null;
    }

    private static void throwIfSet(Throwable thrown) {
      if (thrown instanceof Error error) {
        throw error;
      }
      if (thrown instanceof RuntimeException runtime) {
        throw runtime;
      }
    }
  }

  @Test
  @Timeout(60)
  void anErrorFromAnOperandCallbackFailsThatTransferOnly() throws Exception {
    Recorder<Throwing> recorder = new Recorder<>();
    try (FakeFabric fabric = FakeFabric.create("callback-errors");
        Arena arena = Arena.ofShared()) {
      // Local registration, so cacheableSpan() is asked on a miss, as on EFA.
      fabric.script().requireLocalRegistration(true);
      FakeEndpoint target = fabric.openEndpoint();
      MemorySegment remote = arena.allocate(4096);
      Advertisement ad = target.expose(remote, RemoteAccess.READ_WRITE).advertisement();
      DmaConfiguration configuration =
          DmaConfiguration.builder().providers("fake").interfaces(List.of(fabric.name())).build();
      try (FabricService<Throwing> service =
          FabricService.<Throwing>builder(configuration).completer(recorder).start()) {
        List<TransferRequest<Throwing>> requests = new ArrayList<>();
        requests.add(
            TransferRequest.read(
                1,
                ad,
                64,
                new Throwing(
                    1,
                    arena.allocate(64),
                    new OutOfMemoryError("Cannot reserve 64 bytes of direct buffer memory"),
                    null,
                    null)));
        requests.add(
            TransferRequest.write(
                1,
                ad,
                new Throwing(2, arena.allocate(64), null, new StackOverflowError("source"), null)));
        requests.add(
            TransferRequest.write(
                1,
                ad,
                new Throwing(3, arena.allocate(64), null, null, new AssertionError("span"))));
        requests.add(
            TransferRequest.write(
                1,
                ad,
                new Throwing(4, arena.allocate(64), null, null, new IllegalStateException("rt"))));
        for (TransferRequest<Throwing> request : requests) {
          assertTrue(service.submit(request));
        }
        for (Completion<Throwing> completion : recorder.take(4)) {
          assertFalse(completion.outcome().isDone(), "transfer " + completion.context().id);
          DmaException error = completion.outcome().error();
          assertEquals(DmaException.Reason.BAD_REQUEST, error.reason(), error.getMessage());
          assertEquals(DmaException.TargetMemory.UNCHANGED, error.targetMemory());
          assertEquals(0, completion.posts());
        }
        // The worker still serves: a good write lands.
        MemorySegment good = arena.allocate(64);
        good.fill((byte) 0x42);
        assertTrue(service.submit(TransferRequest.write(1, ad, Throwing.plain(5, good))));
        Completion<Throwing> done = recorder.take();
        assertTrue(done.outcome().isDone(), () -> done.outcome().error().toString());
        assertEquals(-1, remote.asSlice(0, 64).mismatch(good));
        assertTrue(service.isRunning());
        assertEquals(0, service.outstanding());
      }
      target.close();
    }
  }

  /**
   * The group's striping path asks a striped read's {@code allocate()} itself, on the submitting
   * thread: an Error from it fails that transfer only, as on the plain path (BAD_REQUEST naming the
   * Error, exactly one completion, every chunk's room given back), and the group serves the next
   * transfer. Before the intake was shared, the group caught RuntimeException only: the Error
   * escaped offer(), no completion came and outstanding() stayed at 2.
   */
  @Test
  @Timeout(60)
  void anErrorFromAStripedReadsAllocateFailsThatTransferOnly() throws Exception {
    Recorder<Throwing> recorder = new Recorder<>();
    try (FakeFabric fabric = FakeFabric.create("striped-allocate-error");
        Arena arena = Arena.ofShared()) {
      FakeEndpoint target = fabric.openEndpoint();
      MemorySegment remote = arena.allocate(8192, 4096);
      Advertisement ad = target.expose(remote, RemoteAccess.READ_WRITE).advertisement();
      String device = fabric.name();
      DmaConfiguration configuration =
          DmaConfiguration.builder().providers("fake").interfaces(List.of(device, device)).build();
      try (FabricServiceGroup<Throwing> group =
          FabricServiceGroup.<Throwing>builder(configuration)
              .completer(recorder)
              .stripeThresholdBytes(1)
              .stripeChunks(2)
              .start()) {
        OutOfMemoryError oom = new OutOfMemoryError("Cannot reserve 8192 bytes of direct memory");
        Throwing failing = new Throwing(1, arena.allocate(8192, 4096), oom, null, null);
        FabricService.Offer offered;
        try {
          offered = group.offer(TransferRequest.read(1, ad, 8192, failing));
        } catch (Throwable escaped) {
          // Caught here, not by JUnit, which rethrows an OutOfMemoryError past the test.
          throw new AssertionError("the striped offer threw: " + escaped, escaped);
        }
        assertEquals(FabricService.Offer.ACCEPTED, offered);
        Completion<Throwing> refused = recorder.take();
        assertEquals(1, refused.context().id);
        DmaException error = refused.outcome().error();
        assertEquals(DmaException.Reason.BAD_REQUEST, error.reason(), error.getMessage());
        assertEquals("the caller context failed to supply its operand: " + oom, error.getMessage());
        assertEquals(oom, error.getCause());
        assertEquals(0, refused.posts());
        assertEquals(2, refused.chunks());
        assertEquals(0, group.outstanding(), "every chunk's room was given back");
        assertNull(recorder.poll(200), "exactly one completion");

        // The group still serves, striped: a good read lands both chunks.
        remote.fill((byte) 0x5a);
        MemorySegment landing = arena.allocate(8192, 4096);
        assertTrue(group.submit(TransferRequest.read(1, ad, 8192, Throwing.plain(2, landing))));
        Completion<Throwing> done = recorder.take();
        assertTrue(done.outcome().isDone(), () -> done.outcome().error().toString());
        assertEquals(2, done.chunks());
        assertEquals(-1, landing.mismatch(remote));
        assertEquals(0, group.outstanding());
      }
      target.close();
    }
  }

  @Test
  @Timeout(60)
  void anErrorFromTheCompleterCostsNoOtherCompletion() throws Exception {
    Recorder<Throwing> recorder = new Recorder<>();
    AtomicBoolean throwOnce = new AtomicBoolean(true);
    try (FakeFabric fabric = FakeFabric.create("completer-error");
        Arena arena = Arena.ofShared()) {
      FakeEndpoint target = fabric.openEndpoint();
      Advertisement ad =
          target.expose(arena.allocate(4096), RemoteAccess.READ_WRITE).advertisement();
      DmaConfiguration configuration =
          DmaConfiguration.builder().providers("fake").interfaces(List.of(fabric.name())).build();
      try (FabricService<Throwing> service =
          FabricService.<Throwing>builder(configuration)
              .completer(
                  batch -> {
                    boolean throwNow = throwOnce.getAndSet(false);
                    recorder.complete(batch);
                    if (throwNow) {
                      throw new OutOfMemoryError("from the completer (expected by the test)");
                    }
                  })
              .start()) {
        for (int i = 0; i < 20; i++) {
          assertTrue(
              service.submit(TransferRequest.write(1, ad, Throwing.plain(i, arena.allocate(64)))));
        }
        for (Completion<Throwing> completion : recorder.take(20)) {
          assertTrue(completion.outcome().isDone());
        }
        assertFalse(throwOnce.get(), "the completer never threw");
        assertTrue(service.isRunning());
        assertEquals(0, service.outstanding());
      }
      target.close();
    }
  }
}
