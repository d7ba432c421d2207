package dev.dma.core.internal;

import dev.dma.api.Completion;
import dev.dma.api.DmaException;
import dev.dma.api.Operands;
import dev.dma.api.Outcome;
import dev.dma.api.TransferRequest;
import java.lang.System.Logger.Level;
import java.util.ArrayList;
import java.util.List;
import org.jspecify.annotations.Nullable;

/**
 * A fabric worker's way out: the endpoint closes first, then whatever the worker still holds fails.
 * After a normal exit only never-posted ops and held checksummed completions remain; after a
 * failure, in-flight ops too. The endpoint is closed before in-flight ops are failed, so no
 * provider touches their buffers after their completion.
 *
 * <p>Threads: the worker's own, once, as it exits ({@link FabricWorker#shutDown}).
 */
final class WorkerShutdown {
  private static final System.Logger LOG = System.getLogger(FabricWorker.class.getName());

  private WorkerShutdown() {}

  /**
   * Fails whatever {@code worker} holds and closes its endpoint; {@code failure} is why, or null.
   */
  static <T extends Operands> void shutDown(FabricWorker<T> worker, @Nullable Throwable failure) {
    worker.channel.close();
    // Unregisters the gauges only: counters and spans below still record.
    worker.telemetry.close();
    try {
      worker.regions.close();
    } catch (RuntimeException e) {
      LOG.log(Level.WARNING, "clearing the registration cache failed", e);
    }
    try {
      worker.peers.clear();
    } catch (RuntimeException e) {
      LOG.log(Level.WARNING, "clearing the peer table failed", e);
    }
    // Whether the provider may still be live for what is posted: its close failed, so it may
    // not have stopped touching their operands. They still complete (every transfer gets its
    // completion, and the caller is not left waiting for ever), but their failure says so.
    String closeFailure = null;
    try {
      worker.endpoint.close();
    } catch (RuntimeException e) {
      closeFailure = String.valueOf(e.getMessage());
      LOG.log(Level.ERROR, "closing the endpoint failed; the provider may still be live", e);
    }
    List<Completion<T>> leftover = new ArrayList<>(worker.completions);
    worker.completions.clear();
    Op<T>[] slots = worker.slots;
    for (int slot = 0; slot < worker.cap; slot++) {
      Op<T> op = slots[slot];
      if (op != null) {
        slots[slot] = null;
        DmaException error =
            closeFailure != null
                ? Failures.closeFailed(closeFailure, failure)
                : worker.closeTimedOut && failure == null
                    ? Failures.closeTimedOut()
                    : Failures.workerGone(failure);
        if (worker.telemetry.on) {
          // Posted, so its spans are open: end them with the failure, and count it.
          worker.telemetry.reaped(op, op.isRead(), op.lengthBytes, error);
        }
        leftover.add(finished(worker, op, error));
      }
    }
    worker.inFlight = 0;
    Op<T> op;
    while ((op = worker.pending.pollFirst()) != null) {
      DmaException error = Failures.workerGone(failure);
      if (worker.telemetry.on) {
        worker.telemetry.failedUnposted(op.isRead(), error);
      }
      leftover.add(finished(worker, op, error));
    }
    // Deferred checksummed completions finish inline: the pool may be tearing down alongside.
    worker.checksums.drainInto(leftover);
    // Whatever arrived but was never taken in (only when the loop failed) fails too; replies are
    // abandoned so their callers wake.
    while (true) {
      Object message = worker.channel.poll();
      if (message != null) {
        leftover.addAll(refuse(worker, message));
      } else if (worker.channel.isDrained()) {
        break;
      } else {
        // An offer is inside the gate; it either lands in the queue or sees the channel closed.
        Thread.onSpinWait();
      }
    }
    if (!leftover.isEmpty()) {
      worker.deliver(leftover);
    }
  }

  /**
   * The failed completion of an op the worker drops at shutdown; its lease goes with it, after the
   * endpoint closed, which closed the registration too.
   */
  private static <T extends Operands> Completion<T> finished(
      FabricWorker<T> worker, Op<T> op, DmaException error) {
    T context = op.request.context();
    worker.releaseOutstanding();
    if (op.lease != null) {
      op.lease.releaseAfterEndpointClosed();
      op.lease = null;
    }
    return new Completion<>(context, Outcome.failed(op.whatItLeft(error)), op.posts);
  }

  @SuppressWarnings("unchecked")
  private static <T extends Operands> List<Completion<T>> refuse(
      FabricWorker<T> worker, Object message) {
    if (message instanceof Traced traced) {
      message = traced.request();
    }
    switch (message) {
      case TransferRequest<?> request -> {
        worker.releaseOutstanding();
        return List.of(
            new Completion<>(
                (T) request.context(), Outcome.failed(Failures.workerGoneBeforeIntake()), 0));
      }
      case Commands.AddPeer add -> add.reply().abandon();
      case Commands.Pin pin -> pin.reply().abandon();
      default -> {}
    }
    return List.of();
  }
}
