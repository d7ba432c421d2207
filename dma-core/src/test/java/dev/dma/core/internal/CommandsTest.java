package dev.dma.core.internal;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dma.api.Advertisement;
import dev.dma.api.DmaException;
import dev.dma.api.MemoryKind;
import dev.dma.api.Operands;
import dev.dma.api.TransferRequest;
import dev.dma.core.ChecksumPool;
import dev.dma.core.internal.peers.BoundPeer;
import java.lang.foreign.MemorySegment;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The worker's control messages ({@link Commands#apply}) on their own, over an inert worker's
 * tables ({@link InertWorkers}): each reply is answered (with the failure when the command fails),
 * an added or removed client's dead mark is dropped while other clients keep theirs, a removal
 * waits for the client's outstanding ops, and an unknown message is a bug, not ignored.
 */
@Timeout(value = 10, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
class CommandsTest {
  private static final byte[] ADDRESS = {1, 2, 3, 4};
  private static final byte[] OTHER = {5, 6, 7, 8};

  private ChecksumPool pool;
  private FabricWorker<Operands> worker;

  @BeforeEach
  void start() {
    pool = new ChecksumPool(1);
    worker = InertWorkers.worker(4, pool);
  }

  @AfterEach
  void stop() {
    pool.close();
  }

  private void apply(Object message) {
    Commands.apply(message, worker.dead, worker.peers, worker.regions, worker.clients);
  }

  private record Source(MemorySegment segment) implements Operands {
    @Override
    public MemorySegment source() {
      return segment;
    }
  }

  /** Whether a transfer to {@code clientId} at {@code address} would be refused at intake. */
  private boolean refusedAtIntake(long clientId, byte[] address) {
    TransferRequest<Operands> request =
        TransferRequest.write(
            clientId,
            new Advertisement(address, 9, 4096, 1 << 16),
            new Source(MemorySegment.ofArray(new byte[8])));
    return worker.dead.refusal(request) != null;
  }

  @Test
  void addingAPeerInsertsItAnswersAndForgetsOnlyThatClientsDeadMark() {
    assertTrue(worker.dead.markDead(1, ADDRESS, "judged (by the test)"));
    assertTrue(worker.dead.markDead(2, OTHER, "judged (by the test)"));
    Reply<Void> reply = new Reply<>();
    apply(new Commands.AddPeer(new BoundPeer(1, ADDRESS), reply));
    assertNull(reply.await("abandoned"));
    assertEquals(1, worker.peers.clients());
    assertFalse(refusedAtIntake(1, ADDRESS), "the added client is still marked dead");
    assertTrue(refusedAtIntake(2, OTHER), "another client's mark was dropped");
  }

  @Test
  void aPeerThatCannotBeAddedFailsTheReply() {
    Reply<Void> reply = new Reply<>();
    apply(new Commands.AddPeer(new BoundPeer(1, InertWorkers.REFUSED_ADDRESS), reply));
    DmaException error = assertThrows(DmaException.class, () -> reply.await("abandoned"));
    assertTrue(error.getMessage().contains("refused (by the test)"), error.getMessage());
  }

  @Test
  void removingAnIdleClientReleasesItsPeerAtOnceAndForgetsItsDeadMark() {
    Reply<Void> added = new Reply<>();
    apply(new Commands.AddPeer(new BoundPeer(1, ADDRESS), added));
    added.await("abandoned");
    apply(new Commands.AddPeer(new BoundPeer(2, OTHER), new Reply<>()));
    assertTrue(worker.dead.markDead(1, ADDRESS, "judged (by the test)"));
    assertTrue(worker.dead.markDead(2, OTHER, "judged (by the test)"));
    apply(new Commands.RemovePeer(1));
    assertEquals(1, worker.peers.clients(), "the removed client's peer is still held");
    assertFalse(refusedAtIntake(1, ADDRESS));
    assertTrue(refusedAtIntake(2, OTHER));
  }

  /**
   * A client with ops outstanding keeps its peer until the last one finishes (the worker then
   * releases it); one whose record is left with none outstanding is released at once.
   */
  @Test
  void removingABusyClientWaitsForItsOutstandingOps() {
    apply(new Commands.AddPeer(new BoundPeer(1, ADDRESS), new Reply<>()));
    Client client = new Client();
    client.opened(1, 0, 0, 0);
    client.outstanding = 1;
    worker.clients.put(1, client);
    apply(new Commands.RemovePeer(1));
    assertTrue(client.removalPending);
    assertEquals(1, worker.peers.clients(), "released under an outstanding op");

    client.removalPending = false;
    client.outstanding = 0;
    apply(new Commands.RemovePeer(1));
    assertFalse(client.removalPending);
    assertEquals(0, worker.peers.clients());
  }

  @Test
  void forgettingDeadPeersDropsEveryMark() {
    assertTrue(worker.dead.markDead(1, ADDRESS, "judged (by the test)"));
    assertTrue(worker.dead.markDead(2, OTHER, "judged (by the test)"));
    apply(Commands.ForgetDeadPeers.INSTANCE);
    assertFalse(refusedAtIntake(1, ADDRESS));
    assertFalse(refusedAtIntake(2, OTHER));
  }

  @Test
  void aPinAnswersAndAFailedPinFailsTheReply() {
    Reply<Void> pinned = new Reply<>();
    apply(new Commands.Pin(4096, 64, MemoryKind.HOST, pinned));
    assertNull(pinned.await("abandoned"));

    Reply<Void> refused = new Reply<>();
    apply(new Commands.Pin(-1, 64, InertWorkers.DEVICE, refused));
    DmaException error = assertThrows(DmaException.class, () -> refused.await("abandoned"));
    assertEquals(DmaException.Reason.BAD_REQUEST, error.reason());
  }

  @Test
  void anUnknownMessageIsABug() {
    IllegalStateException bug =
        assertThrows(IllegalStateException.class, () -> apply("not a command"));
    assertEquals("unknown worker message not a command", bug.getMessage());
  }
}
