package dev.dma.core.internal;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

/**
 * The stuck worker's backoff: spins, then yields, then parks; any progress starts it over; and the
 * worker's idle decision ({@link Idle}) drives it.
 */
class BackoffTest {
  @Test
  void spinsAndYieldsBeforeItParksAndProgressStartsItOver() {
    WorkerChannel channel = new WorkerChannel(16);
    channel.bind(Thread.currentThread());
    Backoff backoff = new Backoff(channel);
    for (int pass = 0; pass < Backoff.SPINS + Backoff.YIELDS; pass++) {
      assertFalse(backoff.idle(), "parked at idle pass " + pass);
    }
    assertTrue(backoff.parking());
    long started = System.nanoTime();
    int parks = 0;
    while (System.nanoTime() - started < 50_000_000L) {
      assertTrue(backoff.idle());
      parks++;
    }
    // Parks grow to MAX_PARK_NS: 50 ms of them is tens of passes, not the millions a spin makes.
    assertTrue(parks < 5_000, parks + " parks in 50 ms");
    backoff.reset();
    assertFalse(backoff.parking());
    assertFalse(backoff.idle());
  }

  @Test
  void thePassDecisionDrivesIt() {
    WorkerChannel channel = new WorkerChannel(16);
    channel.bind(Thread.currentThread());
    Backoff backoff = new Backoff(channel);
    for (int pass = 0; pass < Backoff.SPINS + Backoff.YIELDS; pass++) {
      assertFalse(backoff.after(Idle.BACK_OFF), "parked at idle pass " + pass);
    }
    assertTrue(backoff.parking(), "BACK_OFF passes lead to parking");
    assertTrue(backoff.after(Idle.BACK_OFF), "a parking pass says it parked");
    // Something moved: the next idle pass spins again, and says it did not park.
    assertFalse(backoff.after(Idle.CONTINUE));
    assertFalse(backoff.parking());
    // Nothing outstanding: a message already queued means the park does not block, and the
    // backoff starts over too.
    for (int pass = 0; pass < Backoff.SPINS + Backoff.YIELDS; pass++) {
      backoff.after(Idle.BACK_OFF);
    }
    assertTrue(channel.offer("message"));
    assertFalse(backoff.after(Idle.PARK), "blocked with a message queued");
    assertFalse(backoff.parking());
  }

  @Test
  void aMessageEndsAParkEarly() {
    WorkerChannel channel = new WorkerChannel(16);
    channel.bind(Thread.currentThread());
    assertTrue(channel.offer("message"));
    long started = System.nanoTime();
    channel.parkNanos(5_000_000_000L);
    assertTrue(System.nanoTime() - started < 1_000_000_000L, "parked despite a queued message");
  }
}
