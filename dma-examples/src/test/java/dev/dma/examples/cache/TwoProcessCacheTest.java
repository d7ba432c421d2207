package dev.dma.examples.cache;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dma.api.Checksums;
import dev.dma.api.DmaConfiguration;
import dev.dma.core.FabricProviders;
import dev.dma.spi.Availability;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The cache in two processes over tcp on loopback, as a user runs it: the server in this JVM, the
 * client's {@code main} in a child JVM. The server stripes over two endpoints on one NIC ({@code
 * interfaces=lo,lo}). Skipped, saying why, where libfabric's tcp is unavailable.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class TwoProcessCacheTest {
  private static final long SIZE = 1 << 20;

  @Test
  void aClientInAnotherJvmPutsAndGetsItsValueBack() throws Exception {
    DmaConfiguration configuration =
        DmaConfiguration.builder()
            .providers("tcp")
            .bind("127.0.0.1")
            .interfaces(List.of("lo", "lo"))
            .build();
    Availability tcp =
        FabricProviders.installed().stream()
            .filter(provider -> provider.accepts("tcp"))
            .findFirst()
            .orElseThrow()
            .availability();
    Assumptions.assumeTrue(tcp.available(), tcp.reason());

    InetAddress loopback = InetAddress.getByName("127.0.0.1");
    try (CacheServer server =
        CacheServer.start(configuration, new InetSocketAddress(loopback, 0), 256 << 10)) {
      Path log = Files.createTempFile("cache-client", ".log");
      Process child =
          new ProcessBuilder(
                  Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                  "--enable-native-access=ALL-UNNAMED",
                  "-cp",
                  System.getProperty("java.class.path"),
                  CacheClient.class.getName(),
                  "127.0.0.1",
                  Integer.toString(server.port()),
                  Long.toString(SIZE))
              .redirectErrorStream(true)
              .redirectOutput(log.toFile())
              .start();
      boolean exited = child.waitFor(90, TimeUnit.SECONDS);
      if (!exited) {
        child.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
      }
      String output = Files.readString(log, StandardCharsets.UTF_8);
      System.out.println("[client] " + output.strip());
      assertTrue(exited, "the client ended within 90 s:\n" + output);
      assertEquals(0, child.exitValue(), "the client's exit code:\n" + output);

      // What CacheClient.main put: i * 31 + 7. The server holds exactly that, and the client
      // reported the same checksum for what it read back, each way striped in two.
      MemorySegment expected = MemorySegment.ofArray(new byte[(int) SIZE]);
      for (long i = 0; i < SIZE; i++) {
        expected.set(ValueLayout.JAVA_BYTE, i, (byte) (i * 31 + 7));
      }
      assertArrayEquals(expected.toArray(ValueLayout.JAVA_BYTE), server.value("example"));
      assertTrue(
          output.contains(String.format("crc %08x chunks 2/2 same", Checksums.crc32c(expected))),
          output);
      Files.delete(log);
    }
  }
}
