package dev.dma.bench;

import dev.dma.api.Advertisement;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.Callable;
import java.util.concurrent.TimeUnit;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

/**
 * {@code dma-bench scale-target}: the passive side of {@code dma-bench scale} in a child process,
 * an {@link EndpointFarm} driven over standard input and output, one line each way:
 *
 * <pre>
 * child → parent   READY &lt;libfabric provider&gt; &lt;pid&gt; &lt;fd soft limit&gt;
 * parent → child   ADD &lt;slot&gt;      child → parent   AD &lt;slot&gt; &lt;hex&gt; &lt;key&gt; &lt;addr&gt; &lt;length&gt;
 *                                                 or   ERR &lt;slot&gt; &lt;message&gt;
 * parent → child   REMOVE &lt;slot&gt;   child → parent   OK
 * parent → child   LOAD 1|0        (no answer: spin while 1, back off while 0)
 * parent → child   STATS           child → parent   STATS &lt;rss bytes&gt; &lt;fds&gt; &lt;endpoints&gt;
 * </pre>
 *
 * The end of standard input (the parent closed it, or died) closes every endpoint first, so shm
 * leaves nothing in {@code /dev/shm}, and then exits; the close is bounded by {@link
 * ParentWatch#CLEANUP_BOUND_SECONDS}.
 */
@Command(name = "scale-target", hidden = true, description = "dma-bench scale's child process")
public final class ScaleTargetCommand implements Callable<Integer> {
  @Spec picocli.CommandLine.Model.CommandSpec spec;

  @Option(names = "--provider", required = true)
  String provider;

  @Option(names = "--bind")
  String bind;

  @Option(names = "--slot-bytes", required = true)
  long slotBytes;

  @Option(names = "--slots", required = true)
  int slots;

  /** Resident bytes past which the child opens no more endpoints; 0 is a quarter of the RAM. */
  @Option(names = "--memory-limit")
  long memoryLimit;

  /** Created by picocli. */
  public ScaleTargetCommand() {}

  @Override
  public Integer call() throws Exception {
    PrintWriter out = spec.commandLine().getOut();
    EndpointFarm farm = EndpointFarm.start(provider, bind, slotBytes, slots);
    try {
      out.println(
          "READY "
              + farm.fabric().replace(' ', '_')
              + " "
              + ProcessHandle.current().pid()
              + " "
              + ProcessStats.readFdLimit());
      out.flush();
      BufferedReader in =
          new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
      long limit = memoryLimit > 0 ? memoryLimit : ScaleBench.physicalMemory() / 4;
      String line;
      while ((line = in.readLine()) != null) {
        String[] words = line.split(" ");
        switch (words[0]) {
          case "ADD" -> {
            int slot = Integer.parseInt(words[1]);
            long rss = ProcessStats.readRss();
            if (rss > limit) {
              // tcp;ofi_rxm was measured at about 23 MB per endpoint (its buffer pools): without
              // this bound 1,024 of them took 24 GB and the kernel's OOM killer ended the child.
              out.println(
                  "ERR "
                      + slot
                      + " the client process holds "
                      + rss / (1 << 20)
                      + " MiB with "
                      + farm.size()
                      + " endpoints, past its bound of "
                      + limit / (1 << 20)
                      + " MiB (a quarter of the RAM): fewer clients, or more --processes on more"
                      + " memory");
            } else {
              try {
                Advertisement ad = farm.add(slot);
                out.println(
                    "AD "
                        + slot
                        + " "
                        + String.join(" ", ad.toFields().subList(0, Advertisement.FIELD_COUNT))
                        + " "
                        + ad.lengthBytes());
              } catch (RuntimeException e) {
                out.println(
                    "ERR " + slot + " " + String.valueOf(e.getMessage()).replace('\n', ' '));
              }
            }
          }
          case "REMOVE" -> {
            farm.remove(Integer.parseInt(words[1]));
            out.println("OK");
          }
          case "LOAD" -> farm.load(words[1].equals("1"));
          case "STATS" ->
              out.println(
                  "STATS "
                      + ProcessStats.readRss()
                      + " "
                      + ProcessStats.readFds()
                      + " "
                      + farm.size());
          default -> out.println("ERR -1 unknown command: " + line);
        }
        if (!in.ready()) {
          out.flush(); // answer pipelined commands in one write
        }
      }
    } finally {
      // Standard input ended: the parent is done or gone. Close the endpoints (shm unlinks its
      // files then), bounded, and exit.
      Thread bound =
          new Thread(
              () -> {
                try {
                  TimeUnit.SECONDS.sleep(ParentWatch.CLEANUP_BOUND_SECONDS);
                  Runtime.getRuntime().halt(0);
                } catch (InterruptedException ignored) {
                  // closed in time
                }
              },
              "dma-bench-close-bound");
      bound.setDaemon(true);
      bound.start();
      farm.close();
      bound.interrupt();
    }
    return 0;
  }
}
