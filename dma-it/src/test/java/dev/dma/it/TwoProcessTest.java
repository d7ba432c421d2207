package dev.dma.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dma.api.Advertisement;
import dev.dma.api.Checksum;
import dev.dma.api.Checksums;
import dev.dma.api.Completion;
import dev.dma.api.DmaConfiguration;
import dev.dma.api.TransferRequest;
import dev.dma.core.FabricService;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintWriter;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * The service in this JVM, the passive target in another, over real libfabric on 127.0.0.1: the
 * deployment shape of dma, with the target's bytes checked by the target itself.
 */
class TwoProcessTest {
  private static final int SIZE = 4 << 20;

  @Test
  void tcpWritesAndReadsAcrossProcesses() throws Exception {
    runAgainstChild("tcp", "127.0.0.1");
  }

  private void runAgainstChild(String provider, String bind) throws Exception {
    Process child = TargetProcess.launch(provider, bind, SIZE);
    DmaConfiguration configuration =
        DmaConfiguration.builder().providers(provider).bind(bind).build();
    Collector<Buffer> completions = new Collector<>();
    try (Arena arena = Arena.ofShared();
        FabricService<Buffer> service =
            FabricService.<Buffer>builder(configuration).completer(completions).start();
        BufferedReader out =
            new BufferedReader(
                new InputStreamReader(child.getInputStream(), StandardCharsets.UTF_8));
        PrintWriter in = new PrintWriter(child.getOutputStream(), true, StandardCharsets.UTF_8)) {
      String first = out.readLine();
      assertTrue(first != null && first.startsWith("advertisement "), "child said: " + first);
      Advertisement ad = Advertisement.fromFields(List.of(first.substring(14).split(" ")));
      in.println("insert " + Advertisement.encodeHex(service.localAddress()));
      assertEquals("inserted", out.readLine());

      MemorySegment local = arena.allocate(SIZE, 4096);
      Patterns.fill(local, 77);
      assertTrue(
          service.submit(
              TransferRequest.write(1, ad, new Buffer(1, local)).withChecksum(Checksum.CRC32C)));
      Completion<Buffer> written = completions.take();
      int expected = Checksums.crc32c(local);
      assertEquals(expected, written.outcome().done().checksum().orElseThrow());
      in.println("crc");
      assertEquals("crc " + expected, out.readLine(), "the child's bytes");

      in.println("fill 78");
      String filled = out.readLine();
      assertTrue(filled.startsWith("filled "), filled);
      int childCrc = Integer.parseInt(filled.substring(7));
      assertTrue(
          service.submit(
              TransferRequest.read(1, ad, SIZE, new Buffer(2, local))
                  .withChecksum(Checksum.CRC32C)));
      Completion<Buffer> read = completions.take();
      assertEquals(childCrc, read.outcome().done().checksum().orElseThrow());
      assertEquals(childCrc, Checksums.crc32c(local));
      in.println("quit");
    } finally {
      if (!child.waitFor(30, TimeUnit.SECONDS)) {
        child.destroyForcibly();
      }
    }
    assertEquals(0, child.exitValue());
  }
}
