package dev.dma.libfabric;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dma.api.DmaConfiguration;
import java.io.File;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;

/**
 * In a fresh JVM: load libfabric through the binding, open an shm endpoint, then take millions of
 * implicit null checks in JIT-compiled code. Without the signal guard the first one exits the
 * process (libinfinipath's handler) and the shm name is unlinked (shm's handler).
 */
class JvmSurvivesLibfabricTest {
  @Test
  void implicitNullChecksAfterLoadingNeitherKillTheJvmNorUnlinkShm() throws Exception {
    Assumptions.assumeTrue(Libfabric.availability().available(), Libfabric.availability().reason());
    Path java = Path.of(System.getProperty("java.home"), "bin", "java");
    Process child =
        new ProcessBuilder(
                List.of(
                    java.toString(),
                    "--enable-native-access=ALL-UNNAMED",
                    "-Xshare:off",
                    "-cp",
                    System.getProperty("java.class.path"),
                    Child.class.getName()))
            .redirectErrorStream(true)
            .start();
    byte[] output = child.getInputStream().readAllBytes();
    assertTrue(child.waitFor(120, TimeUnit.SECONDS), "the child did not finish");
    String text = new String(output, StandardCharsets.UTF_8);
    assertEquals(0, child.exitValue(), "child output:\n" + text);
    assertTrue(text.contains("survived"), text);
    // No libinfinipath backtrace file was written either.
    try (var files = Files.list(Path.of("."))) {
      assertTrue(
          files.noneMatch(file -> file.getFileName().toString().endsWith(".btr")),
          "a .btr file appeared");
    }
  }

  /** The child JVM. */
  public static final class Child {
    private Child() {}

    static int length(int[] array) {
      return array.length; // an implicit null check once C2 compiles it
    }

    /**
     * Runs the scenario; exits 0 when the JVM and the shm name survived.
     *
     * @param args unused
     */
    public static void main(String[] args) {
      try (LibfabricEndpoint endpoint =
          LibfabricEndpoint.open(EndpointPolicy.of("shm"), DmaConfiguration.defaults())) {
        String address =
            new String(endpoint.localAddress(), StandardCharsets.US_ASCII).replace("\0", "");
        File name = new File("/dev/shm/" + address.substring("fi_shm://".length()));
        if (!name.exists()) {
          System.out.println("shm name " + name + " missing right after open");
          System.exit(3);
        }
        int[] array = new int[7];
        long sum = 0;
        long npes = 0;
        for (int round = 0; round < 20; round++) {
          // Warm up without nulls so C2 compiles length() with an implicit (trapping) null check...
          for (int i = 0; i < 200_000; i++) {
            sum += length(array);
          }
          // ...then trap: each null raises SIGSEGV inside compiled code.
          for (int i = 0; i < 1_000; i++) {
            try {
              sum += length(null);
            } catch (NullPointerException expected) {
              npes++;
            }
          }
        }
        if (!name.exists()) {
          System.out.println("shm name " + name + " was unlinked by a signal handler");
          System.exit(4);
        }
        System.out.println("survived " + npes + " NPEs (" + sum + "); " + name + " still exists");
      }
    }
  }
}
