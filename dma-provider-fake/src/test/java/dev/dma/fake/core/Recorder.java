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

  Completion<T> take() throws InterruptedException {
    Completion<T> completion = queue.poll(30, TimeUnit.SECONDS);
    assertNotNull(completion, "no completion within 30 s");
    return completion;
  }

  List<Completion<T>> take(int count) throws InterruptedException {
    List<Completion<T>> taken = new ArrayList<>();
    for (int i = 0; i < count; i++) {
      taken.add(take());
    }
    return taken;
  }

  Completion<T> poll(long millis) throws InterruptedException {
    return queue.poll(millis, TimeUnit.MILLISECONDS);
  }
}
