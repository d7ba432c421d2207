package dev.dma.bench;

import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.stream.Stream;

/**
 * What a process costs, read from {@code /proc/self} (Linux): resident memory, open file
 * descriptors and their soft limit, and the Java heap in use. Each reading returns -1 where {@code
 * /proc} is not there.
 *
 * @param rssBytes resident set size
 * @param fds open file descriptors
 * @param fdLimit the soft {@code RLIMIT_NOFILE} (HotSpot raises it to the hard limit at start-up,
 *     {@code -XX:+MaxFDLimit}, the default on Linux)
 * @param heapBytes heap in use (after a collection when {@link #now(boolean)} was asked for one)
 */
record ProcessStats(long rssBytes, long fds, long fdLimit, long heapBytes) {

  /**
   * Reads the numbers now.
   *
   * @param collect whether to run a full collection first, so the heap figure is what is live
   * @return the numbers
   */
  static ProcessStats now(boolean collect) {
    if (collect) {
      System.gc();
    }
    long heap = ManagementFactory.getMemoryMXBean().getHeapMemoryUsage().getUsed();
    return new ProcessStats(readRss(), readFds(), readFdLimit(), heap);
  }

  /** {@code VmRSS} from {@code /proc/self/status}, in bytes. */
  static long readRss() {
    try {
      for (String line : Files.readAllLines(Path.of("/proc/self/status"))) {
        if (line.startsWith("VmRSS:")) {
          return Long.parseLong(line.replaceAll("[^0-9]", "")) * 1024;
        }
      }
    } catch (IOException | NumberFormatException e) {
      return -1;
    }
    return -1;
  }

  /** Entries of {@code /proc/self/fd}. */
  static long readFds() {
    try (Stream<Path> entries = Files.list(Path.of("/proc/self/fd"))) {
      return entries.count();
    } catch (IOException e) {
      return -1;
    }
  }

  /** The soft "Max open files" of {@code /proc/self/limits}. */
  static long readFdLimit() {
    try {
      for (String line : Files.readAllLines(Path.of("/proc/self/limits"))) {
        if (line.startsWith("Max open files")) {
          String[] fields = line.substring("Max open files".length()).strip().split("\\s+");
          return fields[0].equals("unlimited") ? Long.MAX_VALUE : Long.parseLong(fields[0]);
        }
      }
    } catch (IOException | NumberFormatException e) {
      return -1;
    }
    return -1;
  }
}
