package dev.dma.fake.core;

import static org.junit.jupiter.api.Assertions.assertNotNull;

import dev.dma.api.BatchCompleter;
import dev.dma.api.Completion;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

/** A completion hook recording every completion, batch sizes and delivering threads. */
final class Recorder<T> implements BatchCompleter<T> {
  final LinkedBlockingQueue<Completion<T>> queue = new LinkedBlockingQueue<>();
  final List<Integer> batchSizes = new CopyOnWriteArrayList<>();
  final List<String> threads = new CopyOnWriteArrayList<>();

  @Override
  public void complete(List<Completion<T>> batch) {
    batchSizes.add(batch.size());
    threads.add(Thread.currentThread().getName());
    queue.addAll(batch);
  }

  // The stepped worker whose completions this records, or null when a worker thread delivers them.
  private SteppedWorker<?> stepper;

  /**
   * Makes {@link #take} and {@link #poll} step {@code worker} on the calling thread instead of
   * waiting for a worker thread.
   */
  Recorder<T> steppedBy(SteppedWorker<?> worker) {
    stepper = worker;
    return this;
  }

  Completion<T> take() throws InterruptedException {
    if (stepper == null) {
      Completion<T> completion = queue.poll(30, TimeUnit.SECONDS);
      assertNotNull(completion, "no completion within 30 s");
      return completion;
    }
    // Stepped: each pass may finish it (a checksummed one is completed on a pool thread).
    long deadline = System.nanoTime() + SteppedWorker.MAX_WAIT_NS;
    for (long pass = 0; ; pass++) {
      Completion<T> completion = queue.poll();
      if (completion != null) {
        return completion;
      }
      if (System.nanoTime() - deadline > 0) {
        throw new AssertionError("no completion after " + pass + " worker passes");
      }
      stepper.step();
    }
  }

  List<Completion<T>> take(int count) throws InterruptedException {
    List<Completion<T>> taken = new ArrayList<>();
    for (int i = 0; i < count; i++) {
      taken.add(take());
    }
    return taken;
  }

  /**
   * A completion that arrives within {@code millis}, or null. Stepped, the worker first steps
   * {@link SteppedWorker#QUIET_PASSES} passes (everything due at the current time), then the wait
   * is for pool threads only.
   */
  Completion<T> poll(long millis) throws InterruptedException {
    if (stepper != null) {
      Completion<T> completion = queue.poll();
      if (completion != null) {
        return completion;
      }
      stepper.stepQuietly();
    }
    return queue.poll(millis, TimeUnit.MILLISECONDS);
  }
}
