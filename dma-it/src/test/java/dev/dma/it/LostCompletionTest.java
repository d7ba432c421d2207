package dev.dma.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dma.api.Advertisement;
import dev.dma.api.Checksum;
import dev.dma.api.Checksums;
import dev.dma.api.Completion;
import dev.dma.api.Direction;
import dev.dma.api.DmaConfiguration;
import dev.dma.api.DmaException;
import dev.dma.api.TransferRequest;
import dev.dma.core.FabricService;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintWriter;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * Writes that a provider never completes, against an independent target process: on shm and
 * udp;ofi_rxd a write with a wrong remote key or to an address outside every region (0 where
 * regions are addressed virtually) gets no completion at all (measured; a plain C initiator sees
 * the same). Each must fail by the completion deadline, only after the endpoint reset made its
 * operand safe, and the service must keep serving the same target once the application adds the
 * peer again.
 */
class LostCompletionTest {
  private static final int SIZE = 1 << 20;
  private static final Duration DEADLINE = Duration.ofSeconds(1);

  /** The deadline is checked every deadline/16; the reset and the re-post take milliseconds. */
  private static final long FAIL_WITHIN_MS = DEADLINE.toMillis() + 2_000;

  @ParameterizedTest(name = "{0} {1}")
  @CsvSource({
    "libfabric:shm, -, wrong-key",
    "libfabric:shm, -, bad-address",
    "libfabric:udp;ofi_rxd, 127.0.0.1, wrong-key",
    "libfabric:udp;ofi_rxd, 127.0.0.1, bad-address"
  })
  @Timeout(value = 60, unit = TimeUnit.SECONDS)
  void aWriteThatNeverCompletesFailsByTheDeadlineAndTheServiceKeepsServing(
      String provider, String bind, String fault) throws Exception {
    Process child = TargetProcess.launch(provider, bind, SIZE);
    DmaConfiguration.Builder builder =
        DmaConfiguration.builder()
            .providers(provider)
            .completionDeadline(DEADLINE)
            .progressDeadline(Duration.ofMillis(500))
            .closeTimeout(Duration.ofSeconds(2));
    if (!bind.equals("-")) {
      builder.bind(bind);
    }
    Collector<Buffer> completions = new Collector<>();
    try (Arena arena = Arena.ofShared();
        FabricService<Buffer> service =
            FabricService.<Buffer>builder(builder.build()).completer(completions).start();
        BufferedReader out =
            new BufferedReader(
                new InputStreamReader(child.getInputStream(), StandardCharsets.UTF_8));
        PrintWriter in = new PrintWriter(child.getOutputStream(), true, StandardCharsets.UTF_8)) {
      String first = readLine(out);
      assertTrue(first.startsWith("advertisement "), "child said: " + first);
      Advertisement ad = Advertisement.fromFields(List.of(first.substring(14).split(" ")));
      in.println("insert " + Advertisement.encodeHex(service.localAddress()));
      assertEquals("inserted", readLine(out));

      MemorySegment local = arena.allocate(64 << 10, 4096);
      writeAndCheck(service, completions, ad, local, 11, in, out);

      // The bad write: the same peer, a key or an address the target never registered. Where
      // the provider addresses regions by offset (udp;ofi_rxd: the advertised address is 0),
      // address 0 is the region's first byte, so the bad address is one far past its end.
      long badAddress = ad.remoteAddress() == 0 ? 16L * SIZE : 0;
      Advertisement bad =
          fault.equals("wrong-key")
              ? new Advertisement(ad.address(), ad.remoteKey() + 7919, ad.remoteAddress())
              : new Advertisement(ad.address(), ad.remoteKey(), badAddress);
      long started = System.nanoTime();
      assertTrue(service.submit(TransferRequest.write(1, bad, new Buffer(99, local))));
      Completion<Buffer> failed = completions.take();
      long tookMs = (System.nanoTime() - started) / 1_000_000;
      assertFalse(failed.outcome().isDone(), "the bad write succeeded");
      DmaException error = failed.outcome().error();
      // Either the provider did report it, or the deadline did; never a hang.
      assertTrue(tookMs <= FAIL_WITHIN_MS, "failed after " + tookMs + " ms: " + error);
      if (error.reason() == DmaException.Reason.DEADLINE) {
        assertTrue(error.getMessage().contains("client 1"), error.getMessage());
      }
      System.out.println(
          "LostCompletionTest "
              + provider
              + " "
              + fault
              + ": "
              + error.reason()
              + " after "
              + tookMs
              + " ms: "
              + error.getMessage());

      // The service keeps serving the same target once the application adds the peer again.
      service.addPeer(1, ad.address());
      writeAndCheck(service, completions, ad, local, 12, in, out);
      assertEquals(0, service.outstanding());
      in.println("quit");
    } finally {
      if (!child.waitFor(30, TimeUnit.SECONDS)) {
        child.destroyForcibly();
      }
    }
  }

  private static void writeAndCheck(
      FabricService<Buffer> service,
      Collector<Buffer> completions,
      Advertisement ad,
      MemorySegment local,
      long seed,
      PrintWriter in,
      BufferedReader out)
      throws Exception {
    in.println("fill 0");
    assertTrue(readLine(out).startsWith("filled "));
    Patterns.fill(local, seed);
    assertTrue(
        service.submit(
            TransferRequest.write(1, ad, new Buffer((int) seed, local))
                .withChecksum(Checksum.CRC32C)));
    Completion<Buffer> written = completions.take();
    assertTrue(written.outcome().isDone(), () -> "good write failed: " + written.outcome().error());
    int expected = Checksums.crc32c(local);
    assertEquals(expected, written.outcome().done().checksum().orElseThrow());
    // The target's own bytes: its first 64 KiB, then the rest of what fill 0 left.
    in.println("crc");
    String crc = readLine(out);
    MemorySegment whole = Arena.ofAuto().allocate(SIZE);
    Patterns.fill(whole, 0);
    MemorySegment.copy(local, 0, whole, 0, local.byteSize());
    assertEquals("crc " + Checksums.crc32c(whole), crc, "the target's bytes");
  }

  /**
   * shm checks neither keys nor bounds, so a write straddling the end of the target's buffer would
   * land past it: the advertised length (the advertisement's fourth field) refuses it before
   * anything is posted.
   */
  @org.junit.jupiter.api.Test
  @Timeout(value = 60, unit = TimeUnit.SECONDS)
  void aWritePastTheAdvertisedEndIsRefusedBeforePostingOnShm() throws Exception {
    Process child = TargetProcess.launch("libfabric:shm", "-", SIZE);
    Collector<Buffer> completions = new Collector<>();
    try (Arena arena = Arena.ofShared();
        FabricService<Buffer> service =
            FabricService.<Buffer>builder(
                    DmaConfiguration.builder().providers("libfabric:shm").build())
                .completer(completions)
                .start();
        BufferedReader out =
            new BufferedReader(
                new InputStreamReader(child.getInputStream(), StandardCharsets.UTF_8));
        PrintWriter in = new PrintWriter(child.getOutputStream(), true, StandardCharsets.UTF_8)) {
      String first = readLine(out);
      Advertisement ad = Advertisement.fromFields(List.of(first.substring(14).split(" ")));
      assertEquals(SIZE, ad.lengthBytes(), "the target advertised its length");
      MemorySegment local = arena.allocate(4096, 4096);
      TransferRequest<Buffer> straddling =
          TransferRequest.builder(new Buffer(1, local))
              .clientId(1)
              .advertisement(ad)
              .remoteAddress(ad.remoteAddress() + SIZE - 100)
              .direction(Direction.TO_PEER)
              .build();
      assertTrue(service.submit(straddling));
      Completion<Buffer> refused = completions.take();
      assertFalse(refused.outcome().isDone());
      assertEquals(DmaException.Reason.BAD_REQUEST, refused.outcome().error().reason());
      in.println("quit");
    } finally {
      if (!child.waitFor(30, TimeUnit.SECONDS)) {
        child.destroyForcibly();
      }
    }
  }

  /** One line from the child, within 20 s. */
  private static String readLine(BufferedReader out) throws Exception {
    String line =
        CompletableFuture.supplyAsync(
                () -> {
                  try {
                    return out.readLine();
                  } catch (java.io.IOException e) {
                    throw new java.io.UncheckedIOException(e);
                  }
                })
            .get(20, TimeUnit.SECONDS);
    assertNotNull(line, "the target process exited");
    return line;
  }
}
