package dev.dma.provider.efa;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dma.libfabric.LibfabricHeaders;
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
 * Every constant this module decides on ({@link EfaAbi}) and every name the fi_info resources use
 * ({@link FiInfoResource#NAMES}) equals the headers of the libfabric under test ({@link
 * LibfabricHeaders}): one C program, compiled with gcc, prints them all. Fails when gcc or the
 * headers are missing (.ci/run installs both).
 */
class EfaAbiTest {
  @Test
  void everyConstantMatchesTheInstalledHeaders() throws Exception {
    Map<String, Long> java = new LinkedHashMap<>();
    Map<String, String> expressions = new LinkedHashMap<>();
    for (Field field : EfaAbi.class.getDeclaredFields()) {
      EfaAbi.Header header = field.getAnnotation(EfaAbi.Header.class);
      if (!Modifier.isStatic(field.getModifiers()) || header == null) {
        continue;
      }
      field.setAccessible(true);
      java.put("EfaAbi." + field.getName(), ((Number) field.get(null)).longValue());
      expressions.put("EfaAbi." + field.getName(), header.value());
    }
    for (Map.Entry<String, Long> name : FiInfoResource.NAMES.entrySet()) {
      java.put(name.getKey(), name.getValue());
      expressions.put(name.getKey(), name.getKey());
    }
    assertTrue(java.size() > 50, "only " + java.size() + " constants found");
    StringBuilder program =
        new StringBuilder(
            """
            #include <stdio.h>
            #include <rdma/fabric.h>
            #include <rdma/fi_domain.h>
            #include <rdma/fi_errno.h>
            int main(void) {
            """);
    for (Map.Entry<String, String> entry : expressions.entrySet()) {
      program
          .append("  printf(\"%s=%lld\\n\", \"")
          .append(entry.getKey())
          .append("\", (long long)(")
          .append(entry.getValue())
          .append("));\n");
    }
    program.append("  return 0;\n}\n");
    Path dir = Files.createTempDirectory("efa-abi");
    Path source = dir.resolve("abi.c");
    Path binary = dir.resolve("abi");
    Files.writeString(source, program);
    // The headers of the libfabric under test (DMA_LIBFABRIC / DMA_LIBFABRIC_INCLUDE), not
    // always the system's: a 2.x leg must check 2.x's constants.
    List<String> command = new ArrayList<>(List.of("gcc"));
    command.addAll(LibfabricHeaders.includeFlags());
    command.addAll(List.of("-o", binary.toString(), source.toString()));
    Process gcc = new ProcessBuilder(command).redirectErrorStream(true).start();
    String compileOutput = new String(gcc.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    assertTrue(gcc.waitFor(60, TimeUnit.SECONDS), "gcc timed out");
    assertEquals(
        0, gcc.exitValue(), "gcc failed (install gcc and libfabric-dev):\n" + compileOutput);
    Process run = new ProcessBuilder(binary.toString()).redirectErrorStream(true).start();
    String output = new String(run.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    assertTrue(run.waitFor(30, TimeUnit.SECONDS));
    Map<String, Long> c = new LinkedHashMap<>();
    for (String line : output.split("\n")) {
      int eq = line.indexOf('=');
      if (eq > 0) {
        c.put(line.substring(0, eq), Long.parseLong(line.substring(eq + 1)));
      }
    }
    for (Map.Entry<String, Long> entry : java.entrySet()) {
      assertEquals(
          c.get(entry.getKey()),
          entry.getValue(),
          entry.getKey() + " = " + expressions.get(entry.getKey()));
    }
  }
}
