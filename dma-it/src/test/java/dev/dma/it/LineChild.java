package dev.dma.it;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

/**
 * A child JVM driven over a line protocol: every wait for an answer is bounded, and a child that
 * does not answer in time (or exits) fails the test with its standard error, and is killed.
 */
final class LineChild {
  private static final String EOF = "\u0000eof";

  private final String name;
  private final Process process;
  private final PrintWriter in;
  private final Path log;
  private final LinkedBlockingQueue<String> lines = new LinkedBlockingQueue<>();

  private LineChild(String name, Process process, Path log) {
    this.name = name;
    this.process = process;
    this.log = log;
    this.in = new PrintWriter(process.getOutputStream(), true, StandardCharsets.UTF_8);
    Thread reader =
        new Thread(
            () -> {
              try (BufferedReader out =
                  new BufferedReader(
                      new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8))) {
                String line;
                while ((line = out.readLine()) != null) {
                  lines.add(line);
                }
              } catch (IOException closed) {
                // The child is gone; EOF below says so.
              }
              lines.add(EOF);
            },
            "reader-" + name);
    reader.setDaemon(true);
    reader.start();
  }

  /**
   * Starts a child whose standard error goes to {@code target/<folder>/<name>.log}, {@code folder}
   * being the hosts' {@link NetnsHosts#logFolder}, and hands it to {@code hosts} to kill on close.
   */
  static LineChild start(NetnsHosts hosts, String name, List<String> command) throws IOException {
    LineChild child = start(hosts.logFolder, name, command);
    hosts.adopt(child.process);
    return child;
  }

  /** Starts a child whose standard error goes to {@code target/<folder>/<name>.log}. */
  static LineChild start(String folder, String name, List<String> command) throws IOException {
    Path dir = Path.of("target", folder);
    Files.createDirectories(dir);
    Path log = dir.resolve(name + ".log");
    Process process =
        new ProcessBuilder(command).redirectError(ProcessBuilder.Redirect.to(log.toFile())).start();
    return new LineChild(name, process, log);
  }

  /** The child's process id, for signals. */
  long pid() {
    return process.pid();
  }

  /** Whether the child still runs. */
  boolean isAlive() {
    return process.isAlive();
  }

  /** Waits for a line starting with {@code prefix} (other lines are printed and skipped). */
  String expect(String prefix, Duration timeout) throws InterruptedException {
    long deadline = System.nanoTime() + timeout.toNanos();
    while (true) {
      long left = deadline - System.nanoTime();
      String line = left <= 0 ? null : lines.poll(left, TimeUnit.NANOSECONDS);
      if (line == null) {
        throw fail("no `" + prefix + "` line within " + timeout.toMillis() + " ms");
      }
      if (line.equals(EOF)) {
        lines.add(EOF);
        throw fail("exited before a `" + prefix + "` line");
      }
      System.out.println("[" + name + "] < " + line);
      if (line.startsWith(prefix)) {
        return line;
      }
    }
  }

  /** Sends a command and waits for its one-line answer, which starts with the command's verb. */
  String ask(String command, Duration timeout) throws InterruptedException {
    System.out.println("[" + name + "] > " + command);
    in.println(command);
    return expect(command.split(" ")[0], timeout);
  }

  /** {@link #ask}, parsed into its {@code key=value} words ({@code msg} takes the rest). */
  Map<String, String> askFields(String command, Duration timeout) throws InterruptedException {
    String line = ask(command, timeout);
    Map<String, String> fields = fields(line);
    if (fields.containsKey("error")) {
      throw fail("answered `" + command + "` with an error: " + line);
    }
    return fields;
  }

  static Map<String, String> fields(String line) {
    Map<String, String> fields = new TreeMap<>();
    int msg = line.indexOf(" msg=");
    String head = msg < 0 ? line : line.substring(0, msg);
    if (msg >= 0) {
      fields.put("msg", line.substring(msg + 5));
    }
    for (String word : head.split(" ")) {
      int eq = word.indexOf('=');
      if (eq > 0) {
        fields.put(word.substring(0, eq), word.substring(eq + 1));
      }
    }
    return fields;
  }

  /** Sends a line without waiting for an answer. */
  void send(String command) {
    System.out.println("[" + name + "] > " + command);
    in.println(command);
  }

  boolean waitForExit(Duration timeout) throws InterruptedException {
    return process.waitFor(timeout.toMillis(), TimeUnit.MILLISECONDS);
  }

  void kill() {
    process.destroyForcibly();
  }

  /** The last few KiB of the child's standard error. */
  String stderrTail() {
    try {
      String text = Files.readString(log, StandardCharsets.UTF_8);
      return text.length() <= 6000 ? text : "..." + text.substring(text.length() - 6000);
    } catch (IOException unreadable) {
      return "(stderr unreadable: " + unreadable + ")";
    }
  }

  private AssertionError fail(String what) {
    kill();
    try {
      process.waitFor(5, TimeUnit.SECONDS);
    } catch (InterruptedException interrupted) {
      Thread.currentThread().interrupt();
    }
    return new AssertionError(
        name
            + " "
            + what
            + (process.isAlive() ? "" : " (exit " + process.exitValue() + ")")
            + "; killed. Its stderr ("
            + log
            + "):\n"
            + stderrTail());
  }
}
