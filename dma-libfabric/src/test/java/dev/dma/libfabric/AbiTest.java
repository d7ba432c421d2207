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
 * Every offset, size and constant in {@link Abi} equals what the installed headers say: the test
 * generates a C program from the {@link C} expressions, compiles it with gcc and compares. Fails
 * (not skips) on any difference, and when the headers or gcc are missing.
 */
class AbiTest {
  @Test
  void everyAbiValueMatchesTheInstalledHeaders() throws Exception {
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
    program.append("  return 0;\n}\n");

    Path dir = Path.of("target", "abi");
    Files.createDirectories(dir);
    Path source = dir.resolve("abi.c");
    Path binary = dir.resolve("abi");
    Files.writeString(source, program, StandardCharsets.UTF_8);
    run(
        List.of(
            "gcc", "-std=gnu11", "-Wall", "-Werror", "-o", binary.toString(), source.toString()));
    String output = run(List.of(binary.toAbsolutePath().toString()));

    Map<String, Long> c = new LinkedHashMap<>();
    for (String line : output.split("\n")) {
      String[] parts = line.trim().split(" ");
      c.put(parts[0], Long.parseLong(parts[1]));
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
    assertEquals(List.of(), mismatches, "ABI mismatches against the installed headers");
    assertEquals(java.size(), c.size());
  }

  private static String run(List<String> command) throws IOException, InterruptedException {
    Process process = new ProcessBuilder(command).redirectErrorStream(true).start();
    byte[] output = process.getInputStream().readAllBytes();
    assertTrue(process.waitFor(60, TimeUnit.SECONDS), command + " did not finish");
    String text = new String(output, StandardCharsets.UTF_8);
    assertEquals(0, process.exitValue(), command.getFirst() + " failed:\n" + text);
    return text;
  }
}
