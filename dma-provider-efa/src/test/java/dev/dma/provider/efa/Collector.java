package dev.dma.provider.efa;

import static org.junit.jupiter.api.Assertions.assertNotNull;

import dev.dma.api.BatchCompleter;
import dev.dma.api.Completion;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

/** A completion hook that queues every completion for the test thread to take. */
final class Collector<T> implements BatchCompleter<T> {
  private final LinkedBlockingQueue<Completion<T>> queue = new LinkedBlockingQueue<>();

  @Override
  public void complete(List<Completion<T>> batch) {
    queue.addAll(batch);
  }

  Completion<T> take() throws InterruptedException {
    Completion<T> completion = queue.poll(60, TimeUnit.SECONDS);
    assertNotNull(completion, "no completion within 60 s");
    return completion;
  }

  List<Completion<T>> take(int count) throws InterruptedException {
    List<Completion<T>> taken = new ArrayList<>(count);
    for (int i = 0; i < count; i++) {
      taken.add(take());
    }
    return taken;
  }
}
