package dev.dma.core.internal;

import dev.dma.api.DmaException;
import dev.dma.api.Operands;
import dev.dma.core.internal.peers.PeerTable;
import dev.dma.spi.FabricEndpoint;
import java.util.Set;

/**
 * The completion deadline's scan of the posted ops, reached only when it is due: an op past the
 * deadline is expired, the client incarnation it was sent to is marked dead ({@link DeadPeers}),
 * and the endpoint is recovered so that the op's completion can be delivered safely ({@link
 * Resets}). Where the endpoint may strand a gone peer's ops, the scan also asks about the peers of
 * ops long in flight ({@link PeerProbe}). The clock and bookkeeping of the deadline are {@link
 * CompletionDeadline}'s; the progress deadline of a refused post is {@link RefusedPosts}'.
 *
 * <p>Threads: the worker thread only; the slots, queues and clock read here are the worker's.
 *
 * @param <T> the caller context type
 */
final class DeadlineScan<T extends Operands> {
  private final FabricWorker<T> worker;
  private final FabricEndpoint endpoint;
  private final PeerTable peers;
  private final WorkerTelemetry telemetry;
  private final Failures failures;
  private final DeadPeers<T> dead;
  private final PeerProbe probe;
  private final CompletionDeadline completionDeadline;
  // The endpoint completes in post order across peers (shm up to 2.4): one stuck op stalls every
  // client, so the deadline judges only the oldest stuck op's incarnation (see judgeInPostOrder).
  private final boolean inPostOrder;
  // The endpoint may leave a gone peer's posted ops neither completed nor failed (shm), so the
  // deadline scan asks about the peers of ops long in flight too.
  private final boolean strandsOpsOfGonePeers;
  // The endpoint's removal of a peer flushes its posted ops (FabricEndpoint.Capability), so a dead
  // peer's ops come back without a reset.
  private final boolean removalFlushes;

  DeadlineScan(
      FabricWorker<T> worker, boolean inPostOrder, Set<FabricEndpoint.Capability> declared) {
    this.worker = worker;
    this.endpoint = worker.endpoint;
    this.peers = worker.peers;
    this.telemetry = worker.telemetry;
    this.failures = worker.failures;
    this.dead = worker.dead;
    this.probe = worker.probe;
    this.completionDeadline = worker.completionDeadline;
    this.inPostOrder = inPostOrder;
    this.strandsOpsOfGonePeers =
        declared.contains(FabricEndpoint.Capability.STRANDS_OPERATIONS_OF_GONE_PEERS);
    this.removalFlushes = declared.contains(FabricEndpoint.Capability.REMOVAL_FLUSHES);
  }

  /**
   * The scan, when due: fails every in-flight op past the completion deadline, marks its client
   * dead, and recovers the endpoint so the op's completion can be delivered safely: by the flush
   * its peer's removal causes where the provider guarantees one, otherwise (and when the flush does
   * not come) by resetting the endpoint. An expired op is delivered only from its reaped completion
   * or from the reset, never on the timer alone: until then the provider may still write its
   * operand.
   *
   * @param now the worker's coarse clock, when the scan came due
   * @return 1, the scan's work
   */
  int scan(long now, Resets<T> resets) {
    completionDeadline.scanned(now);
    // The deadline judges the provider, not the worker's absence: after a stall (a GC pause, a
    // slow completer, no CPU) completions may be waiting in the queue for ops that look overdue.
    // Reap them all first, then read the clock afresh.
    reapEverythingWaiting();
    worker.readClock();
    long scanNs = worker.now;
    if (inPostOrder) {
      judgeInPostOrder(scanNs);
    } else {
      judgeEach(scanNs);
    }
    String resetReason = completionDeadline.resetReason(worker.now, removalFlushes);
    if (resetReason != null) {
      resets.reset(resetReason);
    }
    return 1;
  }

  /**
   * Reaps until the completion queue has nothing more, at most one full window plus one batch: a
   * provider that keeps producing cannot hold the scan for ever.
   */
  private void reapEverythingWaiting() {
    int budget = worker.cap + FabricWorker.TARGET_COMPLETIONS;
    while (budget > 0) {
      int reaped;
      try {
        reaped = endpoint.reap(worker, FabricWorker.TARGET_COMPLETIONS);
      } catch (DmaException error) {
        worker.warnings.warn("completion queue read failed: " + error.getMessage());
        return;
      }
      if (reaped < FabricWorker.TARGET_COMPLETIONS) {
        return;
      }
      budget -= reaped;
    }
  }

  /**
   * Expires every posted op past the deadline and marks its client dead: on an endpoint whose
   * completions do not wait for each other, an op past the deadline is its own peer's doing.
   */
  private void judgeEach(long scanNs) {
    // Asked at every scan, not once: whether a removal flushes may change with the provider's
    // state (the fake's script says so at any time).
    Op<T>[] slots = worker.slots;
    for (int slot = 0; slot < worker.cap; slot++) {
      Op<T> op = slots[slot];
      if (op == null || op.expired) {
        continue;
      }
      stampPostedBy(op);
      if (!completionDeadline.passed(scanNs, op.postedByNs)) {
        if (!removalFlushes
            && hasLeft(op)
            && completionDeadline.leftBehind(scanNs, op.postedByNs)) {
          // Its client left with it posted and its provider will not flush it: it may never
          // complete (the peer's endpoint closed). Judge it now, without the reset that would take
          // the current clients' ops with it: a quiet one, once theirs have completed.
          op.expired = true;
          op.leftBehind = true;
          telemetry.completionDeadlinePassed();
          worker.quietResetWanted = true;
        } else if (strandsOpsOfGonePeers && scanNs - op.postedByNs >= probe.probeAfterNs()) {
          String gone = probe.gone(op.client, op.request.peerAddress(), worker.now);
          if (gone != null) {
            judgeGone(op, gone);
          }
        }
      } else {
        op.expired = true;
        completionDeadline.expired();
        telemetry.completionDeadlinePassed();
        long clientId = op.client.id;
        if (dead.deadFor(op) == null
            && dead.markDead(clientId, op.request.peerAddress(), completionDeadline.text())
            && removalFlushes) {
          // Its posted ops come back as flushed error completions.
          peers.release(clientId);
        }
      }
    }
  }

  /**
   * Judges every posted op of the incarnation of {@code op}, whose endpoint is gone and whose ops
   * the endpoint may never complete: they fail as {@link DmaException.Reason#PEER_UNREACHABLE} once
   * a reset makes their operands safe, and the incarnation is marked unreachable. The reset is a
   * quiet one (it waits for the current clients' ops, not for these), except on an endpoint that
   * completes in post order, where nothing completes behind these ops: there they are expired as a
   * deadline expires them, the reset follows at once and posts the bystanders again.
   */
  private void judgeGone(Op<T> op, String evidence) {
    long clientId = op.client.id;
    byte[] address = op.request.peerAddress();
    DmaException error = failures.gone(clientId, address, evidence, 0, 0);
    Op<T>[] slots = worker.slots;
    for (int slot = 0; slot < worker.cap; slot++) {
      Op<T> posted = slots[slot];
      if (posted != null && !posted.expired && posted.sentTo(clientId, address)) {
        if (inPostOrder) {
          expire(posted, true);
        } else {
          posted.expired = true;
          posted.leftBehind = true;
          worker.quietResetWanted = true;
        }
        posted.judgedGone = error;
      }
    }
    dead.markDead(clientId, address, Failures.goneText(evidence));
  }

  /** Gives an op its {@link Op#postedByNs} at the first deadline scan that sees it. */
  private void stampPostedBy(Op<T> op) {
    if (op.postedByNs == Op.NOT_SCANNED) {
      op.postedByNs = worker.postedNoLaterThan(op.postedEpoch);
    }
  }

  /**
   * The deadline on an endpoint that completes in post order ({@link
   * FabricEndpoint#completesInPostOrder()}): every completion after a stuck op waits behind it, so
   * the ops past the deadline are mostly bystanders of live clients. Only the oldest op in flight
   * can be the cause; it is judged when it passes the deadline, or sooner ({@link
   * CompletionDeadline#leftBehind}) when its client has left (removePeer, or a new address since),
   * which is what a client closing its endpoint with a write in flight looks like. Its
   * incarnation's ops are expired (and a client still current is marked dead), as are those of any
   * other client that left and whose ops are as old; the reset that follows posts every other op
   * again (see {@link Resets#reset}), so live clients lose nothing.
   */
  private void judgeInPostOrder(long scanNs) {
    Op<T>[] slots = worker.slots;
    Op<T> oldest = null;
    for (int slot = 0; slot < worker.cap; slot++) {
      Op<T> op = slots[slot];
      if (op == null || op.expired) {
        continue;
      }
      stampPostedBy(op);
      if (oldest == null || op.postSeq - oldest.postSeq < 0) {
        oldest = op;
      }
    }
    if (oldest == null) {
      return;
    }
    boolean passed = completionDeadline.passed(scanNs, oldest.postedByNs);
    boolean left =
        !passed && hasLeft(oldest) && completionDeadline.leftBehind(scanNs, oldest.postedByNs);
    if (!passed
        && !left
        && strandsOpsOfGonePeers
        && scanNs - oldest.postedByNs >= probe.probeAfterNs()) {
      String gone = probe.gone(oldest.client, oldest.request.peerAddress(), worker.now);
      if (gone != null) {
        // Its own ops are judged now; the bystanders are posted again after the reset.
        judgeGone(oldest, gone);
        return;
      }
    }
    if (!passed && !left) {
      return;
    }
    long clientId = oldest.client.id;
    byte[] address = oldest.request.peerAddress();
    for (int slot = 0; slot < worker.cap; slot++) {
      Op<T> op = slots[slot];
      if (op == null || op.expired) {
        continue;
      }
      if (op.sentTo(clientId, address)) {
        expire(op, left);
      } else if (hasLeft(op) && completionDeadline.leftBehind(scanNs, op.postedByNs)) {
        expire(op, true);
        dead.judged(op, completionDeadline.leftText());
      }
    }
    dead.judged(oldest, left ? completionDeadline.leftText() : completionDeadline.text());
  }

  /** Marks a posted op expired: its slot waits for the reset, its failure for then. */
  private void expire(Op<T> op, boolean leftBehind) {
    op.expired = true;
    op.leftBehind = leftBehind;
    completionDeadline.expired();
    telemetry.completionDeadlinePassed();
  }

  /**
   * Whether the client incarnation an op was sent to has left: removePeer was called for it, or the
   * client has advertised another address since.
   */
  boolean hasLeft(Op<T> op) {
    return op.client.removalPending
        || !peers.isCurrentOrUnknown(op.client.id, op.request.peerAddress());
  }

  /** The failure of an op that passed the completion deadline (or was judged gone). */
  DmaException expiredError(Op<T> op) {
    if (op.judgedGone != null) {
      return op.judgedGone;
    }
    return failures.completionDeadline(
        op.client.id,
        op.request.peerAddress(),
        op.leftBehind ? completionDeadline.leftText() : completionDeadline.text());
  }
}
