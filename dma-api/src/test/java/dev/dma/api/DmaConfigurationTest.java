package dev.dma.api;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Properties;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class DmaConfigurationTest {
  private static Properties props(String... keyValues) {
    Properties properties = new Properties();
    for (int i = 0; i < keyValues.length; i += 2) {
      properties.setProperty(keyValues[i], keyValues[i + 1]);
    }
    return properties;
  }

  private static String invalid(Runnable build) {
    return assertThrows(IllegalArgumentException.class, build::run).getMessage();
  }

  @Test
  void emptyGivesTheDefaults() {
    DmaConfiguration config = DmaConfiguration.fromProperties(new Properties());
    assertEquals(DmaConfiguration.defaults(), config);
    // No provider named: the service selects the highest-priority available one.
    assertEquals(List.of(), config.providers());
    assertEquals("", config.provider());
    assertEquals(false, config.namesProvider());
    assertEquals(List.of(), config.interfaces());
    assertNull(config.bind());
    assertEquals(64, config.maxInFlight());
    assertEquals(2, config.crcPoolThreads());
    assertEquals(Duration.ofSeconds(1), config.progressDeadline());
    assertEquals(0L, config.maxPinnedBytes());
  }

  @Test
  void anEmptyProviderListNamesNone() {
    assertEquals(List.of(), DmaConfiguration.builder().providers(List.of()).build().providers());
    assertEquals(List.of(), DmaConfiguration.fromProperties(props("providers", "")).providers());
    assertEquals(true, DmaConfiguration.builder().providers("tcp").build().namesProvider());
  }

  @Test
  void parsesEveryKey() {
    DmaConfiguration config =
        DmaConfiguration.fromProperties(
            props(
                "providers", "efa-direct, tcp",
                "interfaces", "rdmap83s0-rdm",
                "bind", "10.0.0.1",
                "max_in_flight", "16",
                "crc_pool_threads", "4",
                "progress_deadline", "50ms",
                "max_pinned_bytes", "64GiB"));
    assertEquals(List.of("efa-direct", "tcp"), config.providers());
    assertEquals("efa-direct", config.provider());
    assertEquals(List.of("rdmap83s0-rdm"), config.interfaces());
    assertEquals("10.0.0.1", config.bind());
    assertEquals(16, config.maxInFlight());
    assertEquals(4, config.crcPoolThreads());
    assertEquals(Duration.ofMillis(50), config.progressDeadline());
    assertEquals(64L << 30, config.maxPinnedBytes());
    assertEquals(config, config.toBuilder().build());
  }

  @Test
  void rejectsUnknownKeys() {
    assertTrue(
        invalid(() -> DmaConfiguration.fromProperties(props("direction", "ToPeer")))
            .startsWith("unknown configuration key \"direction\"; known keys are bind, "));
    assertTrue(
        invalid(() -> DmaConfiguration.fromProperties(props("crc-pool-threads", "2")))
            .contains("\"crc-pool-threads\""));
    assertTrue(
        invalid(() -> DmaConfiguration.fromProperties(props("a", "1", "b", "2")))
            .startsWith("unknown configuration keys \"a\", \"b\""));
  }

  @Test
  void validatesEveryField() {
    assertEquals(
        "max_in_flight must be at least 1, not 0",
        invalid(() -> DmaConfiguration.builder().maxInFlight(0).build()));
    assertEquals(
        "crc_pool_threads must be at least 1, not 0",
        invalid(() -> DmaConfiguration.builder().crcPoolThreads(0).build()));
    assertEquals(
        "progress_deadline must be positive, not PT0S",
        invalid(() -> DmaConfiguration.builder().progressDeadline(Duration.ZERO).build()));
    assertTrue(
        invalid(() -> DmaConfiguration.builder().progressDeadline(Duration.ofSeconds(-1)).build())
            .startsWith("progress_deadline must be positive"));
    assertEquals(
        "providers must hold non-blank names, not \" \"",
        invalid(() -> DmaConfiguration.builder().providers("tcp", " ").build()));
    assertEquals(
        "interfaces must hold non-blank names, not null",
        invalid(
            () ->
                DmaConfiguration.builder().interfaces(java.util.Arrays.asList("a", null)).build()));
    assertTrue(
        invalid(() -> DmaConfiguration.builder().bind(" ").build()).startsWith("bind must be"));
    assertEquals(
        "max_in_flight must be a whole number, not \"many\"",
        invalid(() -> DmaConfiguration.fromProperties(props("max_in_flight", "many"))));
    assertTrue(
        invalid(() -> DmaConfiguration.fromProperties(props("progress_deadline", "soon")))
            .startsWith("progress_deadline must be a duration"));
    assertEquals(
        "max_pinned_bytes must not be negative, not -1",
        invalid(() -> DmaConfiguration.builder().maxPinnedBytes(-1).build()));
    assertEquals(
        "max_pinned_bytes must be a byte count such as 4096, 512m or 64GiB, not \"-1\"",
        invalid(() -> DmaConfiguration.fromProperties(props("max_pinned_bytes", "-1"))));
    assertEquals(
        "max_pinned_bytes must be a byte count such as 4096, 512m or 64GiB, not \"lots\"",
        invalid(() -> DmaConfiguration.fromProperties(props("max_pinned_bytes", "lots"))));
    assertEquals(
        "max_pinned_bytes is out of range: \"9000000t\"",
        invalid(() -> DmaConfiguration.fromProperties(props("max_pinned_bytes", "9000000t"))));
  }

  @Test
  void maxPinnedBytesKeepsItsValueAndZeroMeansTheDefault() {
    assertEquals(4096L, DmaConfiguration.builder().maxPinnedBytes(4096).build().maxPinnedBytes());
    assertEquals(
        DmaConfiguration.defaults(),
        DmaConfiguration.fromProperties(props("max_pinned_bytes", "0")));
    assertEquals(
        1L << 20,
        DmaConfiguration.defaults().toBuilder().maxPinnedBytes(1L << 20).build().maxPinnedBytes());
  }

  @Test
  void parsesByteCounts() {
    assertEquals(4096L, DmaConfiguration.parseBytes("k", "4096"));
    assertEquals(4096L, DmaConfiguration.parseBytes("k", "4096b"));
    assertEquals(2048L, DmaConfiguration.parseBytes("k", "2k"));
    assertEquals(512L << 20, DmaConfiguration.parseBytes("k", " 512m "));
    assertEquals(512L << 20, DmaConfiguration.parseBytes("k", "512 MB"));
    assertEquals(64L << 30, DmaConfiguration.parseBytes("k", "64GiB"));
    assertEquals(3L << 40, DmaConfiguration.parseBytes("k", "3t"));
  }

  @Test
  void parsesDurations() {
    assertEquals(Duration.ofNanos(5), DmaConfiguration.parseDuration("k", "5ns"));
    assertEquals(Duration.ofNanos(5_000), DmaConfiguration.parseDuration("k", "5us"));
    assertEquals(Duration.ofMillis(5), DmaConfiguration.parseDuration("k", "5ms"));
    assertEquals(Duration.ofSeconds(5), DmaConfiguration.parseDuration("k", "5 s"));
    assertEquals(Duration.ofMinutes(5), DmaConfiguration.parseDuration("k", "5m"));
    assertEquals(Duration.ofHours(5), DmaConfiguration.parseDuration("k", "5h"));
    assertEquals(Duration.ofMillis(1500), DmaConfiguration.parseDuration("k", "PT1.5S"));
  }

  @Test
  void loadsAFile(@TempDir Path dir) throws IOException {
    Path file = dir.resolve("dma.properties");
    Files.writeString(file, "# a comment\nproviders=fake\nmax_in_flight=8\n");
    DmaConfiguration config = DmaConfiguration.load(file);
    assertEquals("fake", config.provider());
    assertEquals(8, config.maxInFlight());
  }
}
