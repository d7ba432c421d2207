package dev.dma.examples;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

/**
 * The README's links into this module name files that exist, so a user who follows one finds it.
 */
class ReadmeLinksTest {
  private static final Pattern LINK = Pattern.compile("\\]\\((dma-examples/[^)]+)\\)");

  @Test
  void everyLinkIntoDmaExamplesNamesAFileThatExists() throws Exception {
    Path root = repositoryRoot();
    String readme = Files.readString(root.resolve("README.md"), StandardCharsets.UTF_8);
    Matcher links = LINK.matcher(readme);
    List<String> missing = new ArrayList<>();
    int found = 0;
    while (links.find()) {
      found++;
      if (!Files.isRegularFile(root.resolve(links.group(1)))) {
        missing.add(links.group(1));
      }
    }
    assertTrue(found >= 4, "the README links to the examples (found " + found + ")");
    assertEquals(List.of(), missing, "README links to files that do not exist");
  }

  /** The nearest directory above the working directory holding README.md and this module. */
  private static Path repositoryRoot() {
    for (Path dir = Path.of("").toAbsolutePath(); dir != null; dir = dir.getParent()) {
      if (Files.isRegularFile(dir.resolve("README.md"))
          && Files.isRegularFile(dir.resolve("dma-examples/pom.xml"))) {
        return dir;
      }
    }
    throw new AssertionError(
        "no README.md beside dma-examples above " + Path.of("").toAbsolutePath());
  }
}
