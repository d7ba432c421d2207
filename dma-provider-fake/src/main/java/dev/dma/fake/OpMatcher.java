package dev.dma.fake;

import java.util.Arrays;

/**
 * Chooses operations for a {@link FakeScript} rule: which ops fail with a completion error, whose
 * completions are held. Called on the posting thread with the fabric's lock held, so it must be
 * quick and must not block or call back into the fabric from another thread. The factories here are
 * stateless and thread-safe.
 */
@FunctionalInterface
public interface OpMatcher {

  /**
   * Whether the rule applies to this operation.
   *
   * @param op the operation being accepted
   * @return whether it matches
   */
  boolean matches(FakeOp op);

  /**
   * Matches every operation.
   *
   * @return the matcher
   */
  static OpMatcher any() {
    return op -> true;
  }

  /**
   * Matches the operation numbered {@code index} on its fabric ({@link FakeOp#index()}: the first
   * accepted op is 1).
   *
   * @param index the op's number
   * @return the matcher
   */
  static OpMatcher nth(long index) {
    return op -> op.index() == index;
  }

  /**
   * Matches writes ({@code postWrite}).
   *
   * @return the matcher
   */
  static OpMatcher writes() {
    return op -> op.kind() == FakeOp.Kind.WRITE;
  }

  /**
   * Matches reads ({@code postRead}).
   *
   * @return the matcher
   */
  static OpMatcher reads() {
    return op -> op.kind() == FakeOp.Kind.READ;
  }

  /**
   * Matches operations posted with op slot {@code slot}.
   *
   * @param slot the slot
   * @return the matcher
   */
  static OpMatcher slot(int slot) {
    return op -> op.slot() == slot;
  }

  /**
   * Matches operations against the peer with this address.
   *
   * @param address the target endpoint's address (copied)
   * @return the matcher
   */
  static OpMatcher toPeer(byte[] address) {
    byte[] copy = address.clone();
    return op -> Arrays.equals(op.peer(), copy);
  }

  /**
   * Matches operations posted by the endpoint with this address.
   *
   * @param address the initiating endpoint's address (copied)
   * @return the matcher
   */
  static OpMatcher fromInitiator(byte[] address) {
    byte[] copy = address.clone();
    return op -> Arrays.equals(op.initiator(), copy);
  }

  /**
   * Matches operations carrying this remote key.
   *
   * @param remoteKey the key
   * @return the matcher
   */
  static OpMatcher remoteKey(long remoteKey) {
    return op -> op.remoteKey() == remoteKey;
  }

  /**
   * Matches what both this and {@code other} match.
   *
   * @param other the other matcher
   * @return the matcher
   */
  default OpMatcher and(OpMatcher other) {
    return op -> matches(op) && other.matches(op);
  }

  /**
   * Matches what this or {@code other} matches.
   *
   * @param other the other matcher
   * @return the matcher
   */
  default OpMatcher or(OpMatcher other) {
    return op -> matches(op) || other.matches(op);
  }

  /**
   * Matches what this does not.
   *
   * @return the matcher
   */
  default OpMatcher negate() {
    return op -> !matches(op);
  }
}
