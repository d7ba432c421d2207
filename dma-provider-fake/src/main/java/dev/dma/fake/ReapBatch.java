package dev.dma.fake;

import dev.dma.api.DmaException;
import dev.dma.spi.CompletionSink;
import java.util.Objects;
import org.jspecify.annotations.Nullable;

/**
 * The completions one {@link FakeEndpoint#reap} takes off its queue (in the {@linkplain
 * FakeScript#completionOrder scripted order}, checked by {@link OpAudit}, counted, their slots
 * freed), copied out of their slots so that the sink is called outside the fabric's lock, and their
 * delivery: a success as {@link CompletionSink#completed}, an error as {@link
 * CompletionSink#failed} with the reason and the exact message dma's libfabric endpoint gives the
 * same error, and a scripted completion-queue read failure thrown after the entries it lets
 * through. The arrays grow to the largest batch and are reused, so a reap allocates nothing once
 * warm.
 *
 * <p>Threads: one per endpoint, used only by its owner's reap: {@link #take} with the fabric's lock
 * held, {@link #deliver} after releasing it, so the sink (the caller's code) may use other
 * endpoints of the fabric, or wait for threads that do, without deadlocking.
 */
final class ReapBatch {
  private final FakeScript script;
  private final Counts counts;
  private final OpSlots ops;
  private final CompletionQueue completions;
  private final OpAudit audit;

  private int[] slots = new int[16];
  private int[] errno = new int[16];
  private int[] providerErrno = new int[16];
  private String[] text = new String[16];

  ReapBatch(
      FakeScript script, Counts counts, OpSlots ops, CompletionQueue completions, OpAudit audit) {
    this.script = script;
    this.counts = counts;
    this.ops = ops;
    this.completions = completions;
    this.audit = audit;
  }

  /**
   * Takes up to {@code max} ready completions (fewer when a scripted read failure lets fewer
   * through) into the batch and frees their slots. Call with the fabric's lock held.
   *
   * @param failure this reap's scripted read failure, or null
   * @param contexts the endpoint's op contexts (null before {@code openSlots}, when no slot is
   *     ready), checked for the slots posted with scribbled contexts
   * @return how many completions the batch holds
   */
  int take(int max, FakeScript.@Nullable CqFailure failure, @Nullable OpContexts contexts) {
    int count = Math.min(max, completions.readyCount());
    if (failure != null) {
      count = Math.min(count, failure.afterEntries());
      counts.increment(Counts.CQ_READ_FAILURES);
    }
    if (slots.length < count) {
      int size = Math.max(count, slots.length * 2);
      slots = new int[size];
      errno = new int[size];
      providerErrno = new int[size];
      text = new String[size];
    }
    boolean newestFirst = script.order == FakeScript.CompletionOrder.NEWEST_FIRST;
    for (int i = 0; i < count; i++) {
      int slot = completions.takeReady(newestFirst);
      audit.checkStillOwned(slot, "reap");
      if (ops.scribbled[slot]) {
        audit.checkContext(slot, Objects.requireNonNull(contexts));
      }
      slots[i] = slot;
      errno[i] = ops.errno[slot];
      providerErrno[i] = ops.providerErrno[slot];
      text[i] = ops.text[slot];
      counts.increment(ops.errno[slot] == 0 ? Counts.COMPLETIONS : Counts.ERROR_COMPLETIONS);
      ops.free(slot);
    }
    return count;
  }

  /**
   * Delivers the first {@code count} completions to {@code sink}, in order, then throws the
   * scripted read failure, if any. Call without the fabric's lock.
   *
   * @throws DmaException of kind FABRIC with the scripted message and errno, after the entries
   */
  void deliver(CompletionSink sink, int count, FakeScript.@Nullable CqFailure failure) {
    for (int i = 0; i < count; i++) {
      if (errno[i] == 0) {
        sink.completed(slots[i]);
      } else {
        sink.failed(
            slots[i],
            reasonOf(errno[i]),
            errno[i],
            providerErrno[i],
            FiErrno.completionMessage(errno[i], providerErrno[i], text[i]));
        text[i] = null;
      }
    }
    if (failure != null) {
      throw new DmaException(
          DmaException.Kind.FABRIC,
          failure.message(),
          failure.errno(),
          DmaException.UNKNOWN_ERRNO,
          null);
    }
  }

  /**
   * The reason of an error completion, as dma's libfabric endpoint gives it for the same error on
   * tcp: {@code FI_ECANCELED} (the fake's closed target, tcp's closed connection) is {@link
   * DmaException.Reason#ACCESS_DENIED}, since tcp cannot tell a target that refused from one that
   * went away (the worker then asks {@link FakeEndpoint#peerGone}, and reports a closed target as
   * {@link DmaException.Reason#PEER_UNREACHABLE}, as it does on tcp); the rest is what the error
   * number says. Keeps a test on the fake choosing the same action as the server will on tcp
   * (dma-it's conformance suite checks both).
   */
  private static DmaException.Reason reasonOf(int errno) {
    return errno == FiErrno.ECANCELED
        ? DmaException.Reason.ACCESS_DENIED
        : DmaException.Reason.ofErrno(errno);
  }
}
