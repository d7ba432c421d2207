package dev.dma.libfabric;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dma.api.DmaConfiguration;
import dev.dma.api.DmaException;
import dev.dma.spi.Availability;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * Without libfabric nothing throws from class loading: the providers say why they are unavailable
 * and opening fails with that reason. Run in a child JVM pointed at a library that does not exist,
 * once through the system property and once through the environment variable (which is how CI's
 * libfabric 2.1 leg reaches child JVMs and downstream builds).
 */
class MissingLibraryTest {
  @Test
  void aMissingLibraryMakesProvidersUnavailableWithTheReason() throws Exception {
    String text =
        child(List.of("-D" + Libfabric.LIBRARY_PROPERTY + "=/nonexistent/libfabric.so.1"), null);
    assertTrue(
        text.contains(
            "reason: /nonexistent/libfabric.so.1 was not found (it is named by"
                + " -Ddma.libfabric.library)"),
        text);
  }

  @Test
  void theEnvironmentVariableNamesTheLibraryWhenThePropertyIsUnset() throws Exception {
    // An empty property counts as unset, so the variable decides.
    String text =
        child(List.of("-D" + Libfabric.LIBRARY_PROPERTY + "="), "/nonexistent/env/libfabric.so.1");
    assertTrue(
        text.contains(
            "reason: /nonexistent/env/libfabric.so.1 was not found (it is named by the"
                + " environment variable DMA_LIBFABRIC)"),
        text);
  }

  /** Runs {@link Child} with the JVM options and {@code DMA_LIBFABRIC} (unset when null). */
  private static String child(List<String> options, String environment) throws Exception {
    Path java = Path.of(System.getProperty("java.home"), "bin", "java");
    List<String> command = new ArrayList<>();
    command.addAll(List.of(java.toString(), "--enable-native-access=ALL-UNNAMED", "-Xshare:off"));
    command.addAll(options);
    command.addAll(List.of("-cp", System.getProperty("java.class.path"), Child.class.getName()));
    Path log = Files.createTempFile("missing-library", ".log");
    ProcessBuilder builder =
        new ProcessBuilder(command).redirectErrorStream(true).redirectOutput(log.toFile());
    if (environment == null) {
      builder.environment().remove(Libfabric.LIBRARY_ENVIRONMENT);
    } else {
      builder.environment().put(Libfabric.LIBRARY_ENVIRONMENT, environment);
    }
    Process child = builder.start();
    // Output to a file, not a pipe, so a hung child cannot block a read: the wait is bounded.
    boolean finished = child.waitFor(60, TimeUnit.SECONDS);
    if (!finished) {
      child.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
    }
    String text = Files.readString(log, StandardCharsets.UTF_8);
    Files.delete(log);
    assertTrue(finished, "the child did not finish:\n" + text);
    assertEquals(0, child.exitValue(), "child output:\n" + text);
    return text;
  }

  /** The child JVM. */
  public static final class Child {
    private Child() {}

    /**
     * Checks availability and open, exits 0 when both report the missing library.
     *
     * @param args unused
     */
    public static void main(String[] args) {
      Availability availability = new LibfabricProvider().availability();
      if (availability.available()) {
        System.out.println("available although the library is missing");
        System.exit(2);
      }
      System.out.println("reason: " + availability.reason());
      try {
        new LibfabricProvider()
            .open(DmaConfiguration.builder().providers("libfabric:tcp").build())
            .close();
        System.out.println("open succeeded");
        System.exit(3);
      } catch (DmaException expected) {
        if (!expected.getMessage().equals(availability.reason())) {
          System.out.println("open failed differently: " + expected.getMessage());
          System.exit(4);
        }
      }
      if (Libfabric.version() != 0) {
        System.exit(5);
      }
    }
  }
}
