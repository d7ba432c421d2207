package dev.dma.core.internal;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dma.api.Advertisement;
import dev.dma.api.DmaException;
import dev.dma.api.Operands;
import dev.dma.api.TransferRequest;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * An op's own rules, on their own: which lost posts may be posted again and how often ({@link
 * Op#mayPostAgain}), what a failure says it may have left at the peer ({@link Op#whatItLeft}), and
 * that a recycled op, or a recycled client record, starts afresh with nothing of its last life.
 */
@Timeout(value = 10, unit = TimeUnit.SECONDS)
class OpTest {
  private static final byte[] ADDRESS = {1, 2, 3};
  private static final Advertisement AD = new Advertisement(ADDRESS, 9, 4096, 1 << 16);
  private static final WorkerTelemetry OFF = new WorkerTelemetry(Telemetry.OFF);

  private static final MemorySegment SEGMENT = MemorySegment.ofArray(new byte[64]);
  private static final Operands SOURCE = Operands.of(SEGMENT);

  private static Op<Operands> op(TransferRequest<Operands> request, Client client) {
    Op<Operands> op = new Op<>();
    op.accepted(request, SEGMENT, 64, null, client);
    return op;
  }

  private static Client client(long id) {
    Client client = new Client();
    client.opened(id, 0, 0, 0);
    return client;
  }

  @Test
  void aReadMayBePostedAgainTwiceAfterALostConnectionOrAReset() {
    for (boolean connectionLost : new boolean[] {true, false}) {
      Op<Operands> read = op(TransferRequest.read(1, AD, 64, SOURCE), client(1));
      assertTrue(read.isRead());
      assertTrue(read.mayPostAgain(connectionLost));
      read.retried(OFF, "lost");
      assertEquals(1, read.retries);
      assertTrue(read.mayPostAgain(connectionLost));
      read.retried(OFF, "lost");
      assertEquals(Op.MAX_RETRIES, read.retries);
      assertFalse(read.mayPostAgain(connectionLost), "a third time");
    }
  }

  @Test
  void aWriteMayBePostedAgainOnlyAfterALostConnectionAndOnlyWhenItsRequestAllowsIt() {
    Op<Operands> plain = op(TransferRequest.write(1, AD, SOURCE), client(1));
    assertFalse(plain.isRead());
    assertFalse(plain.mayPostAgain(true));
    assertFalse(plain.mayPostAgain(false));
    Op<Operands> retryable =
        op(TransferRequest.write(1, AD, SOURCE).withRetryWrite(true), client(1));
    assertTrue(retryable.mayPostAgain(true));
    assertFalse(retryable.mayPostAgain(false), "after a reset");
    retryable.retried(OFF, "lost");
    retryable.retried(OFF, "lost");
    assertFalse(retryable.mayPostAgain(true), "a third time");
  }

  @Test
  void onlyAWriteEverPostedSaysItMayHaveChangedTheTarget() {
    DmaException error = DmaException.fabric(DmaException.Reason.CLOSED, "gone");
    Op<Operands> write = op(TransferRequest.write(1, AD, SOURCE), client(1));
    assertSame(error, write.whatItLeft(error), "never posted");
    write.posts = 1;
    DmaException left = write.whatItLeft(error);
    assertEquals(DmaException.TargetMemory.MAY_HAVE_CHANGED, left.targetMemory());
    assertEquals("gone", left.getMessage());
    Op<Operands> read = op(TransferRequest.read(1, AD, 64, SOURCE), client(1));
    read.posts = 1;
    assertSame(error, read.whatItLeft(error), "a read changes nothing there");
  }

  @Test
  void aRecycledOpStartsWithNothingOfItsLastTransfer() {
    Client first = client(1);
    Op<Operands> op = op(TransferRequest.write(1, AD, SOURCE), first);
    assertEquals(1, first.outstanding);
    op.stalled = true;
    op.expired = true;
    op.leftBehind = true;
    op.judgedGone = DmaException.fabric(DmaException.Reason.PEER_UNREACHABLE, "gone");
    op.retries = 2;
    op.posts = 3;

    Client second = client(2);
    TransferRequest<Operands> next = TransferRequest.read(2, AD, 32, SOURCE);
    op.accepted(next, SEGMENT, 32, null, second);
    assertSame(next, op.request);
    assertSame(second, op.client);
    assertEquals(32, op.lengthBytes);
    assertEquals(1, second.outstanding);
    assertFalse(op.stalled);
    assertFalse(op.expired);
    assertFalse(op.leftBehind);
    assertNull(op.judgedGone);
    assertEquals(0, op.retries);
    assertEquals(0, op.posts);
  }

  @Test
  void anOpWasSentToOneIncarnationOnly() {
    Op<Operands> op = op(TransferRequest.write(7, AD, SOURCE), client(7));
    assertTrue(op.sentTo(7, new byte[] {1, 2, 3}));
    assertFalse(op.sentTo(8, ADDRESS), "another client");
    assertFalse(op.sentTo(7, new byte[] {1, 2, 4}), "another address of the same client");
  }

  /**
   * A recycled client record starts with nothing outstanding or in flight, no removal pending, no
   * refusal in this pass or a later one, its last sign of life now, and its peer probe due at once.
   */
  @Test
  void aRecycledClientRecordStartsAfresh() {
    Client client = client(1);
    client.outstanding = 3;
    client.inFlight = 2;
    client.removalPending = true;
    client.refusedInPass = 41;
    client.opened(9, 41, 1_000, 300);
    assertEquals(9, client.id);
    assertEquals(0, client.outstanding);
    assertEquals(0, client.inFlight);
    assertFalse(client.removalPending);
    assertTrue(client.refusedInPass < 41, "refused in pass " + client.refusedInPass);
    assertTrue(client.refusedInPass != 42, "refused in the next pass");
    assertEquals(1_000, client.movedNs);
    assertTrue(1_000 - client.probedNs >= 300, "the probe is not due at once: " + client.probedNs);
  }
}
