package dev.dma.core.internal;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dma.api.DmaException;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

class ReplyTest {
  @Test
  void anAnswerArrives() throws Exception {
    Reply<Integer> reply = new Reply<>();
    Thread sender = Thread.ofPlatform().start(() -> reply.send(7));
    assertEquals(7, reply.await("abandoned"));
    assertTrue(sender.join(Duration.ofSeconds(10)), "the sender did not finish");
  }

  @Test
  void anAnswerArrivesOutOfOrder() throws Exception {
    Reply<Integer> reply = new Reply<>();
    CompletableFuture<Integer> answer = new CompletableFuture<>();
    Thread waiter = Thread.ofPlatform().start(() -> answer.complete(reply.await("abandoned")));
    // The waiter blocks first (parked in wait(), not merely started); only then does the answer
    // come.
    awaitWaiting(waiter);
    assertFalse(answer.isDone());
    reply.send(7);
    assertEquals(7, answer.get(10, TimeUnit.SECONDS));
    waiter.join(10_000);
    assertFalse(waiter.isAlive(), "the waiter did not finish after its answer");
  }

  /** Bounded: until {@code thread} is blocked in {@code Object.wait()}, at most 10 s. */
  private static void awaitWaiting(Thread thread) {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
    while (thread.getState() != Thread.State.WAITING) {
      assertTrue(thread.isAlive(), "the waiter ended without blocking");
      assertTrue(System.nanoTime() < deadline, "the waiter did not block within 10 s");
      Thread.onSpinWait();
    }
  }

  @Test
  void anAbandonedAnswerWakesTheCallerWithTheGivenText() throws Exception {
    Reply<Integer> reply = new Reply<>();
    CompletableFuture<DmaException> waiter =
        CompletableFuture.supplyAsync(
            () -> assertThrows(DmaException.class, () -> reply.await("worker died first")));
    reply.abandon();
    DmaException error = waiter.get(10, TimeUnit.SECONDS);
    assertEquals("worker died first", error.getMessage());
    assertEquals(DmaException.Kind.FABRIC, error.kind());
  }

  @Test
  void aFailureOrAnAbandonWakesAWaiterAlreadyBlocked() throws Exception {
    for (boolean abandon : new boolean[] {false, true}) {
      Reply<Integer> reply = new Reply<>();
      CompletableFuture<DmaException> thrown = new CompletableFuture<>();
      Thread waiter =
          Thread.ofPlatform()
              .daemon()
              .start(
                  () -> {
                    try {
                      reply.await("abandoned");
                    } catch (DmaException e) {
                      thrown.complete(e);
                    }
                  });
      awaitWaiting(waiter); // blocked before the answer: only its notify can wake it
      if (abandon) {
        reply.abandon();
      } else {
        reply.fail(DmaException.fabric("failed"));
      }
      DmaException error = thrown.get(10, TimeUnit.SECONDS);
      assertEquals(abandon ? "abandoned" : "failed", error.getMessage());
      assertTrue(waiter.join(Duration.ofSeconds(10)));
    }
  }

  @Test
  void aFailureIsThrownToTheWaiterAndOnlyTheFirstAnswerCounts() {
    Reply<Integer> reply = new Reply<>();
    DmaException failure = DmaException.fabric("no");
    reply.fail(failure);
    reply.send(1);
    reply.abandon();
    assertSame(failure, assertThrows(DmaException.class, () -> reply.await("x")));
  }

  @Test
  void anInterruptDoesNotLoseTheAnswer() throws Exception {
    Reply<Integer> reply = new Reply<>();
    CompletableFuture<Boolean> interruptedAfter = new CompletableFuture<>();
    Thread waiter =
        Thread.ofPlatform()
            .start(
                () -> {
                  assertEquals(5, reply.await("x"));
                  interruptedAfter.complete(Thread.currentThread().isInterrupted());
                });
    // Interrupted while it waits, then answered: the answer and the interrupt both reach it. The
    // answer comes only once await has taken the interrupt (wait() threw, clearing the flag) and
    // waits again, so the interrupt must be kept by await itself.
    awaitWaiting(waiter);
    waiter.interrupt();
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
    while (waiter.isInterrupted() || waiter.getState() != Thread.State.WAITING) {
      assertTrue(System.nanoTime() < deadline, "the waiter did not wait again within 10 s");
      Thread.onSpinWait();
    }
    reply.send(5);
    assertTrue(interruptedAfter.get(10, TimeUnit.SECONDS));
  }
}
