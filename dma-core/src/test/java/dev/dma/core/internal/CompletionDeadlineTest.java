package dev.dma.core.internal;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The completion deadline's bookkeeping on its own, at each boundary: when a scan is due, when an
 * op has passed the deadline or the grace after its client left, and when the expired ops still
 * posted call for an endpoint reset. The worker tests reach these through whole transfers; here
 * each edge is one call, so a boundary moved by one nanosecond fails a test.
 */
@Timeout(value = 10, unit = TimeUnit.SECONDS)
class CompletionDeadlineTest {
  private static final long MS = 1_000_000L;

  @Test
  void aScanIsDueASixteenthOfTheDeadlineAfterTheLast() {
    CompletionDeadline deadline = new CompletionDeadline(Duration.ofSeconds(1));
    assertTrue(deadline.scanDue(0, 1), "the first scan is due at once");
    deadline.scanned(0);
    long interval = 1_000 * MS / 16;
    assertFalse(deadline.scanDue(interval - 1, 1), "not before a sixteenth of the deadline");
    assertTrue(deadline.scanDue(interval, 1), "due at a sixteenth of the deadline");
    assertFalse(deadline.scanDue(interval, 0), "never with nothing in flight");
  }

  @Test
  void theScanIntervalIsKeptBetweenOneAndAHundredMilliseconds() {
    CompletionDeadline shortOne = new CompletionDeadline(Duration.ofMillis(8));
    shortOne.scanned(0);
    assertFalse(shortOne.scanDue(MS - 1, 1));
    assertTrue(shortOne.scanDue(MS, 1), "at least 1 ms apart, even for a deadline of 8 ms");
    CompletionDeadline longOne = new CompletionDeadline(Duration.ofSeconds(60));
    longOne.scanned(0);
    assertFalse(longOne.scanDue(100 * MS - 1, 1));
    assertTrue(longOne.scanDue(100 * MS, 1), "at most 100 ms apart, even for a minute");
  }

  @Test
  void noDeadlineNeverScans() {
    CompletionDeadline none = new CompletionDeadline(Duration.ZERO);
    assertFalse(none.scanDue(Long.MAX_VALUE / 2, 64));
    assertFalse(none.scanDue(0, 1));
  }

  @Test
  void anOpHasPassedTheDeadlineExactlyWhenItIsDue() {
    CompletionDeadline deadline = new CompletionDeadline(Duration.ofMillis(300));
    assertFalse(deadline.passed(1_000 + 300 * MS - 1, 1_000));
    assertTrue(deadline.passed(1_000 + 300 * MS, 1_000));
  }

  @Test
  void anOpOfALeftClientIsJudgedAfterTheGraceOrTheShorterDeadline() {
    long posted = 7 * MS;
    CompletionDeadline shortOne = new CompletionDeadline(Duration.ofMillis(200));
    assertFalse(shortOne.leftBehind(posted + 200 * MS - 1, posted));
    assertTrue(shortOne.leftBehind(posted + 200 * MS, posted), "the deadline, when shorter");
    CompletionDeadline longOne = new CompletionDeadline(Duration.ofSeconds(30));
    long grace = CompletionDeadline.LEFT_GRACE_NS;
    assertFalse(longOne.leftBehind(posted + grace - 1, posted));
    assertTrue(
        longOne.leftBehind(posted + grace, posted), "the grace, when the deadline is longer");
    CompletionDeadline none = new CompletionDeadline(Duration.ZERO);
    assertFalse(none.leftBehind(posted + grace - 1, posted));
    assertTrue(none.leftBehind(posted + grace, posted), "the grace, without a deadline");
    assertTrue(longOne.leftText().contains("after the client left"), longOne.leftText());
  }

  @Test
  void withoutAFlushingRemovalAnExpiredOpStillPostedCallsForTheResetAtOnce() {
    CompletionDeadline deadline = new CompletionDeadline(Duration.ofSeconds(1));
    assertNull(deadline.resetReason(0, false), "nothing expired");
    assertFalse(deadline.recovering());
    deadline.expired();
    assertTrue(deadline.recovering());
    assertEquals("a transfer passed the completion deadline", deadline.resetReason(0, false));
    deadline.endpointReset();
    assertFalse(deadline.recovering(), "the reset discarded it");
    assertNull(deadline.resetReason(0, false));
  }

  @Test
  void aFlushingRemovalGetsItsGraceFromTheFirstScanThatFoundAnOpExpired() {
    CompletionDeadline deadline = new CompletionDeadline(Duration.ofSeconds(1));
    long grace = CompletionDeadline.FLUSH_GRACE_NS;
    deadline.expired();
    assertNull(deadline.resetReason(5, true), "the first scan arms the grace");
    deadline.expired(); // a later expiry does not push the grace back
    assertNull(deadline.resetReason(5 + grace - 1, true));
    String reason = deadline.resetReason(5 + grace, true);
    assertNotNull(reason, "the grace ended");
    assertEquals("a flushed transfer's completion did not come", reason);
  }

  @Test
  void theExpiredCountFallsWithEachReapedOpAndDisarmsTheGraceAtZero() {
    CompletionDeadline deadline = new CompletionDeadline(Duration.ofSeconds(1));
    long grace = CompletionDeadline.FLUSH_GRACE_NS;
    deadline.expired();
    deadline.expired();
    assertNull(deadline.resetReason(0, true));
    deadline.expiredReaped();
    assertTrue(deadline.recovering(), "one of two is still posted");
    assertNotNull(deadline.resetReason(grace, true), "the grace still runs for the other");
    deadline.expiredReaped();
    assertFalse(deadline.recovering(), "both left their slots");
    assertNull(deadline.resetReason(grace, true));
    // The next expiry arms a new grace from its own scan, not the old one.
    deadline.expired();
    assertNull(deadline.resetReason(10 * grace, true), "a new grace is armed");
    assertNull(deadline.resetReason(11 * grace - 1, true));
    assertNotNull(deadline.resetReason(11 * grace, true));
    // Reaping more than expired never counts below zero.
    deadline.expiredReaped();
    deadline.expiredReaped();
    assertFalse(deadline.recovering());
    deadline.expired();
    assertTrue(deadline.recovering(), "one expiry after an extra reap is still counted");
  }

  @Test
  void theDeadlineInWords() {
    assertEquals(
        "no completion within the completion deadline of 1.5s",
        new CompletionDeadline(Duration.ofMillis(1_500)).text());
  }
}
