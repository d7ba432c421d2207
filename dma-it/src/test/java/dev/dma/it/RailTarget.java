package dev.dma.it;

import dev.dma.api.Checksums;
import dev.dma.api.DmaConfiguration;
import dev.dma.api.RemoteAccess;
import dev.dma.core.PassiveTarget;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

/**
 * The passive side of {@link RailHealthTcpTest}, in its own JVM inside the target's namespace:
 * {@code count} tcp passive targets (one per client of the server, so rail faults come from several
 * clients, as the group's health rule asks) bound to the target's loopback address, which the
 * server reaches over either rail. Each exposes a region filled with its own pattern and prints
 * {@code target <index> <advertisement fields...>} and then {@code crc <index> <crc-32c of the
 * first read's bytes>}; then it serves until stdin closes or says {@code quit}.
 */
public final class RailTarget {
  private RailTarget() {}

  /**
   * Runs the targets.
   *
   * @param args bind address, target count, region bytes, read bytes
   * @throws Exception when anything fails; the parent sees a non-zero exit
   */
  public static void main(String[] args) throws Exception {
    DmaConfiguration configuration =
        DmaConfiguration.builder().providers("tcp").bind(args[0]).build();
    int count = Integer.parseInt(args[1]);
    long regionBytes = Long.parseLong(args[2]);
    long readBytes = Long.parseLong(args[3]);
    List<PassiveTarget> targets = new ArrayList<>();
    try (Arena arena = Arena.ofShared()) {
      try {
        for (int i = 0; i < count; i++) {
          PassiveTarget target = PassiveTarget.start(configuration);
          targets.add(target);
          MemorySegment memory = arena.allocate(regionBytes, 4096);
          Patterns.fill(memory, 100 + i);
          System.out.println(
              "target "
                  + i
                  + " "
                  + String.join(
                      " ", target.expose(memory, RemoteAccess.READ).advertisement().toFields()));
          System.out.println("crc " + i + " " + Checksums.crc32c(memory.asSlice(0, readBytes)));
        }
        System.out.println("ready");
        System.out.flush();
        BufferedReader in =
            new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null && !line.equals("quit")) {
          System.out.println("unknown " + line);
          System.out.flush();
        }
        System.out.println("quit ok");
        System.out.flush();
      } finally {
        for (PassiveTarget target : targets) {
          target.close();
        }
      }
    }
  }
}
