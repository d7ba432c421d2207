package dev.dma.libfabric;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ConcurrentHashMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.jspecify.annotations.Nullable;

/**
 * The shm endpoint names of this process, and what crashed processes left in {@code /dev/shm}.
 *
 * <h2>Why a process-wide registry</h2>
 *
 * shm maps a peer that lives in the same process not through its own mapping but by pointing at
 * that endpoint's region, and {@code fi_close} of the peer unmaps the region while every address
 * vector that inserted the peer keeps the pointer. From then on {@code fi_av_remove} of that entry
 * writes into unmapped memory ({@code smr_unmap_region}: SIGSEGV, every time on libfabric 2.1), an
 * insert of its name maps the dead region again, and a post to it is a SIGSEGV too. The AV's own
 * close skips that write (no endpoint is bound to it any more), so an entry of a closed local peer
 * must be left to it. Only this process can tell: the registry records every shm name this process
 * opened and whether that endpoint is still open.
 *
 * <h2>Names</h2>
 *
 * Without a source node both libfabric 1.17 and 2.x name an endpoint {@code
 * fi_shm://<pid>:<uid>:<index>} (its file is {@code /dev/shm/<pid>:<uid>:<index>}), unique per
 * process. A source node replaces the pid ({@code fi_shm://127.0.0.1:0:0}), so two processes
 * collide with {@code EBUSY}; {@link LibfabricEndpoint} therefore never passes one to shm. A
 * SIGKILLed or crashed process leaves its files behind (the JVM's handlers are kept, so shm's
 * cleanup handler does not run): {@link #leftovers(Path)} finds those whose pid is gone.
 *
 * <p>Thread-safe.
 */
public final class ShmNames {
  private ShmNames() {}

  /** The scheme of shm's address strings. */
  public static final String SCHEME = "fi_shm://";

  /** The directory of POSIX shared memory on Linux. */
  public static final Path DEV_SHM = Path.of("/dev/shm");

  /** {@code <pid>:<uid>:<index>}: the file names of shm endpoints opened without a source node. */
  private static final Pattern FILE_NAME = Pattern.compile("(\\d+):(\\d+):(\\d+)");

  /**
   * One shm endpoint this process opened; {@link #open} turns false just before its close, under
   * the record's monitor. A post to it from another endpoint of this process holds the monitor from
   * its check of {@link #open} to its return, so the region is never unmapped inside a post (shm
   * copies the first part of a write into the peer's region inside the post). Since dma inserts
   * such a peer under an alias ({@link #aliasOf}), shm maps it separately, so what shm does later,
   * while progressing a transfer already posted, touches a mapping of the inserting endpoint's own;
   * the check stays, so that a post to a closed peer fails at once instead of waiting in a queue
   * nobody reads.
   */
  static final class Local {
    final String name;
    volatile boolean open = true;

    Local(String name) {
      this.name = name;
    }
  }

  private static final ConcurrentHashMap<String, Local> LOCAL = new ConcurrentHashMap<>();

  /** Whether {@link #reportLeftoversOnce} ran in this process. */
  private static volatile boolean reported;

  /**
   * The name an shm address carries: the text before its NUL, or null when it is not an shm
   * address.
   *
   * @param address the address bytes, NUL-terminated
   * @return the name, for example {@code fi_shm://4242:0:1}, or null
   */
  static @Nullable String nameOf(byte[] address) {
    int end = 0;
    while (end < address.length && address[end] != 0) {
      end++;
    }
    String text = new String(address, 0, end, StandardCharsets.US_ASCII);
    return text.startsWith(SCHEME) ? text : null;
  }

  /** The pid of an shm name {@code fi_shm://<pid>:<uid>:<index>}, or 0 for another shape. */
  static long pidOf(String name) {
    int start = SCHEME.length();
    int end = name.indexOf(':', start);
    if (end <= start || end - start > 10) {
      return 0;
    }
    long pid = 0;
    for (int i = start; i < end; i++) {
      char c = name.charAt(i);
      if (c < '0' || c > '9') {
        return 0;
      }
      pid = pid * 10 + (c - '0');
    }
    return pid;
  }

  /**
   * Whether the shared-memory region of the shm endpoint named {@code name} exists now: shm opens
   * it as {@code /dev/shm/<name without the scheme>}. A snapshot: it may vanish right after.
   *
   * @param name an shm address string, scheme included
   * @return false when the endpoint closed (or never existed)
   */
  static boolean regionExists(String name) {
    String file = name.startsWith(SCHEME) ? name.substring(SCHEME.length()) : name;
    return file.isEmpty() || file.indexOf('/') >= 0 || Files.exists(Path.of("/dev/shm", file));
  }

  /**
   * The same endpoint under another name: {@code fi_shm:///<pid>:<uid>:<index>}, NUL-terminated.
   * shm compares the name with its list of this process's endpoints as a string (no match), then
   * opens it with {@code shm_open}, which skips leading slashes (glibc), so it maps the same file
   * into a mapping of its own: one the peer's close does not unmap, and on 2.x the way in to shm's
   * CMA check for a peer of this process ({@link Quirks#shmSkipsCmaCheckForLocalPeers}).
   *
   * @param name an shm name as {@link #nameOf} returns it
   * @return the alias's address bytes
   */
  static byte[] aliasOf(String name) {
    String alias = SCHEME + "/" + name.substring(SCHEME.length()) + "\0";
    return alias.getBytes(StandardCharsets.US_ASCII);
  }

  /** Records an shm endpoint this process just opened. */
  static Local opened(String name) {
    Local local = new Local(name);
    LOCAL.put(name, local);
    return local;
  }

  /**
   * The record of an shm endpoint this process opened (open or closed), or null when the name is
   * not one of this process's.
   */
  static @Nullable Local local(@Nullable String name) {
    return name == null ? null : LOCAL.get(name);
  }

  /**
   * Whether this process opened an shm endpoint of this name and has since closed it.
   *
   * @param address an address, as {@code fi_getname} returned it
   * @return true for a closed local shm endpoint
   */
  public static boolean isClosedLocal(byte[] address) {
    Local local = local(nameOf(address));
    return local != null && !local.open;
  }

  /**
   * A file left in {@code dir} by a shm endpoint whose process is gone.
   *
   * @param file the file
   * @param pid the process that created it
   */
  public record Leftover(Path file, long pid) {}

  /**
   * The shm files in {@code dir} named {@code <pid>:<uid>:<index>} whose process no longer runs.
   * Files of live processes, and files of other names, are never listed.
   *
   * @param dir normally {@link #DEV_SHM}
   * @return the leftovers, sorted by name; empty when the directory cannot be read
   */
  public static List<Leftover> leftovers(Path dir) {
    List<Leftover> found = new ArrayList<>();
    try (DirectoryStream<Path> files = Files.newDirectoryStream(dir)) {
      for (Path file : files) {
        Matcher m = FILE_NAME.matcher(file.getFileName().toString());
        if (!m.matches()) {
          continue;
        }
        long pid;
        try {
          pid = Long.parseLong(m.group(1));
        } catch (NumberFormatException tooLong) {
          continue;
        }
        if (pid > 0 && ProcessHandle.of(pid).isEmpty()) {
          found.add(new Leftover(file, pid));
        }
      }
    } catch (IOException | SecurityException unreadable) {
      return List.of();
    }
    found.sort((a, b) -> a.file().compareTo(b.file()));
    return found;
  }

  /**
   * The shell command that removes exactly these files.
   *
   * @param leftovers from {@link #leftovers(Path)}, not empty
   * @return {@code rm -f '/dev/shm/1234:0:0' ...}
   */
  public static String cleanupCommand(List<Leftover> leftovers) {
    StringBuilder command = new StringBuilder("rm -f");
    for (Leftover leftover : leftovers) {
      command.append(" '").append(leftover.file().toString().replace("'", "'\\''")).append('\'');
    }
    return command.toString();
  }

  /**
   * The warning about leftovers in {@code dir}, or null when there are none.
   *
   * @param dir normally {@link #DEV_SHM}
   * @return the text, naming the count, the pids and the exact command to clean up
   */
  public static @Nullable String leftoverWarning(Path dir) {
    List<Leftover> leftovers = leftovers(dir);
    if (leftovers.isEmpty()) {
      return null;
    }
    return leftovers.size()
        + " shm file(s) in "
        + dir
        + " belong to processes that are gone (a crash or SIGKILL skips shm's cleanup); they hold"
        + " shared memory until removed: "
        + cleanupCommand(leftovers);
  }

  /** Logs {@link #leftoverWarning} once per process, at the first shm endpoint. */
  static void reportLeftoversOnce(System.Logger log) {
    if (reported) {
      return;
    }
    reported = true;
    String warning = leftoverWarning(DEV_SHM);
    if (warning != null) {
      log.log(System.Logger.Level.WARNING, warning);
    }
  }
}
