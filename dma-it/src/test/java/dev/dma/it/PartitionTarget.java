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

/**
 * The passive side of {@link PartitionTest}, in its own JVM inside the target's network namespace.
 * It exposes {@code slots} slots of {@code slotBytes} each, prints {@code advertisement <hex> <key>
 * <remote-address>}, then answers one line per command on stdin:
 *
 * <ul>
 *   <li>{@code insert <hex>}: inserts the server's address; {@code inserted}
 *   <li>{@code crc <slot>}: {@code crc slot=<slot> value=<CRC-32C of that slot>}
 *   <li>{@code quit}: closes and exits; {@code bye}
 * </ul>
 */
public final class PartitionTarget {
  private PartitionTarget() {}

  /**
   * Runs the target.
   *
   * @param args provider, bind address, slot count, slot size in bytes
   * @throws Exception when anything fails; the parent sees a non-zero exit
   */
  public static void main(String[] args) throws Exception {
    DmaConfiguration configuration =
        DmaConfiguration.builder().providers(args[0]).bind(args[1]).build();
    int slots = Integer.parseInt(args[2]);
    long slotBytes = Long.parseLong(args[3]);
    BufferedReader in =
        new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    try (Arena arena = Arena.ofShared();
        PassiveTarget target = PassiveTarget.start(configuration)) {
      MemorySegment memory = arena.allocate(slots * slotBytes, 4096);
      TargetRegion region = target.expose(memory, RemoteAccess.READ_WRITE);
      System.out.println("advertisement " + String.join(" ", region.advertisement().toFields()));
      System.out.flush();
      String line;
      while ((line = in.readLine()) != null) {
        String[] words = line.split(" ");
        switch (words[0]) {
          case "insert" -> {
            target.insertPeer(Advertisement.decodeHex(words[1]));
            System.out.println("inserted");
          }
          case "crc" -> {
            int slot = Integer.parseInt(words[1]);
            System.out.println(
                "crc slot="
                    + slot
                    + " value="
                    + Checksums.crc32c(memory.asSlice(slot * slotBytes, slotBytes)));
          }
          case "quit" -> {
            region.close();
            System.out.println("bye");
            System.out.flush();
            return;
          }
          default -> System.out.println("unknown " + line);
        }
        System.out.flush();
      }
    }
  }
}
