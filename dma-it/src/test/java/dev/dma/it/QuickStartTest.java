package dev.dma.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.StringWriter;
import java.lang.reflect.Method;
import java.net.URL;
import java.net.URLClassLoader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import javax.tools.JavaCompiler;
import javax.tools.ToolProvider;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The README's quick start, so the README cannot rot: the java block under {@value #HEADING} is
 * extracted from README.md at the repository root, compiled as it stands, and run. There is no copy
 * of it here; README.md is the single source.
 */
class QuickStartTest {
  static final String HEADING = "## Quick start: a server over tcp";

  @TempDir Path work;

  @Test
  void theReadmeExampleMovesABufferThereAndBack() throws Exception {
    String block = readmeBlock(findReadme());
    assertTrue(block.contains("public class QuickStart"), block);
    assertTrue(block.contains("static int run()"), block);

    // Compile exactly the README's block, from the file the compiler reads.
    Path source = work.resolve("src").resolve("QuickStart.java");
    Files.createDirectories(source.getParent());
    Files.writeString(source, block, StandardCharsets.UTF_8);
    assertEquals(block, Files.readString(source, StandardCharsets.UTF_8));
    Path classes = Files.createDirectories(work.resolve("classes"));
    JavaCompiler javac = ToolProvider.getSystemJavaCompiler();
    assertNotNull(javac, "no system Java compiler (run the tests on a JDK)");
    StringWriter diagnostics = new StringWriter();
    boolean compiled =
        javac
            .getTask(
                diagnostics,
                null,
                null,
                List.of(
                    "-proc:none",
                    "-classpath",
                    System.getProperty("java.class.path"),
                    "-d",
                    classes.toString()),
                null,
                javac
                    .getStandardFileManager(null, null, StandardCharsets.UTF_8)
                    .getJavaFileObjects(source))
            .call();
    assertTrue(compiled, () -> "the README's quick start does not compile:\n" + diagnostics);

    try (URLClassLoader loader =
        new URLClassLoader(
            new URL[] {classes.toUri().toURL()}, QuickStartTest.class.getClassLoader())) {
      Method run = loader.loadClass("QuickStart").getDeclaredMethod("run");
      run.setAccessible(true);
      assertEquals(0, run.invoke(null), "the README's quick start returned failure");
    }
  }

  /** README.md at the repository root: the nearest one above the working directory. */
  private static Path findReadme() {
    for (Path dir = Path.of("").toAbsolutePath(); dir != null; dir = dir.getParent()) {
      Path readme = dir.resolve("README.md");
      if (Files.isRegularFile(readme) && Files.isRegularFile(dir.resolve("dma-it/pom.xml"))) {
        return readme;
      }
    }
    throw new AssertionError("no README.md beside dma-it above " + Path.of("").toAbsolutePath());
  }

  /** The first java block after {@link #HEADING}, without its fences, lines ending in newlines. */
  static String readmeBlock(Path readme) throws Exception {
    List<String> lines = Files.readAllLines(readme, StandardCharsets.UTF_8);
    int heading = lines.indexOf(HEADING);
    assertTrue(heading >= 0, "README.md has no line \"" + HEADING + "\"");
    int open = -1;
    for (int i = heading + 1; i < lines.size() && open < 0; i++) {
      assertTrue(!lines.get(i).startsWith("## "), "no java block under " + HEADING);
      if (lines.get(i).equals("```java")) {
        open = i;
      }
    }
    assertTrue(open >= 0, "no java block under " + HEADING);
    StringBuilder block = new StringBuilder();
    for (int i = open + 1; i < lines.size(); i++) {
      if (lines.get(i).equals("```")) {
        return block.toString();
      }
      block.append(lines.get(i)).append('\n');
    }
    throw new AssertionError("the java block under " + HEADING + " is not closed");
  }
}
