package dev.dma.core.internal;

import dev.dma.api.DmaException;
import dev.dma.api.DmaException.Kind;
import dev.dma.api.DmaException.Reason;
import java.time.Duration;
import java.util.function.Function;
import org.jspecify.annotations.Nullable;

/**
 * Every {@link DmaException} the fabric worker builds, one method a reason, so that a reason and
 * its text live in one place. What the worker refuses at intake is {@link Intake}'s (shared with a
 * group's striping); a registration held under {@code max_pinned_bytes} is {@code LocalRegions}'.
 *
 * <p>Called from cold branches only (a refused or failed post, an error completion, a deadline, a
 * reset, shutdown): a success builds nothing here. Threads: the worker thread; the methods keep no
 * state, and the one function held, the endpoint's rendering of a peer address, is pure.
 */
final class Failures {
  /** The text of every transfer that never reached the wire because the worker went away. */
  static final String WORKER_GONE = "fabric worker is gone";

  // The endpoint's rendering of a peer address: one function for the worker's life, so that naming
  // a client allocates no lambda per failure.
  private final Function<byte[], String> peerText;

  /**
   * The factory of one worker.
   *
   * @param peerText the endpoint's rendering of a peer address ({@code FabricEndpoint#peerText})
   */
  Failures(Function<byte[], String> peerText) {
    this.peerText = peerText;
  }

  /** "client 7 at 10.0.0.2:4711": the client and the peer address a failure concerns. */
  String clientText(long clientId, byte[] address) {
    return Intake.clientText(clientId, address, peerText);
  }

  // ------------------------------------------------------------------------- the progress deadline

  /** Why a peer refused with nothing else in flight for the progress deadline is dead, in words. */
  static String refusedWhileIdle(long progressDeadlineNs) {
    return "no post to it was accepted for "
        + DurationFormat.format(Duration.ofNanos(progressDeadlineNs))
        + " with nothing else in flight: its connection could not be set up, or its"
        + " queue stayed full (peer gone, stopped or not accepting)";
  }

  /** Why a peer refused beside other transfers in flight for {@code stallBoundNs} is dead. */
  static String refusedWhileBusy(long stallBoundNs) {
    return "no post to it was accepted for "
        + DurationFormat.format(Duration.ofNanos(stallBoundNs))
        + " while other transfers were in flight: its queue stayed full (peer stopped or not"
        + " progressing)";
  }

  /** An op refused with {@code -FI_EAGAIN} (code {@code code}) past its progress deadline. */
  DmaException progressDeadline(long clientId, byte[] address, String why, int code) {
    return new DmaException(
        Kind.TRANSFER, Reason.DEADLINE, clientText(clientId, address) + ": " + why, -code, 0, null);
  }

  // --------------------------------------------------------------------------- refused posts

  /** What a post that failed outright with {@code code} says, in words. */
  static String postText(String errorText, int code) {
    return "post: " + errorText + " (" + code + ")";
  }

  /** A post that failed outright: {@code text} is {@link #postText}. */
  DmaException postFailed(Reason reason, long clientId, byte[] address, String text, int code) {
    return new DmaException(
        Kind.FABRIC, reason, clientText(clientId, address) + ": " + text, -code, 0, null);
  }

  /** A post that threw something other than a {@link DmaException} (a provider bug). */
  static DmaException postThrew(Throwable thrown) {
    return new DmaException(Kind.FABRIC, Reason.PROVIDER, "post failed: " + thrown, 0, 0, thrown);
  }

  /**
   * A set-up failure (a peer insert, a registration) with the client and peer address it concerns
   * in front, as every transfer's failure names them; one that names them already is kept.
   */
  DmaException namingTheClient(long clientId, byte[] address, DmaException failure) {
    String message = String.valueOf(failure.getMessage());
    if (message.startsWith("client ")) {
      return failure;
    }
    return new DmaException(
        failure.kind(),
        failure.reason(),
        clientText(clientId, address) + ": " + message,
        failure.fabricErrno(),
        failure.providerErrno(),
        failure);
  }

  // ------------------------------------------------------------------------- error completions

  /** The failure an error completion stands for, naming the client and peer address. */
  DmaException completionFailed(
      Reason reason, long clientId, byte[] address, int errno, int providerErrno, String message) {
    return new DmaException(
        Kind.TRANSFER,
        reason,
        clientText(clientId, address) + ": " + message,
        errno,
        providerErrno,
        null);
  }

  /**
   * The failure of an op that passed the completion deadline, or that a client which left took with
   * it.
   *
   * @param why {@link CompletionDeadline#text()} or {@link CompletionDeadline#leftText()}
   */
  DmaException completionDeadline(long clientId, byte[] address, String why) {
    return new DmaException(
        Kind.TRANSFER,
        Reason.DEADLINE,
        clientText(clientId, address) + ": " + why + ": peer unreachable or completion lost",
        0,
        0,
        null);
  }

  // ---------------------------------------------------------------------- gone and dead peers

  /** Why an incarnation whose endpoint is gone is marked unreachable, in words. */
  static String goneText(String evidence) {
    return "its endpoint is gone: " + evidence;
  }

  /**
   * The failure of a transfer whose peer's endpoint is gone (closed, exited, or restarted under a
   * new address): {@link Reason#PEER_UNREACHABLE}, the same on every provider that can tell,
   * whatever the provider reported.
   */
  DmaException gone(long clientId, byte[] address, String evidence, int errno, int providerErrno) {
    return new DmaException(
        Kind.TRANSFER,
        Reason.PEER_UNREACHABLE,
        clientText(clientId, address)
            + ": "
            + goneText(evidence)
            + " (the client closed, exited or restarted): ask it for its current advertisement",
        errno,
        providerErrno,
        null);
  }

  /** What every transfer to a client incarnation marked dead fails with, {@code why} it is. */
  DmaException unreachable(long clientId, byte[] address, String why) {
    return new DmaException(
        Kind.TRANSFER,
        Reason.PEER_UNREACHABLE,
        clientText(clientId, address)
            + " is unreachable ("
            + why
            + "); its transfers fail at once until it is added again (addPeer) or a transfer"
            + " carries a new address for it",
        0,
        0,
        null);
  }

  // ----------------------------------------------------------------------------------- resets

  /** The failure of an op that a reset took and that is not posted again. */
  static DmaException endpointReset(boolean read, int retries, String why) {
    String text =
        read
            ? "the endpoint was reset while this read was posted ("
                + why
                + "), after "
                + retries
                + " retries; submitting it again is safe"
            : "the endpoint was reset while this write was posted ("
                + why
                + "); it may still land, whole or in part, so submit it again only if a late"
                + " landing of these bytes is harmless";
    return new DmaException(Kind.TRANSFER, Reason.ENDPOINT_RESET, text, 0, 0, null);
  }

  // --------------------------------------------------------------------------------- shutdown

  /** A transfer the worker still held when it went away; {@code failure} is why, or null. */
  static DmaException workerGone(@Nullable Throwable failure) {
    return new DmaException(Kind.FABRIC, Reason.CLOSED, WORKER_GONE, 0, 0, failure);
  }

  /** A transfer found in the channel after the worker went away. */
  static DmaException workerGoneBeforeIntake() {
    return DmaException.fabric(Reason.CLOSED, WORKER_GONE);
  }

  /** A transfer posted when the endpoint's close failed with {@code closeFailure}. */
  static DmaException closeFailed(String closeFailure, @Nullable Throwable failure) {
    return new DmaException(
        Kind.FABRIC,
        Reason.PROVIDER,
        "the provider could not be closed while this transfer was posted ("
            + closeFailure
            + "): it may still read or write the operand, so neither reuse nor free"
            + " it",
        0,
        0,
        failure);
  }

  /** A transfer still posted when close(timeout) ran out. */
  static DmaException closeTimedOut() {
    return new DmaException(
        Kind.TRANSFER,
        Reason.CLOSED,
        "the service closed before this transfer completed: the close timeout"
            + " passed with it posted",
        0,
        0,
        null);
  }
}
