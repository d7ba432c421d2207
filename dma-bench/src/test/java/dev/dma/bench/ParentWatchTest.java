package dev.dma.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayInputStream;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** A child's end of input runs its cleanup, then its end, even when the cleanup throws. */
class ParentWatchTest {
  @Test
  @Timeout(10)
  void cleanupRunsBeforeTheEnd() throws InterruptedException {
    List<String> steps = new CopyOnWriteArrayList<>();
    Thread watcher =
        ParentWatch.start(
            new ByteArrayInputStream(new byte[] {1, 2, 3}),
            () -> steps.add("cleanup"),
            () -> steps.add("end"));
    watcher.join(5_000);
    assertEquals(List.of("cleanup", "end"), steps);
  }

  @Test
  @Timeout(10)
  void aFailingCleanupStillEnds() throws InterruptedException {
    List<String> steps = new CopyOnWriteArrayList<>();
    Thread watcher =
        ParentWatch.start(
            new ByteArrayInputStream(new byte[0]),
            () -> {
              steps.add("cleanup");
              throw new IllegalStateException("stuck endpoint");
            },
            () -> steps.add("end"));
    watcher.join(5_000);
    assertTrue(!watcher.isAlive());
    assertEquals(List.of("cleanup", "end"), steps);
  }
}
