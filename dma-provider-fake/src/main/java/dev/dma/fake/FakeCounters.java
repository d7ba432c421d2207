package dev.dma.fake;

/**
 * A snapshot of what a fake endpoint, or every endpoint of a fake fabric, was asked to do, for
 * assertions. Taken with {@link FakeEndpoint#counters()} or {@link FakeFabric#counters()};
 * immutable, so it never changes after it is taken. A fabric's counters include its closed
 * endpoints.
 *
 * @param postAttempts every {@code postWrite} and {@code postRead} call, whatever it returned
 * @param posts posts accepted ({@code POSTED})
 * @param writes accepted writes
 * @param reads accepted reads
 * @param againAnswers posts answered {@code -FI_EAGAIN} (script, full transmit queue, unreachable
 *     peer)
 * @param postErrors posts answered another negative code: violations ({@code -FI_EINVAL}) and
 *     scripted refusals ({@link FakeScript#failNextPosts}, {@link FakeScript#failPostsTo})
 * @param completions successful completions delivered by {@code reap}
 * @param errorCompletions error completions delivered by {@code reap}
 * @param cqReadFailures {@code reap} calls that failed as a whole ({@code fi_cq_read: ...})
 * @param registrations local registrations that succeeded ({@code register})
 * @param registrationFailures {@code register} calls that threw
 * @param deregistrations {@code deregister} calls that closed a live registration
 * @param liveRegistrations registrations open now
 * @param registrationsOpenAtClose registrations an endpoint closed itself because their owner never
 *     deregistered them
 * @param exposes regions exposed for remote access ({@code expose})
 * @param liveExposes exposed regions open now
 * @param inserts peers inserted into address vectors
 * @param insertFailures {@code insertPeer} calls that threw
 * @param removes peers removed from address vectors
 * @param removesWithOpsOutstanding removals of a peer that still had unreaped operations (what the
 *     worker's deferred removal must prevent)
 * @param flushedOps operations failed by such a removal ({@link FakeScript#flushOnRemove})
 * @param violations contract violations: every one was also answered with an error (see {@link
 *     #lastViolation()})
 * @param bytesWritten bytes copied into targets by writes
 * @param bytesRead bytes copied out of targets by reads
 * @param opsInFlightAtClose operations still unreaped when their endpoint closed
 * @param endpointsOpened endpoints opened
 * @param progressCalls {@code progress} calls
 * @param resets {@code reset} calls
 * @param opsDiscardedByReset posted operations a reset discarded without moving their bytes
 * @param peerProbes {@code peerGone} calls: how often dma asked whether a peer's endpoint is gone
 * @param lastViolation the text of the latest violation, or the empty string when there was none
 */
public record FakeCounters(
    long postAttempts,
    long posts,
    long writes,
    long reads,
    long againAnswers,
    long postErrors,
    long completions,
    long errorCompletions,
    long cqReadFailures,
    long registrations,
    long registrationFailures,
    long deregistrations,
    long liveRegistrations,
    long registrationsOpenAtClose,
    long exposes,
    long liveExposes,
    long inserts,
    long insertFailures,
    long removes,
    long removesWithOpsOutstanding,
    long flushedOps,
    long violations,
    long bytesWritten,
    long bytesRead,
    long opsInFlightAtClose,
    long endpointsOpened,
    long progressCalls,
    long resets,
    long opsDiscardedByReset,
    long peerProbes,
    String lastViolation) {

  /**
   * Bytes moved in either direction.
   *
   * @return {@link #bytesWritten()} plus {@link #bytesRead()}
   */
  public long bytesCopied() {
    return bytesWritten + bytesRead;
  }
}
