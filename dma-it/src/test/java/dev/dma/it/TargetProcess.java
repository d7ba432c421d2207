package dev.dma.it;

import dev.dma.api.Advertisement;
import dev.dma.api.Checksums;
import dev.dma.api.DmaConfiguration;
import dev.dma.api.RemoteAccess;
import dev.dma.core.PassiveTarget;
import dev.dma.core.TargetRegion;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;

/**
 * A passive target in its own JVM, driven over stdin/stdout by {@link TwoProcessTest}: it prints
 * {@code advertisement <hex> <key> <remote-address>}, then answers {@code insert <hex>} (the
 * server's address), {@code fill <seed>}, {@code crc} and {@code quit}, one line each.
 */
public final class TargetProcess {
  private TargetProcess() {}

  /**
   * Starts the target in a child JVM of this test's class path and native access. The libfabric
   * this JVM was told to load ({@code -Ddma.libfabric.library}) is passed on; {@code DMA_LIBFABRIC}
   * is inherited with the environment. Its standard error goes to this process's.
   *
   * @param provider the provider name
   * @param bind the bind address, or "-" for none
   * @param sizeBytes the exposed buffer's size
   * @return the running child; the caller ends it ({@code quit}, then a bounded wait)
   * @throws java.io.IOException when the JVM cannot be started
   */
  static Process launch(String provider, String bind, long sizeBytes) throws java.io.IOException {
    List<String> command =
        new ArrayList<>(
            List.of(
                Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "--enable-native-access=ALL-UNNAMED"));
    String library = System.getProperty("dma.libfabric.library");
    if (library != null) {
      command.add("-Ddma.libfabric.library=" + library);
    }
    command.addAll(
        List.of(
            "-cp",
            System.getProperty("java.class.path"),
            TargetProcess.class.getName(),
            provider,
            bind,
            Long.toString(sizeBytes)));
    return new ProcessBuilder(command).redirectError(ProcessBuilder.Redirect.INHERIT).start();
  }

  /**
   * Runs the target.
   *
   * @param args provider, bind address (or "-"), buffer size in bytes
   * @throws Exception when anything fails; the parent sees a non-zero exit
   */
  public static void main(String[] args) throws Exception {
    Properties properties = new Properties();
    properties.setProperty("providers", args[0]);
    if (!args[1].equals("-")) {
      properties.setProperty("bind", args[1]);
    }
    DmaConfiguration configuration = DmaConfiguration.fromProperties(properties);
    long size = Long.parseLong(args[2]);
    BufferedReader in =
        new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    try (Arena arena = Arena.ofShared();
        PassiveTarget target = PassiveTarget.start(configuration)) {
      MemorySegment memory = arena.allocate(size, 4096);
      TargetRegion region = target.expose(memory, RemoteAccess.READ_WRITE);
      System.out.println("advertisement " + region.advertisement());
      System.out.flush();
      String line;
      while ((line = in.readLine()) != null) {
        String[] words = line.split(" ");
        switch (words[0]) {
          case "insert" -> {
            target.insertPeer(Advertisement.decodeHex(words[1]));
            System.out.println("inserted");
          }
          case "fill" -> {
            Patterns.fill(memory, Long.parseLong(words[1]));
            System.out.println("filled " + Checksums.crc32c(memory));
          }
          case "crc" -> System.out.println("crc " + Checksums.crc32c(memory));
          case "quit" -> {
            region.close();
            return;
          }
          default -> System.out.println("unknown " + line);
        }
        System.out.flush();
      }
    }
  }
}
