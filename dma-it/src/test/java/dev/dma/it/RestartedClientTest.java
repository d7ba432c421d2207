package dev.dma.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dma.api.Advertisement;
import dev.dma.api.Checksum;
import dev.dma.api.Checksums;
import dev.dma.api.Completion;
import dev.dma.api.DmaConfiguration;
import dev.dma.api.DmaException;
import dev.dma.api.TransferRequest;
import dev.dma.core.FabricService;
import dev.dma.libfabric.ShmNames;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintWriter;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * A client process that restarts while the server still holds its old advertisement, the way it
 * happens in production: the target runs in a child JVM, is served, then ends (its endpoint closed
 * on {@code quit}, or SIGKILLed), and a new child takes its place. A transfer carrying the old
 * advertisement fails {@code PEER_UNREACHABLE}, well before the progress deadline (2 s) and the
 * completion deadline (30 s), on tcp and on shm alike, where the write is posted into the dead
 * peer's queue and would otherwise never complete. The next one fails at once without a post, and
 * the new incarnation is served with its bytes checked by the child itself.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class RestartedClientTest {
  private static final int SIZE = 1 << 20;

  @ParameterizedTest(name = "{0}, the old client {2}")
  @CsvSource({
    "libfabric:shm, -, quits",
    "libfabric:shm, -, is killed",
    "libfabric:shm, -, dies with a write in flight",
    "tcp, 127.0.0.1, quits",
    "tcp, 127.0.0.1, is killed",
    "tcp, 127.0.0.1, dies with a write in flight"
  })
  void aStaleAdvertisementOfARestartedClientFailsPeerUnreachablePromptly(
      String provider, String bind, String ending) throws Exception {
    DmaConfiguration configuration =
        DmaConfiguration.builder()
            .providers(provider)
            .bind(bind.equals("-") ? null : bind)
            .progressDeadline(Duration.ofSeconds(2))
            .completionDeadline(Duration.ofSeconds(30))
            .build();
    Collector<Buffer> completions = new Collector<>();
    long client = 5;
    try (Arena arena = Arena.ofShared();
        FabricService<Buffer> service =
            FabricService.<Buffer>builder(configuration).completer(completions).start();
        Child old = new Child(provider, bind)) {
      MemorySegment local = arena.allocate(SIZE, 4096);
      Patterns.fill(local, 41);
      Advertisement stale = old.hello(service);
      assertTrue(service.submit(write(client, stale, local, 1)));
      assertTrue(completions.take().outcome().isDone());
      assertEquals("crc " + Checksums.crc32c(local), old.ask("crc"));

      Completion<Buffer> failed;
      long tookMs;
      if (ending.startsWith("dies")) {
        // Stopped, it takes the write into its queue (shm) or socket (tcp) and never answers;
        // killed, it never will: on shm the write would stay posted for good.
        old.stop();
        assertTrue(service.submit(write(client, stale, local, 2)));
        Thread.sleep(200);
        assertEquals(1, service.outstanding(), "the write completed while its client was stopped");
        old.kill();
        // Counted from when it is gone: kill() returns once the process was reaped.
        long started = System.nanoTime();
        failed = completions.take();
        tookMs = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - started);
      } else {
        if (ending.equals("quits")) {
          old.quit();
        } else {
          old.kill();
        }
        long started = System.nanoTime();
        assertTrue(service.submit(write(client, stale, local, 2)));
        failed = completions.take();
        tookMs = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - started);
      }
      assertFalse(failed.outcome().isDone(), "a write to a client that is gone succeeded");
      DmaException error = failed.outcome().error();
      assertEquals(DmaException.Reason.PEER_UNREACHABLE, error.reason(), error::toString);
      assertTrue(error.getMessage().startsWith("client 5 at "), error::getMessage);
      assertTrue(error.getMessage().contains(": its endpoint is gone: "), error::getMessage);
      assertTrue(tookMs < 1000, "took " + tookMs + " ms: " + error);

      // The client restarts; its hello is still on the way.
      try (Child restarted = new Child(provider, bind)) {
        Advertisement current = restarted.hello(service);

        assertTrue(service.submit(write(client, stale, local, 3)));
        Completion<Buffer> atOnce = completions.take();
        assertEquals(DmaException.Reason.PEER_UNREACHABLE, atOnce.outcome().error().reason());
        assertEquals(0, atOnce.posts());

        Patterns.fill(local, 42);
        assertTrue(service.submit(write(client, current, local, 4)));
        Completion<Buffer> served = completions.take();
        assertTrue(served.outcome().isDone(), () -> served.outcome().error().toString());
        assertEquals("crc " + Checksums.crc32c(local), restarted.ask("crc"));
        assertEquals(0, service.outstanding());
      }
    }
  }

  private static TransferRequest<Buffer> write(
      long client, Advertisement ad, MemorySegment local, int id) {
    return TransferRequest.write(client, ad, new Buffer(id, local)).withChecksum(Checksum.CRC32C);
  }

  /** One client process ({@link TargetProcess}); closing it ends it, bounded, and cleans up. */
  private static final class Child implements AutoCloseable {
    private final Process process;
    private final BufferedReader out;
    private final PrintWriter in;

    Child(String provider, String bind) throws IOException {
      process = TargetProcess.launch(provider, bind, SIZE);
      out =
          new BufferedReader(
              new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8));
      in = new PrintWriter(process.getOutputStream(), true, StandardCharsets.UTF_8);
    }

    /** Reads its advertisement and has it insert the server, as a client's hello does. */
    Advertisement hello(FabricService<Buffer> service) throws IOException {
      String first = out.readLine();
      assertTrue(first != null && first.startsWith("advertisement "), "child said: " + first);
      in.println("insert " + Advertisement.encodeHex(service.localAddress()));
      assertEquals("inserted", out.readLine());
      return Advertisement.fromFields(List.of(first.substring(14).split(" ")));
    }

    String ask(String line) throws IOException {
      in.println(line);
      return out.readLine();
    }

    void quit() throws InterruptedException {
      in.println("quit");
      assertTrue(process.waitFor(30, TimeUnit.SECONDS), "the client did not quit");
    }

    /** Stops the process, and returns once every one of its threads is stopped (bounded). */
    void stop() throws Exception {
      Process kill = new ProcessBuilder("kill", "-STOP", Long.toString(process.pid())).start();
      assertTrue(kill.waitFor(30, TimeUnit.SECONDS));
      assertEquals(0, kill.exitValue());
      // kill returns once the signal is sent; on a loaded machine a thread of the child can still
      // run for a while, and would serve the write this test means to strand.
      Path tasks = Path.of("/proc", Long.toString(process.pid()), "task");
      long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
      while (!allStopped(tasks)) {
        assertTrue(System.nanoTime() < until, "the client's threads did not stop");
        Thread.sleep(10);
      }
    }

    private static boolean allStopped(Path tasks) throws IOException {
      try (var threads = Files.list(tasks)) {
        for (Path thread : (Iterable<Path>) threads::iterator) {
          String stat = Files.readString(thread.resolve("stat"));
          // The state is the field after the command, which is in parentheses.
          char state = stat.charAt(stat.lastIndexOf(')') + 2);
          if (state != 'T' && state != 't') {
            return false;
          }
        }
      }
      return true;
    }

    void kill() throws InterruptedException {
      process.destroyForcibly();
      assertTrue(process.waitFor(30, TimeUnit.SECONDS), "the client did not die");
    }

    @Override
    public void close() throws IOException {
      try {
        if (process.isAlive()) {
          in.println("quit");
          if (!process.waitFor(30, TimeUnit.SECONDS)) {
            process.destroyForcibly().waitFor(30, TimeUnit.SECONDS);
          }
        }
      } catch (InterruptedException interrupted) {
        process.destroyForcibly();
        Thread.currentThread().interrupt();
      }
      // A killed child leaves its shm files behind: remove exactly its own.
      for (ShmNames.Leftover leftover : ShmNames.leftovers(ShmNames.DEV_SHM)) {
        if (leftover.pid() == process.pid()) {
          Files.deleteIfExists(leftover.file());
        }
      }
    }
  }
}
