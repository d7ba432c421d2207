package dev.dma.core.internal;

import dev.dma.api.Direction;
import dev.dma.api.DmaException;
import dev.dma.api.Operands;
import dev.dma.api.TransferRequest;
import dev.dma.core.internal.regions.Registration;
import io.opentelemetry.context.Context;
import java.lang.foreign.MemorySegment;
import java.util.Arrays;
import org.jspecify.annotations.Nullable;

/**
 * Per-op state, recycled by {@link FabricWorker}: a transfer between intake and completion. Its
 * telemetry fields (the submitter's context, the spans, the post time) are inherited from {@link
 * WorkerTelemetry.OpTrace} rather than held in an object of their own, so with telemetry off a
 * transfer pays no extra load or allocation for them.
 *
 * <p>Allocation: the worker recycles operations (each with its telemetry record), slots, client
 * records and the plain batch list. A plain transfer allocates its {@link dev.dma.api.Completion};
 * its successful outcome, a {@link dev.dma.api.TransferDone}, is shared with the previous transfer
 * while lengths repeat (a new length allocates a new one), and a failure allocates its {@link
 * DmaException} and an {@link dev.dma.api.Outcome.Failed}. A checksummed transfer allocates a
 * {@code Checksummed} record on the worker, and on the pool thread its Completion, its TransferDone
 * (which carries its checksum) and, when fewer bytes moved than the operand holds, a slice of it.
 * Each flush of checksummed completions allocates a new batch list, a job and the pool queue's
 * node, and the job a list of the completions it delivers (all in {@code ChecksumBatch}). With
 * tracing or metrics installed, spans and attributes come on top ({@code WorkerTelemetry}).
 *
 * <p>Threads: the worker thread only; the recovery classes ({@link DeadlineScan}, {@link
 * RefusedPosts}, {@link CompletionErrors}, {@link Resets}, {@link DeadPeers}) read and mark ops the
 * worker hands them.
 *
 * @param <T> the caller context type
 */
final class Op<T extends Operands> extends WorkerTelemetry.OpTrace {
  /**
   * How many times a transfer is posted again after its connection was lost under it before it
   * fails: two are enough for the one teardown another transfer's bad key causes on tcp;ofi_rxm.
   * Which transfers may be posted again at all is {@link #mayPostAgain}.
   */
  static final int MAX_RETRIES = 2;

  /** {@link #postedByNs} of an op no deadline scan has seen since its post. */
  static final long NOT_SCANNED = Long.MIN_VALUE;

  TransferRequest<T> request;
  MemorySegment operand;
  long lengthBytes;
  Client client;
  Registration lease;
  int slot;
  boolean stalled;
  // Passed the completion deadline while posted; finished by its flush or the reset.
  boolean expired;
  // Expired because its client left with it posted (CompletionDeadline.leftBehind); its failure
  // says so.
  boolean leftBehind;
  // Expired because its peer's endpoint is gone (DeadlineScan.judgeGone): the failure it ends with.
  @Nullable DmaException judgedGone;
  // Its place in post order (see FabricWorker.postSequence).
  long postSeq;
  // Posts abandoned to a reset or a torn-down connection so far.
  int retries;
  // Times it was handed to the provider; a failed write ever posted may still land.
  int posts;
  // No earlier than its post, on the worker's ticker: the first deadline scan after the post
  // stamps it (NOT_SCANNED until then); the completion deadline counts from here.
  long postedByNs;
  // The coarse clock's epoch when it was posted; bounds its post time for the first scan.
  int postedEpoch;
  // When the provider first answered -FI_EAGAIN; the progress deadline counts from here.
  long stalledSinceNs;

  /** Whether the op was sent to the incarnation {@code clientId} at {@code address}. */
  boolean sentTo(long clientId, byte[] address) {
    return client.id == clientId && Arrays.equals(request.peerAddress(), address);
  }

  /**
   * Fills a recycled op for a transfer intake accepted, counted for {@code client}; the per-op
   * state of its last life is cleared (its lease and trace were dropped when it finished).
   */
  void accepted(
      TransferRequest<T> request,
      MemorySegment operand,
      long lengthBytes,
      @Nullable Context parent,
      Client client) {
    this.request = request;
    this.operand = operand;
    this.lengthBytes = lengthBytes;
    stalled = false;
    expired = false;
    leftBehind = false;
    judgedGone = null;
    retries = 0;
    posts = 0;
    this.parent = parent;
    this.client = client;
    client.outstanding++;
  }

  /**
   * Whether an op whose post was lost may be posted again: a read always (it writes no remote
   * memory, and its earlier post can no longer write the landing buffer: the provider failed it, or
   * the reset closed dma's endpoint), a write only after a connection-level error completion and
   * only when its request allows it ({@link TransferRequest#retryWrite()}). After an endpoint reset
   * a write is never posted again: the old connection may still deliver its bytes, later than the
   * repost's and so perhaps over newer ones. Either way at most {@link #MAX_RETRIES} times.
   *
   * @param connectionLost true for a connection-level error completion, false for a reset
   */
  boolean mayPostAgain(boolean connectionLost) {
    if (retries >= MAX_RETRIES) {
      return false;
    }
    return isRead() || (connectionLost && request.retryWrite());
  }

  /** Counts a retry of an op whose post is being abandoned; the caller queues it again. */
  void retried(WorkerTelemetry telemetry, String why) {
    retries++;
    if (telemetry.tracing) {
      telemetry.retried(this, why);
    }
  }

  /** Whether the op reads from its peer (a read changes nothing there). */
  boolean isRead() {
    return request.direction() instanceof Direction.FromPeer;
  }

  /**
   * Its failure saying what it may have left at the peer: a write that was ever posted may land
   * later ({@link DmaException.TargetMemory#MAY_HAVE_CHANGED}), whatever ended it; a read, or a
   * write never posted, changed nothing there.
   */
  DmaException whatItLeft(DmaException error) {
    return posts > 0 && !isRead()
        ? error.withTargetMemory(DmaException.TargetMemory.MAY_HAVE_CHANGED)
        : error;
  }
}
