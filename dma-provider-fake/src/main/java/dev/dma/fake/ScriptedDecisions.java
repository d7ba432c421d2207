package dev.dma.fake;

import dev.dma.api.DmaException;
import java.nio.ByteBuffer;
import java.util.List;
import org.jspecify.annotations.Nullable;

/**
 * What the fabric's {@link FakeScript} decides for one call of one {@link FakeEndpoint} that passed
 * validation: whether an address-vector insert fails, whether a post is refused ({@code -errno}) or
 * answered {@code -FI_EAGAIN}, which rules hold, lose or fail an accepted op, and whether a reap's
 * completion-queue read fails. {@link FakeScript} keeps the settings and their setters; this class
 * is where they are read and consumed (a count of scripted failures goes down, a rule matched
 * {@code n} times is dropped), so a new kind of scripted answer changes these two files only.
 *
 * <p>Threads: one per endpoint, called only by it, on whichever thread called into the endpoint,
 * with the fabric's lock held (which guards the script). The verdict of {@link #judge} is left in
 * {@link #hold}, {@link #lose} and {@link #fault}, read by the same call right after, so a post
 * allocates nothing here unless the script has op rules.
 */
final class ScriptedDecisions {
  private final FakeScript script;
  // The initiator's own address, for the FakeOp a matcher sees.
  private final byte[] initiator;

  /** Whether the op {@link #judge} saw last is held until a test releases it. */
  boolean hold;

  /** Whether the op {@link #judge} saw last never completes. */
  boolean lose;

  /** The rule that fails the op {@link #judge} saw last, or null. */
  FakeScript.@Nullable Rule fault;

  ScriptedDecisions(FakeScript script, byte[] initiator) {
    this.script = script;
    this.initiator = initiator;
  }

  /**
   * The scripted failure of an {@code fi_av_insert} now, consuming one, or null.
   *
   * @return the exception {@code insertPeer} throws: {@code fi_av_insert: <text> (-errno)}
   */
  @Nullable DmaException insertFailure() {
    if (script.insertFailures <= 0) {
      return null;
    }
    script.insertFailures--;
    int errno = script.insertErrno;
    return new DmaException(
        DmaException.Kind.FABRIC,
        FiErrno.callMessage("fi_av_insert", errno),
        errno,
        DmaException.UNKNOWN_ERRNO,
        null);
  }

  /**
   * The errno a post to {@code peer} that passed validation fails with now, or 0: {@link
   * FakeScript#failPostsTo} first, then the next of {@link FakeScript#failNextPosts} (consumed).
   */
  int postFailure(byte[] peer) {
    if (!script.postFailuresByPeer.isEmpty()) {
      Integer errno = script.postFailuresByPeer.get(ByteBuffer.wrap(peer));
      if (errno != null) {
        return errno;
      }
    }
    if (script.postFailures > 0) {
      script.postFailures--;
      return script.postFailureErrno;
    }
    return 0;
  }

  /**
   * Whether a post that was not refused, to a peer an endpoint had when it was inserted, answers
   * {@code -FI_EAGAIN} now, checked in this order: the target closed or is scripted unreachable;
   * {@code maxTx} ops are unreaped; {@link FakeScript#againWhile} holds; one of {@link
   * FakeScript#againTimes} is left (consumed only when nothing before it answered). A peer no
   * endpoint had is unreachable for ever; the endpoint answers that before asking.
   *
   * @param target the endpoint at the peer's address when it was inserted
   * @param inFlight the initiator's unreaped ops
   */
  boolean again(FakeEndpoint target, int inFlight) {
    return target.isClosedUnlocked()
        || (!script.unreachable.isEmpty()
            && script.unreachable.contains(ByteBuffer.wrap(target.addressUnsafe())))
        || (script.maxTxEnforced > 0 && inFlight >= script.maxTxEnforced)
        || againNow();
  }

  private boolean againNow() {
    if (script.againWhile != null && script.againWhile.getAsBoolean()) {
      return true;
    }
    if (script.againTimes > 0) {
      script.againTimes--;
      return true;
    }
    return false;
  }

  /**
   * Runs the hold, lose and fault rules over an op about to be accepted, leaving the verdict in
   * {@link #hold}, {@link #lose} and {@link #fault}. Called before the slot changes, so a matcher
   * that throws leaves no half-posted op. Builds the {@link FakeOp} a matcher sees only when there
   * are rules.
   */
  void judge(
      long index,
      boolean write,
      int slot,
      byte[] peerAddress,
      long peer,
      long localAddress,
      long lengthBytes,
      long remoteAddress,
      long remoteKey) {
    hold = false;
    lose = false;
    fault = null;
    if (script.holdRules.isEmpty() && script.failRules.isEmpty() && script.loseRules.isEmpty()) {
      return;
    }
    FakeOp op =
        new FakeOp(
            index,
            write ? FakeOp.Kind.WRITE : FakeOp.Kind.READ,
            slot,
            initiator.clone(),
            peerAddress.clone(),
            peer,
            localAddress,
            lengthBytes,
            remoteAddress,
            remoteKey);
    hold = match(script.holdRules, op) != null;
    lose = match(script.loseRules, op) != null;
    fault = match(script.failRules, op);
  }

  /** The scripted failure of this reap's completion-queue read, consuming it, or null. */
  FakeScript.@Nullable CqFailure reapFailure() {
    return script.cqFailures.poll();
  }

  private static FakeScript.@Nullable Rule match(List<FakeScript.Rule> rules, FakeOp op) {
    for (int i = 0; i < rules.size(); i++) {
      FakeScript.Rule rule = rules.get(i);
      if (rule.matcher.matches(op)) {
        if (rule.remaining != Long.MAX_VALUE && --rule.remaining == 0) {
          rules.remove(i);
        }
        return rule;
      }
    }
    return null;
  }
}
