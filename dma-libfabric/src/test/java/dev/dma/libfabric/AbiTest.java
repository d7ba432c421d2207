package dev.dma.libfabric;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dma.libfabric.internal.Abi;
import dev.dma.libfabric.internal.C;
import java.io.IOException;
import java.lang.reflect.Field;
import java.lang.reflect.Modifier;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * Every offset, size and constant in {@link Abi} equals what the headers of the libfabric under
 * test say: the test generates a C program from the {@link C} expressions, compiles it with gcc
 * against {@link LibfabricHeaders#directory()} and compares. Fails (not skips) on any difference,
 * when the headers or gcc are missing, and when the headers' version is not the loaded library's
 * (the check would then be about some other libfabric). Prints the loaded library, both versions
 * and every compared value, so a CI log shows which libfabric a run tested.
 */
class AbiTest {
  /** Keys the program prints besides the {@link Abi} fields; no field may have these names. */
  private static final String HEADER_MAJOR = "header.FI_MAJOR_VERSION";

  private static final String HEADER_MINOR = "header.FI_MINOR_VERSION";

  @Test
  void everyAbiValueMatchesTheHeadersOfTheLibraryUnderTest() throws Exception {
    Map<String, Long> java = new LinkedHashMap<>();
    Map<String, String> expressions = new LinkedHashMap<>();
    for (Field field : Abi.class.getDeclaredFields()) {
      if (!Modifier.isStatic(field.getModifiers()) || field.isSynthetic()) {
        continue;
      }
      C c = field.getAnnotation(C.class);
      assertNotNull(c, "Abi." + field.getName() + " has no @C expression, so nothing checks it");
      java.put(field.getName(), ((Number) field.get(null)).longValue());
      expressions.put(field.getName(), c.value());
    }
    assertTrue(java.size() > 100, "only " + java.size() + " constants found");

    StringBuilder program =
        new StringBuilder(
            """
            #include <stddef.h>
            #include <stdio.h>
            #include <signal.h>
            #include <sys/uio.h>
            #include <sys/socket.h>
            #include <netinet/in.h>
            #include <rdma/fabric.h>
            #include <rdma/fi_domain.h>
            #include <rdma/fi_endpoint.h>
            #include <rdma/fi_cm.h>
            #include <rdma/fi_rma.h>
            #include <rdma/fi_errno.h>
            int main(void) {
            """);
    for (Map.Entry<String, String> entry : expressions.entrySet()) {
      program
          .append("  printf(\"%s %lld\\n\", \"")
          .append(entry.getKey())
          .append("\", (long long) (")
          .append(entry.getValue())
          .append("));\n");
    }
    program
        .append(
            "  printf(\"%s %lld\\n\", \"" + HEADER_MAJOR + "\", (long long) FI_MAJOR_VERSION);\n")
        .append(
            "  printf(\"%s %lld\\n\", \"" + HEADER_MINOR + "\", (long long) FI_MINOR_VERSION);\n")
        .append("  return 0;\n}\n");

    Path dir = Path.of("target", "abi");
    Files.createDirectories(dir);
    Path source = dir.resolve("abi.c");
    Path binary = dir.resolve("abi");
    Files.writeString(source, program, StandardCharsets.UTF_8);
    List<String> gcc =
        new ArrayList<>(List.of("gcc", "-std=gnu11", "-Wall", "-fdiagnostics-plain-output"));
    gcc.addAll(LibfabricHeaders.includeFlags());
    gcc.addAll(List.of("-o", binary.toString(), source.toString()));
    String diagnostics = run(gcc);
    // Not -Werror: libfabric 2.x deprecates FI_MR_BASIC and FI_MR_SCALABLE (which Abi binds for
    // 1.x) through _Pragma("GCC warning ..."), a diagnostic no -Wno-error=... flag covers. So
    // deprecations are reported and every other warning fails here, as -Werror would.
    List<String> deprecations = new ArrayList<>();
    List<String> otherWarnings = new ArrayList<>();
    for (String line : diagnostics.split("\n")) {
      if (line.contains(" warning: ") || line.contains(" error: ")) {
        (line.contains(" warning: ") && line.contains(" is deprecated")
                ? deprecations
                : otherWarnings)
            .add(line);
      }
    }
    assertEquals(
        List.of(), otherWarnings, "gcc warned about the generated program:\n" + diagnostics);
    String output = run(List.of(binary.toAbsolutePath().toString()));

    Map<String, Long> c = new LinkedHashMap<>();
    for (String line : output.split("\n")) {
      String[] parts = line.trim().split(" ");
      c.put(parts[0], Long.parseLong(parts[1]));
    }
    int headerVersion = (int) (c.remove(HEADER_MAJOR) << 16 | c.remove(HEADER_MINOR));
    report(headerVersion, deprecations, java, c);
    if (Libfabric.availability().available()) {
      assertEquals(
          Libfabric.versionText(Libfabric.version()),
          Libfabric.versionText(headerVersion),
          "the headers in "
              + LibfabricHeaders.describe()
              + " are not those of the loaded "
              + Libfabric.libraryFile()
              + ": name the library's include directory with "
              + LibfabricHeaders.ENVIRONMENT);
    }
    List<String> mismatches = new ArrayList<>();
    for (Map.Entry<String, Long> entry : java.entrySet()) {
      Long expected = c.get(entry.getKey());
      if (!entry.getValue().equals(expected)) {
        mismatches.add(
            entry.getKey()
                + " ("
                + expressions.get(entry.getKey())
                + "): Java "
                + entry.getValue()
                + ", C "
                + expected);
      }
    }
    assertEquals(
        List.of(),
        mismatches,
        "ABI mismatches against the headers in " + LibfabricHeaders.describe());
    assertEquals(java.size(), c.size());
  }

  /** Which libfabric was checked, both versions, and every value, for the build log. */
  private static void report(
      int headerVersion, List<String> deprecations, Map<String, Long> java, Map<String, Long> c) {
    StringBuilder text = new StringBuilder();
    text.append("AbiTest: loaded libfabric ")
        .append(
            Libfabric.availability().available()
                ? Libfabric.versionText(Libfabric.version())
                    + " (fi_version) from "
                    + Libfabric.libraryFile()
                : "unavailable: " + Libfabric.availability().reason())
        .append("\nAbiTest: headers ")
        .append(Libfabric.versionText(headerVersion))
        .append(" (FI_MAJOR_VERSION.FI_MINOR_VERSION) from ")
        .append(LibfabricHeaders.describe())
        .append("\nAbiTest: ")
        .append(deprecations.size())
        .append(" deprecation warning(s) allowed, ")
        .append(java.size())
        .append(" values compared (name, Java, C):\n");
    for (Map.Entry<String, Long> entry : java.entrySet()) {
      text.append("  ")
          .append(entry.getKey())
          .append(' ')
          .append(entry.getValue())
          .append(' ')
          .append(c.get(entry.getKey()))
          .append('\n');
    }
    System.out.print(text);
  }

  /**
   * Runs a command to completion and returns its output. The output goes to a file rather than a
   * pipe so a hung command cannot block the read: the wait is bounded and the command is killed.
   */
  private static String run(List<String> command) throws IOException, InterruptedException {
    Path log = Files.createTempFile(Path.of("target", "abi"), "run", ".log");
    Process process =
        new ProcessBuilder(command).redirectErrorStream(true).redirectOutput(log.toFile()).start();
    boolean finished = process.waitFor(60, TimeUnit.SECONDS);
    if (!finished) {
      process.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
    }
    String text = Files.readString(log, StandardCharsets.UTF_8);
    Files.delete(log);
    assertTrue(finished, command + " did not finish in 60 s:\n" + text);
    assertEquals(0, process.exitValue(), command.getFirst() + " failed:\n" + text);
    return text;
  }
}
