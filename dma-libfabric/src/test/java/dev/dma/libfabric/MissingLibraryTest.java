package dev.dma.libfabric;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dma.api.DmaConfiguration;
import dev.dma.api.DmaException;
import dev.dma.spi.Availability;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * Without libfabric nothing throws from class loading: the providers say why they are unavailable
 * and opening fails with that reason. Run in a child JVM pointed at a library that does not exist.
 */
class MissingLibraryTest {
  @Test
  void aMissingLibraryMakesProvidersUnavailableWithTheReason() throws Exception {
    Path java = Path.of(System.getProperty("java.home"), "bin", "java");
    Process child =
        new ProcessBuilder(
                List.of(
                    java.toString(),
                    "--enable-native-access=ALL-UNNAMED",
                    "-Xshare:off",
                    "-D" + Libfabric.LIBRARY_PROPERTY + "=/nonexistent/libfabric.so.1",
                    "-cp",
                    System.getProperty("java.class.path"),
                    Child.class.getName()))
            .redirectErrorStream(true)
            .start();
    byte[] output = child.getInputStream().readAllBytes();
    assertTrue(child.waitFor(60, TimeUnit.SECONDS), "the child did not finish");
    String text = new String(output, StandardCharsets.UTF_8);
    assertEquals(0, child.exitValue(), "child output:\n" + text);
    assertTrue(
        text.contains(
            "reason: /nonexistent/libfabric.so.1 was not found (it is named by"
                + " -Ddma.libfabric.library)"),
        text);
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
