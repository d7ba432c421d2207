package dev.dma.bench;

import dev.dma.api.Advertisement;
import dev.dma.libfabric.Libfabric;
import java.io.BufferedReader;
import java.io.File;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.io.PrintWriter;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * Where {@code dma-bench scale}'s clients live: one {@link EndpointFarm} in this process, or one in
 * each of several child processes ({@code dma-bench scale-target}), client window {@code slot}
 * going to process {@code slot % processes}.
 *
 * <p>Threads: one thread at a time (the benchmark's controller, or its churn thread under the
 * controller's lock); {@link #load} from any thread.
 */
abstract class ClientHosts implements AutoCloseable {
  /**
   * A client that joined, or why it could not.
   *
   * @param advertisement its advertisement, or null
   * @param error why it could not join, or null
   */
  record Joined(Advertisement advertisement, String error) {}

  /** The libfabric provider the clients run on. */
  abstract String fabric();

  /**
   * Opens endpoints for client windows {@code first .. first + count - 1}.
   *
   * @param first the first window
   * @param count how many
   * @return one answer per window, in order
   */
  abstract List<Joined> add(int first, int count);

  /**
   * Closes client window {@code slot}'s endpoint.
   *
   * @param slot the window
   */
  abstract void remove(int slot);

  /**
   * Spin or back off.
   *
   * @param on whether transfers are running
   */
  abstract void load(boolean on);

  /**
   * What the client processes cost, for the report, or empty in process.
   *
   * @return resident bytes and descriptors summed over the processes, and their fd soft limit
   */
  abstract String stats();

  @Override
  public abstract void close();

  /** The clients in this process. */
  static ClientHosts inProcess(String provider, String bind, long slotBytes, int slots) {
    EndpointFarm farm = EndpointFarm.start(provider, bind, slotBytes, slots);
    String fabric = farm.fabric();
    return new ClientHosts() {
      @Override
      String fabric() {
        return fabric;
      }

      @Override
      List<Joined> add(int first, int count) {
        List<Joined> joined = new ArrayList<>(count);
        for (int slot = first; slot < first + count; slot++) {
          try {
            joined.add(new Joined(farm.add(slot), null));
          } catch (RuntimeException e) {
            joined.add(new Joined(null, String.valueOf(e.getMessage())));
          }
        }
        return joined;
      }

      @Override
      void remove(int slot) {
        farm.remove(slot);
      }

      @Override
      void load(boolean on) {
        farm.load(on);
      }

      @Override
      String stats() {
        return "";
      }

      @Override
      public void close() {
        farm.close();
      }
    };
  }

  /** The clients in {@code processes} child JVMs. */
  static ClientHosts children(
      String provider, String bind, long slotBytes, int slots, int processes) throws IOException {
    List<Child> children = new ArrayList<>();
    try {
      for (int i = 0; i < processes; i++) {
        // Each child gets every window's room: windows are spread by slot % processes.
        children.add(Child.start(provider, bind, slotBytes, slots));
      }
    } catch (IOException | RuntimeException e) {
      children.forEach(Child::close);
      throw e;
    }
    return new ClientHosts() {
      @Override
      synchronized String fabric() {
        return children.getFirst().fabric;
      }

      @Override
      synchronized List<Joined> add(int first, int count) {
        // Pipelined: every ADD first, then every answer, per child.
        for (int slot = first; slot < first + count; slot++) {
          children.get(slot % children.size()).send("ADD " + slot);
        }
        children.forEach(Child::flush);
        List<Joined> joined = new ArrayList<>(count);
        for (int slot = first; slot < first + count; slot++) {
          String line = children.get(slot % children.size()).receive();
          String[] words = line.split(" ", 3);
          if (words[0].equals("AD")) {
            joined.add(new Joined(Control.TargetAd.parse(words[2]).advertisement(), null));
          } else {
            joined.add(new Joined(null, words.length > 2 ? words[2] : line));
          }
        }
        return joined;
      }

      @Override
      synchronized void remove(int slot) {
        Child child = children.get(slot % children.size());
        child.send("REMOVE " + slot);
        child.flush();
        child.receive();
      }

      @Override
      synchronized void load(boolean on) {
        for (Child child : children) {
          child.send("LOAD " + (on ? 1 : 0));
          child.flush();
        }
      }

      @Override
      synchronized String stats() {
        long rss = 0;
        long fds = 0;
        for (Child child : children) {
          child.send("STATS");
          child.flush();
          String[] words = child.receive().split(" ");
          rss += Long.parseLong(words[1]);
          fds += Long.parseLong(words[2]);
        }
        return rss + " " + fds + " " + children.getFirst().fdLimit;
      }

      @Override
      public synchronized void close() {
        children.forEach(Child::close);
      }
    };
  }

  /** One {@code dma-bench scale-target} child. */
  private static final class Child {
    final Process process;
    final PrintWriter in;
    final BufferedReader out;
    final String fabric;
    final long fdLimit;

    private Child(
        Process process, PrintWriter in, BufferedReader out, String fabric, long fdLimit) {
      this.process = process;
      this.in = in;
      this.out = out;
      this.fabric = fabric;
      this.fdLimit = fdLimit;
    }

    static Child start(String provider, String bind, long slotBytes, int slots) throws IOException {
      String java =
          ProcessHandle.current()
              .info()
              .command()
              .orElse(System.getProperty("java.home") + File.separator + "bin/java");
      List<String> command = new ArrayList<>();
      command.add(java);
      command.add("--enable-native-access=ALL-UNNAMED");
      command.add("-Xss512k");
      // The child must load the same libfabric as this process (see Bench's child targets).
      String library = System.getProperty(Libfabric.LIBRARY_PROPERTY);
      if (library != null) {
        command.add("-D" + Libfabric.LIBRARY_PROPERTY + "=" + library);
      }
      command.add("-cp");
      command.add(System.getProperty("java.class.path"));
      command.add(Main.class.getName());
      command.add("scale-target");
      command.add("--provider=" + provider);
      if (bind != null) {
        command.add("--bind=" + bind);
      }
      command.add("--slot-bytes=" + slotBytes);
      command.add("--slots=" + slots);
      Process process =
          new ProcessBuilder(command).redirectError(ProcessBuilder.Redirect.INHERIT).start();
      PrintWriter in =
          new PrintWriter(
              new OutputStreamWriter(process.getOutputStream(), StandardCharsets.UTF_8), false);
      BufferedReader out =
          new BufferedReader(
              new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8));
      String ready = out.readLine();
      if (ready == null || !ready.startsWith("READY ")) {
        in.close();
        stop(process);
        throw new IOException(
            "the client process did not start"
                + (ready == null ? " (it exited; its error is above)" : ": " + ready));
      }
      String[] words = ready.split(" ");
      return new Child(process, in, out, words[1], Long.parseLong(words[3]));
    }

    void send(String line) {
      in.println(line);
    }

    void flush() {
      in.flush();
    }

    String receive() {
      try {
        String line = out.readLine();
        if (line == null) {
          throw new IOException("the client process exited");
        }
        return line;
      } catch (IOException e) {
        throw new UncheckedIOException(e);
      }
    }

    void close() {
      in.close(); // the child closes its endpoints and exits
      stop(process);
    }

    private static void stop(Process process) {
      try {
        if (!process.waitFor(ParentWatch.CLEANUP_BOUND_SECONDS + 5, TimeUnit.SECONDS)) {
          process.destroyForcibly();
          process.waitFor(5, TimeUnit.SECONDS);
        }
      } catch (InterruptedException e) {
        process.destroyForcibly();
        Thread.currentThread().interrupt();
      }
    }
  }
}
