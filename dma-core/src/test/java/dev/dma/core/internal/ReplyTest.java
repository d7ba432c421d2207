package dev.dma.core.internal;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dma.api.DmaException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

class ReplyTest {
  @Test
  void anAnswerArrives() throws Exception {
    Reply<Integer> reply = new Reply<>();
    Thread sender = Thread.ofPlatform().start(() -> reply.send(7));
    assertEquals(7, reply.await("abandoned"));
    sender.join();
  }

  @Test
  void anAnswerArrivesOutOfOrder() throws Exception {
    Reply<Integer> reply = new Reply<>();
    CompletableFuture<Integer> waiter =
        CompletableFuture.supplyAsync(() -> reply.await("abandoned"));
    // The waiter blocks first; only then does the answer come.
    while (!waiterBlocked(waiter)) {
      Thread.onSpinWait();
    }
    reply.send(7);
    assertEquals(7, waiter.get(10, TimeUnit.SECONDS));
  }

  private static boolean waiterBlocked(CompletableFuture<Integer> waiter) throws Exception {
    Thread.sleep(10);
    return !waiter.isDone();
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
    waiter.interrupt();
    Thread.sleep(20);
    reply.send(5);
    assertTrue(interruptedAfter.get(10, TimeUnit.SECONDS));
  }
}
