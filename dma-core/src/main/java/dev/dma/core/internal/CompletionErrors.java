package dev.dma.core.internal;

import dev.dma.api.DmaException;
import dev.dma.api.Errno;
import dev.dma.api.Operands;

/**
 * The error completions the worker reaps, reached only from the reap callback's failure branch: an
 * op whose connection was torn down under it is posted again, one whose peer's endpoint is gone
 * fails as unreachable and marks the incarnation dead, and the rest fail naming their client (or
 * with the deadline or dead mark that already judged them).
 *
 * <p>Threads: the worker thread only, inside {@code endpoint.reap}.
 *
 * @param <T> the caller context type
 */
final class CompletionErrors<T extends Operands> {
  private final FabricWorker<T> worker;
  private final Failures failures;
  private final DeadPeers<T> dead;
  private final PeerProbe probe;
  private final DeadlineScan<T> deadlines;

  CompletionErrors(FabricWorker<T> worker) {
    this.worker = worker;
    this.failures = worker.failures;
    this.dead = worker.dead;
    this.probe = worker.probe;
    this.deadlines = worker.deadlines;
  }

  /**
   * Decides what an error completion of {@code op}, already out of its slot, ends with: posted
   * again, or finished with its failure.
   */
  void failed(Op<T> op, DmaException.Reason failed, int errno, int providerErrno, String message) {
    if (postAgainAfterConnectionLoss(op, errno)) {
      return;
    }
    String gone = probe.goneAfterFailure(op, failed, dead.deadFor(op) != null, worker.now);
    if (gone == null) {
      worker.finishReaped(op, failure(op, failed, errno, providerErrno, message));
      return;
    }
    long clientId = op.client.id;
    byte[] address = op.request.peerAddress();
    worker.finishReaped(op, failures.gone(clientId, address, gone, errno, providerErrno));
    // After its own failure, so the client's queued ops fail after it, not before.
    dead.markDead(clientId, address, Failures.goneText(gone));
  }

  /**
   * Queues an op whose error completion says its connection was torn down under it (on tcp;ofi_rxm
   * another transfer's bad key does that), not by its own fault, to be posted again once the
   * provider reconnects; returns whether it did. Not an op past its deadline, one of a dead client,
   * or one out of retries.
   */
  private boolean postAgainAfterConnectionLoss(Op<T> op, int errno) {
    if (op.expired
        || !isConnectionLevel(errno)
        || !op.mayPostAgain(true)
        || dead.deadFor(op) != null) {
      return false;
    }
    op.retried(worker.telemetry, "connection reset");
    worker.pending.addFirst(op);
    return true;
  }

  /** The failure an error completion stands for, naming the client and peer address it concerns. */
  private DmaException failure(
      Op<T> op, DmaException.Reason reason, int errno, int providerErrno, String message) {
    if (op.expired) {
      // The flush of an op that passed its deadline: the deadline is why it failed.
      return deadlines.expiredError(op);
    }
    DmaException deadError = dead.deadFor(op);
    if (deadError != null) {
      // Flushed by the removal of its dead peer: that is why it failed.
      return deadError;
    }
    return failures.completionFailed(
        reason, op.client.id, op.request.peerAddress(), errno, providerErrno, message);
  }

  /**
   * Whether a completion error means the connection failed rather than this transfer: {@code
   * ENOTCONN}, {@code EPIPE}, {@code ECONNRESET} and {@code ECONNABORTED}, the same on every
   * libfabric provider here (tcp;ofi_rxm reports the victims of a torn-down connection as ENOTCONN
   * with prov_errno EPIPE; net, sockets and shm report their own faults as EACCES, EIO or
   * ECANCELED, which are not retried).
   */
  static boolean isConnectionLevel(int errno) {
    return switch (errno) {
      case Errno.EPIPE, Errno.FI_ECONNABORTED, Errno.FI_ECONNRESET, Errno.FI_ENOTCONN -> true;
      default -> false;
    };
  }
}
