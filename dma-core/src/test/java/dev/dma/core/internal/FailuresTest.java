package dev.dma.core.internal;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;

import dev.dma.api.DmaException;
import dev.dma.api.DmaException.Kind;
import dev.dma.api.DmaException.Reason;
import java.time.Duration;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Every failure the worker builds, text for text: users match on these messages, so each is pinned
 * here byte for byte, with its kind, reason and errnos, in the one place that builds it ({@link
 * Failures}).
 */
@Timeout(10)
class FailuresTest {
  private static final byte[] ADDRESS = {1, 2, 3};
  private final Failures failures = new Failures(address -> "peer-" + address.length);

  private static void assertFailure(
      DmaException error, Kind kind, Reason reason, String message, int errno, int providerErrno) {
    assertEquals(kind, error.kind(), error::toString);
    assertEquals(reason, error.reason(), error::toString);
    assertEquals(message, error.getMessage());
    assertEquals(errno, error.fabricErrno(), error::toString);
    assertEquals(providerErrno, error.providerErrno(), error::toString);
  }

  @Test
  void theClientIsNamedByItsIdAndTheEndpointsRenderingOfItsAddress() {
    assertEquals("client 7 at peer-3", failures.clientText(7, ADDRESS));
    Failures malformed =
        new Failures(
            address -> {
              throw new IllegalArgumentException("not an address");
            });
    assertEquals("client 7 at 010203", malformed.clientText(7, ADDRESS));
  }

  @Test
  void theProgressDeadline() {
    assertEquals(
        "no post to it was accepted for 1s with nothing else in flight: its connection could not"
            + " be set up, or its queue stayed full (peer gone, stopped or not accepting)",
        Failures.refusedWhileIdle(1_000_000_000L));
    assertEquals(
        "no post to it was accepted for 30s while other transfers were in flight: its queue stayed"
            + " full (peer stopped or not progressing)",
        Failures.refusedWhileBusy(30_000_000_000L));
    assertFailure(
        failures.progressDeadline(7, ADDRESS, "why", -11),
        Kind.TRANSFER,
        Reason.DEADLINE,
        "client 7 at peer-3: why",
        11,
        0);
  }

  @Test
  void refusedPosts() {
    String text = Failures.postText("Invalid argument", -22);
    assertEquals("post: Invalid argument (-22)", text);
    assertFailure(
        failures.postFailed(Reason.BAD_REQUEST, 7, ADDRESS, text, -22),
        Kind.FABRIC,
        Reason.BAD_REQUEST,
        "client 7 at peer-3: post: Invalid argument (-22)",
        22,
        0);
    IllegalStateException bug = new IllegalStateException("provider bug");
    DmaException threw = Failures.postThrew(bug);
    assertFailure(
        threw,
        Kind.FABRIC,
        Reason.PROVIDER,
        "post failed: java.lang.IllegalStateException: provider bug",
        0,
        0);
    assertSame(bug, threw.getCause());
  }

  @Test
  void aSetUpFailureGetsTheClientInFrontOnce() {
    DmaException insert =
        new DmaException(Kind.FABRIC, Reason.PEER_UNREACHABLE, "fi_av_insert: no", 5, 3, null);
    DmaException named = failures.namingTheClient(7, ADDRESS, insert);
    assertFailure(
        named, Kind.FABRIC, Reason.PEER_UNREACHABLE, "client 7 at peer-3: fi_av_insert: no", 5, 3);
    assertSame(insert, named.getCause());
    assertSame(named, failures.namingTheClient(7, ADDRESS, named));
  }

  @Test
  void errorCompletionsAndTheCompletionDeadline() {
    assertFailure(
        failures.completionFailed(Reason.ACCESS_DENIED, 7, ADDRESS, 13, -13, "key rejected"),
        Kind.TRANSFER,
        Reason.ACCESS_DENIED,
        "client 7 at peer-3: key rejected",
        13,
        -13);
    CompletionDeadline deadline = new CompletionDeadline(Duration.ofSeconds(2));
    assertEquals("no completion within the completion deadline of 2s", deadline.text());
    assertEquals(
        "no completion within 1s after the client left (removePeer or a new address) with it"
            + " posted",
        deadline.leftText());
    assertFailure(
        failures.completionDeadline(7, ADDRESS, deadline.text()),
        Kind.TRANSFER,
        Reason.DEADLINE,
        "client 7 at peer-3: no completion within the completion deadline of 2s: peer unreachable"
            + " or completion lost",
        0,
        0);
  }

  @Test
  void goneAndDeadPeers() {
    assertEquals("its endpoint is gone: closed", Failures.goneText("closed"));
    assertFailure(
        failures.gone(7, ADDRESS, "closed", 107, 32),
        Kind.TRANSFER,
        Reason.PEER_UNREACHABLE,
        "client 7 at peer-3: its endpoint is gone: closed (the client closed, exited or"
            + " restarted): ask it for its current advertisement",
        107,
        32);
    assertFailure(
        failures.unreachable(7, ADDRESS, "why"),
        Kind.TRANSFER,
        Reason.PEER_UNREACHABLE,
        "client 7 at peer-3 is unreachable (why); its transfers fail at once until it is added"
            + " again (addPeer) or a transfer carries a new address for it",
        0,
        0);
  }

  @Test
  void resets() {
    assertFailure(
        Failures.endpointReset(true, 2, "why"),
        Kind.TRANSFER,
        Reason.ENDPOINT_RESET,
        "the endpoint was reset while this read was posted (why), after 2 retries; submitting it"
            + " again is safe",
        0,
        0);
    assertFailure(
        Failures.endpointReset(false, 0, "why"),
        Kind.TRANSFER,
        Reason.ENDPOINT_RESET,
        "the endpoint was reset while this write was posted (why); it may still land, whole or in"
            + " part, so submit it again only if a late landing of these bytes is harmless",
        0,
        0);
  }

  @Test
  void shutdown() {
    Error died = new StackOverflowError("died");
    DmaException gone = Failures.workerGone(died);
    assertFailure(gone, Kind.FABRIC, Reason.CLOSED, "fabric worker is gone", 0, 0);
    assertSame(died, gone.getCause());
    assertEquals("fabric worker is gone", FabricWorker.WORKER_GONE);
    assertEquals(
        DmaException.fabric(Reason.CLOSED, "fabric worker is gone").toString(),
        Failures.workerGoneBeforeIntake().toString());
    assertFailure(
        Failures.closeFailed("busy", null),
        Kind.FABRIC,
        Reason.PROVIDER,
        "the provider could not be closed while this transfer was posted (busy): it may still read"
            + " or write the operand, so neither reuse nor free it",
        0,
        0);
    assertFailure(
        Failures.closeTimedOut(),
        Kind.TRANSFER,
        Reason.CLOSED,
        "the service closed before this transfer completed: the close timeout passed with it"
            + " posted",
        0,
        0);
  }
}
