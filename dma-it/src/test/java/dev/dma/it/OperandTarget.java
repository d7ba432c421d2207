package dev.dma.it;

import dev.dma.api.Advertisement;
import dev.dma.api.DmaConfiguration;
import dev.dma.api.RemoteAccess;
import dev.dma.core.PassiveTarget;
import dev.dma.core.TargetRegion;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.charset.StandardCharsets;
import java.util.Properties;

/**
 * The passive target of {@link OperandSafetyTest}, in its own JVM so the test can SIGSTOP it. It
 * prints {@code advertisement <fields>}, then answers one line per command: {@code insert <hex>}
 * (the server's address) with {@code inserted}, {@code set <byte>} (every exposed byte) with {@code
 * set}, {@code count <offset> <length> <byte>} with {@code count <n>} (how many bytes of that range
 * hold that value), and {@code quit}, which closes the region and the target and exits.
 */
public final class OperandTarget {
  private OperandTarget() {}

  /**
   * Runs the target.
   *
   * @param args provider, bind address (or "-"), exposed size in bytes
   * @throws Exception when anything fails; the parent sees the exit or a missing answer
   */
  public static void main(String[] args) throws Exception {
    Properties properties = new Properties();
    properties.setProperty("providers", args[0]);
    if (!args[1].equals("-")) {
      properties.setProperty("bind", args[1]);
    }
    long size = Long.parseLong(args[2]);
    BufferedReader in =
        new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    try (Arena arena = Arena.ofShared();
        PassiveTarget target = PassiveTarget.start(DmaConfiguration.fromProperties(properties))) {
      // local can expose only memory it made; the others take any native memory.
      MemorySegment memory =
          args[0].equals("local") ? target.allocate(size) : arena.allocate(size, 4096);
      TargetRegion region = target.expose(memory, RemoteAccess.READ_WRITE);
      Advertisement ad = region.advertisement();
      System.out.println("advertisement " + ad);
      System.out.flush();
      String line;
      while ((line = in.readLine()) != null) {
        String[] words = line.split(" ");
        switch (words[0]) {
          case "insert" -> {
            target.insertPeer(Advertisement.decodeHex(words[1]));
            System.out.println("inserted");
          }
          case "set" -> {
            memory.fill((byte) Integer.parseInt(words[1]));
            System.out.println("set");
          }
          case "count" -> {
            MemorySegment range =
                memory.asSlice(Long.parseLong(words[1]), Long.parseLong(words[2]));
            byte value = (byte) Integer.parseInt(words[3]);
            long n = 0;
            for (long i = 0; i < range.byteSize(); i++) {
              if (range.get(ValueLayout.JAVA_BYTE, i) == value) {
                n++;
              }
            }
            System.out.println("count " + n);
          }
          case "pidns" ->
              System.out.println(
                  "pidns "
                      + java.nio.file.Files.readSymbolicLink(
                          java.nio.file.Path.of("/proc/self/ns/pid")));
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
