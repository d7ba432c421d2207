package dev.dma.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dma.core.FabricProviders;
import dev.dma.spi.FabricProvider;
import java.util.ArrayList;
import java.util.List;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The advice for a missing provider names the artifact that really holds it: every provider
 * installed here (all of dma's) is loaded from the jar or classes directory of the artifact {@link
 * FabricProviders#artifactFor} names for it, and every name dma knows is accepted by one of them.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class ProviderArtifactsTest {
  /** A name each provider accepts: its own, or a member of its family. */
  private static String nameOf(FabricProvider provider) {
    return provider.accepts(provider.name()) ? provider.name() : provider.name() + ":shm";
  }

  @Test
  void everyInstalledProviderComesFromTheArtifactItsNameIsAdvisedWith() {
    List<String> wrong = new ArrayList<>();
    TreeSet<String> accepted = new TreeSet<>();
    for (FabricProvider provider : FabricProviders.installed()) {
      String name = nameOf(provider);
      String artifact = FabricProviders.artifactFor(name);
      assertNotNull(artifact, "no artifact is advised for installed provider " + name);
      // target/classes in a reactor build, dma-provider-x-<version>.jar from a repository.
      String location =
          provider.getClass().getProtectionDomain().getCodeSource().getLocation().getPath();
      if (!location.contains("/" + artifact + "/") && !location.contains("/" + artifact + "-")) {
        wrong.add(name + " -> " + artifact + " but loaded from " + location);
      }
      for (String known : FabricProviders.knownNames()) {
        if (provider.accepts(known.replace("<prov>", "shm"))) {
          accepted.add(known);
        }
      }
    }
    assertEquals(List.of(), wrong);
    assertEquals(new TreeSet<>(FabricProviders.knownNames()), accepted);
    assertTrue(accepted.size() >= 5, "only " + accepted);
  }
}
