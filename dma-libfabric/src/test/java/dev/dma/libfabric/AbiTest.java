package dev.dma.libfabric;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dma.api.Errno;
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
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Every offset, size and constant in {@link Abi} equals what the headers of the libfabric under
 * test say: the test generates a C program from the {@link C} expressions, compiles it with gcc
 * against {@link LibfabricHeaders#directory()} and compares. Fails (not skips) on any difference,
 * when the headers or gcc are missing, and when the headers' version is not the loaded library's
 * (the check would then be about some other libfabric). Prints the loaded library, both versions
 * and every compared value, so a CI log shows which libfabric a run tested.
 */
@Timeout(value = 300, unit = TimeUnit.SECONDS)
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
            #include <rdma/fi_atomic.h>
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

  /**
   * The {@link Errno} constants that older {@code rdma/fi_errno.h} lack, each with the first
   * libfabric whose headers are known to define it (from the headers of 1.17, 2.1 and 2.6 and
   * NEWS.md). Headers older than that may lack the name; any other absence fails.
   */
  private static final Map<String, Integer> ERRNO_ADDED =
      Map.of(
          "FI_ENOMR", 1 << 16 | 20, // not in 1.17's; NEWS.md: "Introduce FI_ENOMR" in 1.20.0
          "FI_EPROTO", 2 << 16 | 1, // commented out in 1.17's, defined in 2.1's
          "FI_EFIREWALLADDR", 2 << 16 | 6); // not in 1.17's or 2.1's, in 2.6's

  /** Names in {@link Errno} that are not libfabric's: the libc errno values it reports raw. */
  private static final Set<String> ERRNO_LIBC = Set.of("EPIPE");

  /** A {@code #define FI_E...} or an {@code FI_E... = } enum entry, not commented out. */
  private static final Pattern ERRNO_NAME =
      Pattern.compile("^\\s*(?:#define\\s+(FI_E\\w+)\\s+\\S|(FI_E\\w+)\\s*=)", Pattern.MULTILINE);

  /**
   * {@link Errno} is complete against the headers under test and every value equals theirs: each
   * {@code FI_E*} that {@code rdma/fi_errno.h} defines (read from its text, commented-out lines
   * skipped) is an {@link Errno} constant with the header's value, and each {@link Errno} constant
   * the headers lack is one added in a later libfabric ({@link #ERRNO_ADDED}) than these headers.
   */
  @Test
  void errnoHasEveryCodeTheHeadersDefineWithTheirValues() throws Exception {
    Path header = errnoHeader();
    String text = Files.readString(header, StandardCharsets.UTF_8);
    Set<String> defined = new TreeSet<>();
    Matcher names = ERRNO_NAME.matcher(text);
    while (names.find()) {
      defined.add(names.group(1) != null ? names.group(1) : names.group(2));
    }
    defined.remove("FI_ERRNO_H"); // the include guard
    assertTrue(defined.size() > 40, "only " + defined + " found in " + header);

    Map<String, Long> java = new LinkedHashMap<>();
    for (Field field : Errno.class.getDeclaredFields()) {
      if (Modifier.isStatic(field.getModifiers()) && field.getType() == int.class) {
        java.put(field.getName(), (long) field.getInt(null));
      }
    }
    Set<String> missingFromErrno = new TreeSet<>(defined);
    missingFromErrno.removeAll(java.keySet());
    assertEquals(
        Set.of(), missingFromErrno, header + " defines codes that dev.dma.api.Errno lacks");

    int headerVersion = headerVersion();
    List<String> compared = new ArrayList<>();
    List<String> tolerated = new ArrayList<>();
    List<String> unexplained = new ArrayList<>();
    for (String name : java.keySet()) {
      if (defined.contains(name) || ERRNO_LIBC.contains(name)) {
        compared.add(name);
      } else if (ERRNO_ADDED.containsKey(name) && headerVersion < ERRNO_ADDED.get(name)) {
        tolerated.add(name);
      } else {
        unexplained.add(name);
      }
    }
    assertEquals(
        List.of(),
        unexplained,
        "Errno constants that "
            + header
            + " (libfabric "
            + Libfabric.versionText(headerVersion)
            + ") does not define, and that no later libfabric is known to have added");

    StringBuilder program =
        new StringBuilder("#include <stdio.h>\n#include <errno.h>\n#include <rdma/fi_errno.h>\n")
            .append("int main(void) {\n");
    for (String name : compared) {
      program
          .append("  printf(\"%s %lld\\n\", \"")
          .append(name)
          .append("\", (long long) (")
          .append(name)
          .append("));\n");
    }
    program.append("  return 0;\n}\n");
    Map<String, Long> c = compileAndRun("errno", program.toString());
    List<String> mismatches = new ArrayList<>();
    for (String name : compared) {
      if (!java.get(name).equals(c.get(name))) {
        mismatches.add(name + ": Java " + java.get(name) + ", C " + c.get(name));
      }
    }
    System.out.println(
        "AbiTest: Errno: "
            + compared.size()
            + " constants compared against "
            + header
            + (tolerated.isEmpty()
                ? ""
                : "; not in these headers (added in a later libfabric): " + tolerated));
    assertEquals(List.of(), mismatches, "Errno values differ from " + header);
  }

  /** The {@code rdma/fi_errno.h} gcc includes with the flags under test (its {@code -M} list). */
  private static Path errnoHeader() throws Exception {
    Path dir = Path.of("target", "abi");
    Files.createDirectories(dir);
    Path source = dir.resolve("errno-header.c");
    Files.writeString(source, "#include <rdma/fi_errno.h>\n", StandardCharsets.UTF_8);
    List<String> gcc = new ArrayList<>(List.of("gcc", "-M"));
    gcc.addAll(LibfabricHeaders.includeFlags());
    gcc.add(source.toString());
    for (String token : run(gcc).split("[\\s\\\\]+")) {
      if (token.endsWith("/rdma/fi_errno.h")) {
        return Path.of(token);
      }
    }
    throw new AssertionError("gcc -M names no rdma/fi_errno.h for " + LibfabricHeaders.describe());
  }

  /** FI_MAJOR_VERSION.FI_MINOR_VERSION of the headers under test, packed. */
  private static int headerVersion() throws Exception {
    Map<String, Long> c =
        compileAndRun(
            "version",
            "#include <stdio.h>\n#include <rdma/fabric.h>\nint main(void) {\n"
                + "  printf(\"major %d\\nminor %d\\n\", FI_MAJOR_VERSION, FI_MINOR_VERSION);\n"
                + "  return 0;\n}\n");
    return (int) (c.get("major") << 16 | c.get("minor"));
  }

  /** Compiles a program printing "name value" lines against the headers, runs it, parses it. */
  private static Map<String, Long> compileAndRun(String name, String program) throws Exception {
    Path dir = Path.of("target", "abi");
    Files.createDirectories(dir);
    Path source = dir.resolve(name + ".c");
    Path binary = dir.resolve(name);
    Files.writeString(source, program, StandardCharsets.UTF_8);
    List<String> gcc = new ArrayList<>(List.of("gcc", "-std=gnu11", "-Wall", "-Werror"));
    gcc.addAll(LibfabricHeaders.includeFlags());
    gcc.addAll(List.of("-o", binary.toString(), source.toString()));
    run(gcc);
    Map<String, Long> values = new LinkedHashMap<>();
    for (String line : run(List.of(binary.toAbsolutePath().toString())).split("\n")) {
      String[] parts = line.trim().split(" ");
      values.put(parts[0], Long.parseLong(parts[1]));
    }
    return values;
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
