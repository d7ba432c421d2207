package dev.dma.core.internal;

import dev.dma.api.DmaException;
import dev.dma.api.Operands;
import dev.dma.core.internal.regions.LocalRegions;
import dev.dma.spi.FabricEndpoint;
import java.time.Duration;

/**
 * The posts the provider did not take, reached only from postPass's cold branches: one refused with
 * {@code -FI_EAGAIN} (queued again, or failed at its progress deadline, {@link #stalled}), one held
 * under {@code max_pinned_bytes} ({@link #held}), one that failed outright ({@link #failed}) and
 * one that threw ({@link #threw}). Each either puts the op aside for the next pass or fails it, and
 * marks the client incarnation dead ({@link DeadPeers}) when the refusal says its peer is.
 *
 * <p>Threads: the worker thread only; the queues and clock read here are the worker's.
 *
 * @param <T> the caller context type
 */
final class RefusedPosts<T extends Operands> {
  private final FabricWorker<T> worker;
  private final FabricEndpoint endpoint;
  private final LocalRegions regions;
  private final WorkerTelemetry telemetry;
  private final Failures failures;
  private final DeadPeers<T> dead;
  private final PeerProbe probe;
  private final CompletionDeadline completionDeadline;
  private final long progressDeadlineNs;
  // How long an op may keep getting -FI_EAGAIN while other transfers are in flight: the completion
  // deadline (those transfers' completions free what the provider is short of), or the progress
  // deadline when there is no completion deadline.
  private final long stallBoundNs;

  RefusedPosts(FabricWorker<T> worker, Duration progressDeadline, Duration completionDeadline) {
    this.worker = worker;
    this.endpoint = worker.endpoint;
    this.regions = worker.regions;
    this.telemetry = worker.telemetry;
    this.failures = worker.failures;
    this.dead = worker.dead;
    this.probe = worker.probe;
    this.completionDeadline = worker.completionDeadline;
    this.progressDeadlineNs = progressDeadline.toNanos();
    this.stallBoundNs =
        completionDeadline.isZero()
            ? progressDeadlineNs
            : Math.max(progressDeadlineNs, completionDeadline.toNanos());
  }

  /**
   * An op the provider refused with -FI_EAGAIN: queued again, or failed when the refusal says its
   * peer is dead. A full transmit queue is not a dead peer: while other transfers are in flight,
   * their completions free what the provider is short of (a burst to one peer fills its queue; a
   * dead shm neighbour holds shm's command slots until the completion deadline recovers them), so
   * the op waits. It fails only when its client has nothing in flight (else their completion
   * deadline judges it) and has had no post accepted nor completion reaped for the completion
   * deadline ({@link #stallBoundNs}), and never while an expired transfer awaits its recovery. With
   * nothing in flight at all, nothing of ours can be what the provider waits for: refused for the
   * progress deadline then, the peer cannot be reached (its connection cannot be set up, or its
   * queue stays full).
   */
  void stalled(Op<T> op, int code) {
    long now = worker.now;
    if (!op.stalled) {
      op.stalled = true;
      op.stalledSinceNs = now;
    }
    telemetry.stalled();
    // Also while closing: a connection still being set up answers -FI_EAGAIN too, so a stalled op
    // keeps its chance until the deadline, which bounds how long close() waits.
    String why = null;
    // Counted from the later of its first refusal and the last sign of life of its client (a post
    // accepted, a completion reaped): a client whose other transfers move is not stuck, however
    // long its queue at the peer.
    long since = Math.max(op.stalledSinceNs, op.client.movedNs);
    if (op.client.inFlight == 0 && now - since >= probe.probeAfterNs()) {
      // Nothing of its client's in flight, so no connection to its peer is up: a peer whose
      // endpoint is gone is told from one slow to connect by the endpoint's probe, long before the
      // deadlines below.
      String gone = probe.gone(op.client, op.request.peerAddress(), now);
      if (gone != null) {
        long clientId = op.client.id;
        byte[] address = op.request.peerAddress();
        worker.failUnposted(op, failures.gone(clientId, address, gone, -code, 0));
        dead.markDead(clientId, address, Failures.goneText(gone));
        return;
      }
    }
    if (worker.inFlight == 0) {
      if (now - Math.max(since, worker.idleSinceNs) >= progressDeadlineNs) {
        why = Failures.refusedWhileIdle(progressDeadlineNs);
      }
    } else if (op.client.inFlight == 0
        && now - since >= stallBoundNs
        && !completionDeadline.recovering()) {
      // With ops of its own in flight, the client is judged by their completion deadline instead.
      why = Failures.refusedWhileBusy(stallBoundNs);
    }
    if (why == null) {
      worker.deferred.addLast(op);
      return;
    }
    long clientId = op.client.id;
    byte[] address = op.request.peerAddress();
    DmaException error = failures.progressDeadline(clientId, address, why, code);
    telemetry.progressDeadlinePassed();
    // Fail it first, so the client's other queued ops fail after it, not before.
    worker.failUnposted(op, error);
    dead.markDead(clientId, address, why);
  }

  /**
   * An op whose post failed outright: it finishes here and is never reaped. When the endpoint says
   * the failure means the peer is gone, the client incarnation is marked unreachable too.
   */
  void failed(Op<T> op, int code) {
    DmaException.Reason reason = endpoint.postFailureReason(code);
    long clientId = op.client.id;
    byte[] address = op.request.peerAddress();
    String text = Failures.postText(endpoint.errorText(code), code);
    worker.failUnposted(op, failures.postFailed(reason, clientId, address, text, code));
    if (reason == DmaException.Reason.PEER_UNREACHABLE) {
      // markDead decides per incarnation: a mark left by an older address does not stop this one.
      dead.markDead(clientId, address, text);
    }
  }

  /**
   * An op whose operand does not fit under {@code max_pinned_bytes} yet ({@link
   * LocalRegions#noRoomYet()}): queued again while an op in flight may release a lease, within the
   * progress deadline; otherwise failed as retryable, naming the bound. Never marks its peer dead:
   * the bound is this endpoint's, not the peer's.
   */
  void held(Op<T> op) {
    long now = worker.now;
    if (!op.stalled) {
      op.stalled = true;
      op.stalledSinceNs = now;
    }
    if (worker.inFlight > 0 && now - op.stalledSinceNs < progressDeadlineNs) {
      worker.deferred.addLast(op);
      return;
    }
    worker.failUnposted(
        op,
        regions.noRoomError(
            op.lengthBytes,
            worker.inFlight > 0
                ? "for longer than progress_deadline"
                : "with no transfer in flight left to release one"));
  }

  /**
   * An op whose post threw: a set-up failure (peer insert, registration) fails it alone, naming its
   * client; any other exception (a provider bug) still finishes it, since it is in neither the
   * queue nor a slot now and nothing else would ever complete it.
   */
  void threw(Op<T> op, Throwable thrown) {
    worker.failUnposted(
        op,
        thrown instanceof DmaException setupFailure
            ? failures.namingTheClient(op.client.id, op.request.peerAddress(), setupFailure)
            : Failures.postThrew(thrown));
  }
}
