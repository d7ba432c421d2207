package dev.dma.core.internal;

import dev.dma.api.DmaException;
import dev.dma.api.Operands;
import dev.dma.api.TransferRequest;
import dev.dma.core.internal.peers.PeerTable;
import java.util.ArrayDeque;
import java.util.Arrays;
import org.jspecify.annotations.Nullable;

/**
 * The client incarnations (client id and address) one worker found dead, with the error their later
 * transfers fail with at once, until addPeer, removePeer or a transfer carrying a new address for
 * the client. Empty, and never looked up, on a healthy server: the worker checks the map it shares
 * with this class for emptiness before it asks anything here.
 *
 * <p>Threads: the worker thread only. It owns the queues this class fails ops from.
 *
 * @param <T> the caller context type
 */
final class DeadPeers<T extends Operands> {
  /**
   * A dead client incarnation: the address its failed transfer carried, and the error its later
   * transfers fail with.
   */
  record DeadMark(byte[] address, DmaException error) {}

  private final FabricWorker<T> worker;
  private final PeerTable peers;
  private final Failures failures;
  private final LongObjectMap<DeadMark> marks;

  /**
   * The dead incarnations of one worker.
   *
   * @param marks the map the worker checks for emptiness on its per-transfer path
   */
  DeadPeers(FabricWorker<T> worker, LongObjectMap<DeadMark> marks) {
    this.worker = worker;
    this.peers = worker.peers;
    this.failures = worker.failures;
    this.marks = marks;
  }

  /** Drops the client's mark: the application added or removed it. */
  void forget(long clientId) {
    marks.remove(clientId);
  }

  /** Drops every mark: the device they were judged on was itself at fault (see Commands). */
  void forgetAll() {
    marks.clear();
  }

  /**
   * Ends a transfer to a client incarnation marked dead at intake, with its mark's error ({@link
   * #refusal}); a group's failure hook may move it to a device that may reach the client.
   *
   * @return true when it was ended here; false when it goes ahead
   */
  boolean refusedAtIntake(TransferRequest<T> request) {
    DmaException refusal = refusal(request);
    if (refusal == null) {
      return false;
    }
    worker.refuseAtIntake(request, refusal);
    return true;
  }

  /**
   * The error a transfer to a client incarnation marked dead fails with at intake, or null when it
   * goes ahead. A transfer carrying an address the client never had before is its new incarnation
   * (it restarted and advertised again): the mark, which belongs to the old one, is dropped and the
   * transfer goes ahead. One carrying an address the client has since left goes ahead too, to fail
   * as stale at post.
   */
  @Nullable DmaException refusal(TransferRequest<T> request) {
    DeadMark mark = marks.get(request.clientId());
    if (mark == null) {
      return null;
    }
    if (!Arrays.equals(mark.address, request.peerAddress())) {
      if (!peers.isPreviousAddress(request.clientId(), request.peerAddress())) {
        marks.remove(request.clientId());
      }
      return null;
    }
    return mark.error;
  }

  /**
   * The error of the dead incarnation {@code op} was submitted to, or null while it is not dead.
   */
  @Nullable DmaException deadFor(Op<T> op) {
    if (marks.isEmpty()) {
      return null;
    }
    DeadMark mark = marks.get(op.client.id);
    return mark != null && Arrays.equals(mark.address, op.request.peerAddress())
        ? mark.error
        : null;
  }

  /** Whether a reset inserts the client's peer again: not while its current incarnation is dead. */
  boolean reinsertAfterReset(long clientId) {
    DeadMark mark = marks.get(clientId);
    return mark == null || !peers.isCurrentOrUnknown(clientId, mark.address);
  }

  /**
   * Marks a client incarnation (its id and {@code address}) dead after one of its transfers passed
   * a deadline: its queued transfers fail now, and new ones fail at intake, each with the same
   * error, instead of each waiting out a deadline of its own. The mark is the incarnation's, not
   * the id's: a transfer carrying a new address for the client is served at once. An incarnation
   * the client has already left (it advertised another address since) is not marked: only its own
   * transfers failed.
   *
   * @return whether the incarnation was marked
   */
  boolean markDead(long clientId, byte[] address, String why) {
    if (!peers.isCurrentOrUnknown(clientId, address)) {
      return false;
    }
    DmaException unreachable = failures.unreachable(clientId, address, why);
    marks.put(clientId, new DeadMark(address.clone(), unreachable));
    failQueued(worker.pending, clientId, address, unreachable);
    // Mid-pass, the ops this pass already put aside are queued too.
    failQueued(worker.deferred, clientId, address, unreachable);
    return true;
  }

  /**
   * Marks the incarnation of a judged op dead, which also fails its queued ops: posted after the
   * reset, they would stall every client again. An incarnation already replaced by a new address is
   * not marked (its queued ops are refused as stale at their post).
   */
  void judged(Op<T> op, String why) {
    if (deadFor(op) == null) {
      markDead(op.client.id, op.request.peerAddress(), why);
    }
  }

  /** Fails the ops of {@code queue} sent to the incarnation (client id and address). */
  private void failQueued(
      ArrayDeque<Op<T>> queue, long clientId, byte[] address, DmaException unreachable) {
    for (var queued = queue.iterator(); queued.hasNext(); ) {
      Op<T> op = queued.next();
      if (op.sentTo(clientId, address)) {
        queued.remove();
        worker.failUnposted(op, unreachable);
      }
    }
  }
}
