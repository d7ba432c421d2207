import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

/**
 * One thread's MemorySegment.copy, the ceiling a same-host path that copies once is held against
 * (issue 31): {@code slots} source and destination slots of {@code size} bytes each, copied in turn
 * for {@code seconds}, after a warm-up of the same length. Prints one CSV line: size, slots, GB/s
 * (10^9 bytes). Run with the JDK directly: {@code java CopyBaseline.java 65536 64 2}.
 */
public final class CopyBaseline {
  public static void main(String[] args) {
    long size = Long.parseLong(args[0]);
    int slots = Integer.parseInt(args[1]);
    double seconds = Double.parseDouble(args[2]);
    try (Arena arena = Arena.ofConfined()) {
      MemorySegment from = arena.allocate(size * slots, 4096).fill((byte) 1);
      MemorySegment to = arena.allocate(size * slots, 4096);
      run(from, to, size, slots, seconds); // warm-up: compiled, pages touched
      double gbps = run(from, to, size, slots, seconds);
      System.out.printf("copy,%d,%d,%.2f%n", size, slots, gbps);
    }
  }

  private static double run(MemorySegment from, MemorySegment to, long size, int slots, double s) {
    long end = System.nanoTime() + (long) (s * 1e9);
    long bytes = 0;
    long start = System.nanoTime();
    long now;
    do {
      for (int i = 0; i < slots; i++) {
        MemorySegment.copy(from, i * size, to, i * size, size);
      }
      bytes += size * slots;
    } while ((now = System.nanoTime()) < end);
    return bytes / ((now - start) / 1e9) / 1e9;
  }
}
