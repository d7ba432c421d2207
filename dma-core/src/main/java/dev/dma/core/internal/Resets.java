package dev.dma.core.internal;

import dev.dma.api.DmaException;
import dev.dma.api.Operands;
import dev.dma.core.internal.peers.PeerTable;
import dev.dma.spi.FabricEndpoint;
import java.lang.System.Logger.Level;
import java.util.ArrayDeque;
import java.util.Arrays;
import java.util.function.Consumer;

/**
 * The worker's endpoint resets, the one state in which no provider can still touch a posted
 * operand: the full reset a deadline scan asks for ({@link #reset}), and the quiet one ({@link
 * #quietPass}) that waits for the current clients' ops first, when the endpoint asks for a fresh
 * endpoint ({@link FabricEndpoint#wantsQuietReset}) or an op of a client that left was judged
 * stuck. Reached only when a reset is wanted or a scan is due, never on the per-transfer path.
 *
 * <p>Threads: the worker thread only; the slots and queues emptied here are the worker's.
 *
 * @param <T> the caller context type
 */
final class Resets<T extends Operands> {
  private static final System.Logger LOG = System.getLogger(FabricWorker.class.getName());

  /** {@link #quietResetSinceNs} while the endpoint wants no reset. */
  private static final long NO_QUIET_RESET = Long.MIN_VALUE;

  private final FabricWorker<T> worker;
  private final FabricEndpoint endpoint;
  private final PeerTable peers;
  private final DeadPeers<T> dead;
  private final DeadlineScan<T> deadlines;
  private final CompletionDeadline completionDeadline;
  private final Consumer<byte[]> addressChanged;
  private final long progressDeadlineNs;
  private final boolean inPostOrder;
  // When the endpoint first asked for a quiet reset (wantsQuietReset), or NO_QUIET_RESET.
  private long quietResetSinceNs = NO_QUIET_RESET;

  Resets(
      FabricWorker<T> worker,
      Consumer<byte[]> addressChanged,
      long progressDeadlineNs,
      boolean inPostOrder) {
    this.worker = worker;
    this.endpoint = worker.endpoint;
    this.peers = worker.peers;
    this.dead = worker.dead;
    this.deadlines = worker.deadlines;
    this.completionDeadline = worker.completionDeadline;
    this.addressChanged = addressChanged;
    this.progressDeadlineNs = progressDeadlineNs;
    this.inPostOrder = inPostOrder;
  }

  /**
   * A pass while a reset is wanted once nothing is in flight: the endpoint asks for one ({@link
   * FabricEndpoint#wantsQuietReset}), or an op of a client that left was judged stuck ({@link
   * DeadlineScan}) and only a reset makes its operand safe to hand back. Posts nothing new, so what
   * is in flight can drain, and resets when the ops of current clients have (those of clients that
   * left may never complete), or once the progress deadline has passed with ops still in flight (a
   * peer that will not answer must not hold every client's posts; those ops are finished as any
   * reset finishes them). Then posts on the fresh endpoint.
   *
   * @return the ops posted this pass
   */
  int quietPass() {
    worker.readClock();
    long now = worker.now;
    if (quietResetSinceNs == NO_QUIET_RESET) {
      quietResetSinceNs = now;
    }
    if (worker.inFlight > 0
        && now - quietResetSinceNs < progressDeadlineNs
        && inFlightToCurrentClients() > 0) {
      return 0;
    }
    quietResetSinceNs = NO_QUIET_RESET;
    reset(
        worker.quietResetWanted
            ? "a client left or went away with a transfer posted that its provider will not"
                + " complete"
            : "the provider asked for a fresh endpoint: shm cannot reuse the slots of peers that"
                + " left, and a reset frees them");
    return worker.postPass();
  }

  /**
   * The ops in flight whose client has not left: what a quiet reset waits for. An op of a client
   * that left may never complete (its endpoint closed with it posted); the reset finishes it.
   */
  private int inFlightToCurrentClients() {
    int count = 0;
    Op<T>[] slots = worker.slots;
    for (int slot = 0; slot < worker.cap; slot++) {
      Op<T> op = slots[slot];
      if (op != null && !op.expired && !deadlines.hasLeft(op)) {
        count++;
      }
    }
    return count;
  }

  /**
   * Closes and reopens the endpoint's transport ({@link FabricEndpoint#reset()}). Then every op
   * that was in flight is finished: expired ones fail with the deadline, ones of dead clients with
   * their client's error, and the rest, which failed through no fault of their own, are posted
   * again (at most {@link Op#MAX_RETRIES} times, then they fail as {@link
   * DmaException.Reason#ENDPOINT_RESET}, retryable). Live peers are inserted again; queued
   * transfers go out on the new endpoint.
   */
  void reset(String why) {
    byte[] addressBefore = endpoint.localAddress();
    try {
      endpoint.reset();
    } catch (RuntimeException cannot) {
      // Nothing else makes the operands safe to hand back: stop, and let shutDown close the
      // endpoint before it fails everything.
      throw new IllegalStateException(
          "the endpoint could not be reset after " + why + ": " + cannot, cannot);
    }
    completionDeadline.endpointReset();
    worker.telemetry.endpointReset();
    quietResetSinceNs = NO_QUIET_RESET;
    worker.quietResetWanted = false;
    // The peers first: finishing the ops below releases the peers of clients whose removal waited
    // for them, and a release must find the new handle, not one the reset voided.
    int reinserted = peers.reinsertAfterReset(dead::reinsertAfterReset);
    int retried = 0;
    int failed = 0;
    ArrayDeque<Op<T>> again = new ArrayDeque<>();
    Op<T>[] slots = worker.slots;
    for (int slot = 0; slot < worker.cap; slot++) {
      Op<T> op = slots[slot];
      if (op == null) {
        continue;
      }
      slots[slot] = null;
      worker.freeSlots[worker.freeSlotCount++] = slot;
      worker.inFlight = Math.max(0, worker.inFlight - 1);
      op.client.inFlight--;
      DmaException deadError = dead.deadFor(op);
      if (op.expired) {
        worker.finishReaped(op, deadlines.expiredError(op));
        failed++;
      } else if (deadError != null) {
        worker.finishReaped(op, deadError);
        failed++;
      } else if (inPostOrder || op.mayPostAgain(false)) {
        // On an in-post-order endpoint the op only waited behind the expired one (each reset there
        // expires at least one op, so this cannot go on for ever), and a write may go again: see
        // FabricEndpoint.completesInPostOrder.
        op.retried(worker.telemetry, "endpoint reset");
        again.addLast(op);
        retried++;
      } else {
        worker.finishReaped(op, Failures.endpointReset(op.isRead(), op.retries, why));
        failed++;
      }
    }
    worker.idleSinceNs = worker.now;
    // Posted again ahead of everything queued behind them, in their original order.
    while (!again.isEmpty()) {
      worker.pending.addFirst(again.pollLast());
    }
    // Every queued op gets a fresh chance on the new endpoint: what refused its posts is gone.
    for (Op<T> queued : worker.pending) {
      queued.stalled = false;
    }
    byte[] address = endpoint.localAddress();
    if (!Arrays.equals(address, addressBefore)) {
      try {
        addressChanged.accept(address.clone());
      } catch (RuntimeException listenerBug) {
        LOG.log(
            Level.ERROR, "the local-address listener threw; the worker carries on", listenerBug);
      }
    }
    LOG.log(
        Level.WARNING,
        "reset the endpoint ("
            + why
            + "): "
            + failed
            + " transfers failed, "
            + retried
            + " posted again, "
            + reinserted
            + " peers inserted again");
  }
}
