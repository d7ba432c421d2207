package dev.dma.core.internal;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

import dev.dma.api.Operands;
import dev.dma.core.ChecksumPool;
import java.lang.foreign.MemorySegment;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The accounting check ({@link WorkerAccounting#violation}) reports each inconsistency it promises
 * to, with its text, and none for the same worker made whole again: the simulator relies on it to
 * catch a broken worker, and a check that stays silent (or reports the wrong thing) would hide one.
 * The worker is never run ({@link InertWorkers}): the test breaks its bookkeeping by hand, one
 * field at a time.
 */
@Timeout(10)
class WorkerAccountingTest {
  private static final int CAP = 4;

  private ChecksumPool pool;
  private FabricWorker<Operands> worker;

  @BeforeEach
  void start() {
    pool = new ChecksumPool(1);
    worker = InertWorkers.worker(CAP, pool);
  }

  @AfterEach
  void stop() {
    pool.close();
  }

  private Client client(long id, int outstanding) {
    Client client = new Client();
    client.opened(id, 0, 0, 0);
    client.outstanding = outstanding;
    worker.clients.put(id, client);
    return client;
  }

  private Op<Operands> op(Client client) {
    Op<Operands> op = new Op<>();
    op.client = client;
    return op;
  }

  /** Puts {@code op} in a free slot, as a post does. */
  private void post(Op<Operands> op) {
    int slot = worker.freeSlots[--worker.freeSlotCount];
    worker.slots[slot] = op;
    worker.inFlight++;
  }

  @Test
  void aFreshWorkerIsSound() {
    assertEquals(CAP, worker.cap());
    assertNull(WorkerAccounting.violation(worker));
  }

  @Test
  void aSlotNeitherFreeNorOccupiedIsReported() {
    worker.freeSlotCount--;
    assertEquals("free slots 3 + used 0 != cap 4", WorkerAccounting.violation(worker));
    worker.freeSlotCount++;
    assertNull(WorkerAccounting.violation(worker));
  }

  @Test
  void anInFlightCountOtherThanTheOccupiedSlotsIsReported() {
    worker.inFlight = 1;
    assertEquals("inFlight 1 != occupied slots 0", WorkerAccounting.violation(worker));
    worker.inFlight = 0;
    post(op(client(7, 1)));
    assertNull(WorkerAccounting.violation(worker));
    worker.inFlight = 2;
    assertEquals("inFlight 2 != occupied slots 1", WorkerAccounting.violation(worker));
  }

  /** Posted, queued and deferred ops all count on their client; exactly its count is sound. */
  @Test
  void aClientCountingFewerOpsThanItHoldsIsReported() {
    Client client = client(7, 3);
    post(op(client));
    worker.pending.add(op(client));
    worker.deferred.add(op(client));
    assertNull(WorkerAccounting.violation(worker), "held exactly as counted");
    client.outstanding = 2;
    assertEquals("client 7 counts 2 for 3 ops held", WorkerAccounting.violation(worker));
    client.outstanding = 4;
    assertNull(WorkerAccounting.violation(worker), "more counted than held (one being finished)");
  }

  @Test
  void anOpWithoutAClientIsReported() {
    worker.pending.add(op(null));
    assertEquals("client null for 1 ops held", WorkerAccounting.violation(worker));
  }

  @Test
  void aClientHoldingOpsOutsideTheClientMapIsReported() {
    Client client = client(7, 1);
    worker.pending.add(op(client));
    assertNull(WorkerAccounting.violation(worker));
    worker.clients.remove(7);
    assertEquals(
        "client 7 holds ops but is not in the client map", WorkerAccounting.violation(worker));
    // Another record under its id is not it.
    client(7, 1);
    assertEquals(
        "client 7 holds ops but is not in the client map", WorkerAccounting.violation(worker));
  }

  /**
   * A client record with no op held is left over; the check lets it pass while checksummed
   * completions are still batched.
   */
  @Test
  void aClientRecordLeftWithNoOpHeldIsReported() {
    client(7, 0);
    assertEquals("no op held, yet 1 client records remain", WorkerAccounting.violation(worker));
    worker.checksums.add(null, MemorySegment.ofArray(new byte[8]), 8, null, 1, null);
    assertNull(WorkerAccounting.violation(worker), "a checksummed completion is still batched");
  }

  /** Bytes pinned up to exactly their bound are sound. */
  @Test
  void pinnedBytesAtTheirBoundAreSound() {
    FabricWorker<Operands> bounded = InertWorkers.worker(CAP, pool, 4096);
    long bound = bounded.regions.maxPinnedBytes();
    try {
      bounded.regions.pin(1 << 20, bound, InertWorkers.DEVICE);
      assertEquals(bound, bounded.regions.pinnedBytes());
      assertNull(WorkerAccounting.violation(bounded));
    } finally {
      bounded.regions.close();
    }
  }
}
