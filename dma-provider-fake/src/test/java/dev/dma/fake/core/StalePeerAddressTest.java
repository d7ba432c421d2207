package dev.dma.fake.core;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dma.api.Advertisement;
import dev.dma.api.Completion;
import dev.dma.api.DmaConfiguration;
import dev.dma.api.DmaException;
import dev.dma.api.RemoteAccess;
import dev.dma.api.TransferRequest;
import dev.dma.core.FabricService;
import dev.dma.fake.FakeEndpoint;
import dev.dma.fake.FakeFabric;
import java.lang.foreign.Arena;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BooleanSupplier;
import java.util.logging.Handler;
import java.util.logging.Level;
import java.util.logging.LogRecord;
import java.util.logging.Logger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Issue 18: a transfer queued with a client's old address (it re-advertised, or its endpoint slot
 * has a newer incarnation) fails with a clear error instead of evicting the live address, and every
 * address-vector removal waits for the operations posted against it.
 */
@Timeout(60)
class StalePeerAddressTest {
  private static final AtomicInteger FABRICS = new AtomicInteger();

  private FakeFabric fabric;
  private Arena arena;
  private final Recorder<Buffer> recorder = new Recorder<>();
  private FabricService<Buffer> service;
  private final Logger peerLog = Logger.getLogger("dev.dma.core.internal.peers.PeerTable");
  private final List<String> warnings = new java.util.concurrent.CopyOnWriteArrayList<>();
  private final Handler capture =
      new Handler() {
        @Override
        public void publish(LogRecord logRecord) {
          if (logRecord.getLevel().intValue() >= Level.WARNING.intValue()) {
            warnings.add(logRecord.getMessage());
          }
        }

        @Override
        public void flush() {}

        @Override
        public void close() {}
      };

  @BeforeEach
  void openFabric() {
    fabric = FakeFabric.create("stale-peer-" + FABRICS.incrementAndGet());
    arena = Arena.ofShared();
    peerLog.addHandler(capture);
  }

  @AfterEach
  void closeAll() {
    peerLog.removeHandler(capture);
    if (service != null) {
      fabric.script().releaseCompletions();
      service.close();
    }
    fabric.close();
    arena.close();
  }

  private void start() {
    service =
        FabricService.<Buffer>builder(
                DmaConfiguration.builder()
                    .providers("fake")
                    .interfaces(List.of(fabric.name()))
                    .build())
            .completer(recorder)
            .start();
  }

  private Advertisement expose(FakeEndpoint target) {
    return target.expose(arena.allocate(4096), RemoteAccess.READ_WRITE).advertisement();
  }

  private Completion<Buffer> write(long client, Advertisement ad, long id) throws Exception {
    assertTrue(
        service.submit(TransferRequest.write(client, ad, new Buffer(id, arena.allocate(64)))));
    return recorder.take();
  }

  private static DmaException failure(Completion<Buffer> completion) {
    assertFalse(completion.outcome().isDone(), "expected a failure");
    return completion.outcome().error();
  }

  @Test
  void transfersToAnOlderIncarnationFailAndTheLiveOneIsNeverEvictedBack() throws Exception {
    fabric.script().efaAddresses(true);
    start();
    FakeEndpoint first = fabric.openEndpoint();
    Advertisement old = expose(first);
    assertTrue(write(1, old, 0).outcome().isDone());
    // The target restarts: the device gives its slot (QPN) to the new endpoint, new bytes.
    first.close();
    FakeEndpoint second = fabric.openEndpoint();
    Advertisement fresh = expose(second);
    byte[] oldAddress = old.address();
    byte[] freshAddress = fresh.address();
    assertFalse(Arrays.equals(oldAddress, freshAddress));
    assertTrue(write(2, fresh, 1).outcome().isDone());
    assertEquals(1, warnings.size(), () -> "the first eviction warns once: " + warnings);
    long inserts = fabric.counters().inserts();

    // Client 1's transfers keep coming with the old advertisement, interleaved with client 2's.
    for (int i = 0; i < 5; i++) {
      DmaException stale = failure(write(1, old, 10 + i));
      assertEquals(DmaException.Reason.BAD_REQUEST, stale.reason());
      String message = stale.getMessage();
      assertTrue(message.contains("client 1"), message);
      assertTrue(message.contains(HexFormat.of().formatHex(oldAddress)), message);
      assertTrue(message.contains(HexFormat.of().formatHex(freshAddress)), message);
      assertTrue(message.contains("older incarnation"), message);
      assertTrue(write(2, fresh, 20 + i).outcome().isDone(), "the live incarnation keeps serving");
    }
    assertEquals(inserts, fabric.counters().inserts(), "no insert: nothing was evicted back");
    assertEquals(1, warnings.size(), () -> "no ping-pong of evictions: " + warnings);
    // Client 1 with the new advertisement shares the live entry.
    assertTrue(write(1, fresh, 30).outcome().isDone());
    assertEquals(inserts, fabric.counters().inserts());
    assertEquals(0, fabric.counters().violations());
    second.close();
  }

  @Test
  void aReAdvertisedClientsOldAddressLeavesOnlyOnceItsTransfersAreDone() throws Exception {
    start();
    FakeEndpoint first = fabric.openEndpoint();
    FakeEndpoint second = fabric.openEndpoint();
    Advertisement old = expose(first);
    Advertisement moved = expose(second);
    byte[] oldAddress = first.localAddress();
    fabric.script().holdCompletions(op -> Arrays.equals(op.peer(), oldAddress));
    assertTrue(
        service.submit(TransferRequest.write(1, old, new Buffer(0, arena.allocate(64)))),
        "posted to the old address and held in flight");
    waitUntil(() -> fabric.script().heldCompletions() == 1);
    long removesBefore = fabric.counters().removes();

    // The client re-advertised: its next transfer carries the new address.
    assertTrue(write(1, moved, 1).outcome().isDone());
    // A transfer queued with the old advertisement before the move.
    DmaException stale = failure(write(1, old, 2));
    assertEquals(DmaException.Reason.BAD_REQUEST, stale.reason());
    assertTrue(stale.getMessage().contains("client 1"), stale.getMessage());
    assertTrue(stale.getMessage().contains("moved to"), stale.getMessage());
    // The old address is still in the vector: the held transfer was posted against it.
    assertEquals(removesBefore, fabric.counters().removes());
    assertEquals(0, fabric.counters().removesWithOpsOutstanding());

    fabric.script().releaseCompletions();
    Completion<Buffer> held = recorder.take();
    assertEquals(0, held.context().id);
    assertTrue(held.outcome().isDone());
    waitUntil(() -> fabric.counters().removes() == removesBefore + 1);
    assertEquals(0, fabric.counters().removesWithOpsOutstanding());
    assertEquals(0, fabric.counters().violations());
    assertNull(recorder.poll(100));
    first.close();
    second.close();
  }

  private static void waitUntil(BooleanSupplier condition) throws InterruptedException {
    long deadline = System.nanoTime() + 30_000_000_000L;
    while (!condition.getAsBoolean()) {
      assertTrue(System.nanoTime() < deadline, "condition not met within 30 s");
      Thread.sleep(1);
    }
  }
}
