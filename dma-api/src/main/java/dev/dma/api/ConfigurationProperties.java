package dev.dma.api;

import java.io.IOException;
import java.io.Reader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.format.DateTimeParseException;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The text form of a {@link DmaConfiguration}: the property keys of its table, and the parsing of
 * their values (durations, byte counts, whole numbers, comma-separated names) into a {@link
 * DmaConfiguration.Builder}. Validation of the parsed values stays with the record.
 *
 * <p>Stateless; every method may be called from any thread.
 */
final class ConfigurationProperties {
  private static final Set<String> KEYS =
      Set.of(
          "providers",
          "interfaces",
          "bind",
          "max_in_flight",
          "crc_pool_threads",
          "progress_deadline",
          "max_pinned_bytes",
          "completion_deadline",
          "max_pending",
          "close_timeout",
          "target_idle");

  private static final Pattern BYTES =
      Pattern.compile("(\\d+)\\s*(?:([kmgt])(?:i?b)?|b)?", Pattern.CASE_INSENSITIVE);

  private static final Pattern DURATION =
      Pattern.compile("(\\d+)\\s*(ns|us|µs|ms|s|m|h)", Pattern.CASE_INSENSITIVE);

  private ConfigurationProperties() {}

  /** See {@link DmaConfiguration#load(Path)}. */
  static DmaConfiguration load(Path file) throws IOException {
    try (Reader reader = Files.newBufferedReader(file, StandardCharsets.UTF_8)) {
      Properties properties = new Properties();
      properties.load(reader);
      return fromProperties(properties);
    }
  }

  /** See {@link DmaConfiguration#fromProperties(Properties)}. */
  static DmaConfiguration fromProperties(Properties properties) {
    Set<String> unknown = new TreeSet<>(properties.stringPropertyNames());
    unknown.removeAll(KEYS);
    if (!unknown.isEmpty()) {
      throw new IllegalArgumentException(
          "unknown configuration key"
              + (unknown.size() > 1 ? "s " : " ")
              + String.join(", ", unknown.stream().map(key -> "\"" + key + "\"").toList())
              + "; known keys are "
              + String.join(", ", new TreeSet<>(KEYS)));
    }
    DmaConfiguration.Builder builder = DmaConfiguration.builder();
    String value;
    if ((value = properties.getProperty("providers")) != null) {
      builder.providers(list(value));
    }
    if ((value = properties.getProperty("interfaces")) != null) {
      builder.interfaces(list(value));
    }
    if ((value = properties.getProperty("bind")) != null && !value.isBlank()) {
      builder.bind(value.strip());
    }
    if ((value = properties.getProperty("max_in_flight")) != null) {
      builder.maxInFlight(integer("max_in_flight", value));
    }
    if ((value = properties.getProperty("crc_pool_threads")) != null) {
      builder.crcPoolThreads(integer("crc_pool_threads", value));
    }
    if ((value = properties.getProperty("progress_deadline")) != null) {
      builder.progressDeadline(parseDuration("progress_deadline", value));
    }
    if ((value = properties.getProperty("max_pinned_bytes")) != null) {
      builder.maxPinnedBytes(parseBytes("max_pinned_bytes", value));
    }
    if ((value = properties.getProperty("completion_deadline")) != null) {
      builder.completionDeadline(parseDurationOrZero("completion_deadline", value));
    }
    if ((value = properties.getProperty("max_pending")) != null) {
      builder.maxPending(integer("max_pending", value));
    }
    if ((value = properties.getProperty("close_timeout")) != null) {
      builder.closeTimeout(parseDurationOrZero("close_timeout", value));
    }
    if ((value = properties.getProperty("target_idle")) != null) {
      builder.targetIdle(parseDurationOrZero("target_idle", value));
    }
    return builder.build();
  }

  /** See {@link DmaConfiguration#parseDuration(String, String)}. */
  static Duration parseDuration(String key, String text) {
    String trimmed = text.strip();
    Matcher matcher = DURATION.matcher(trimmed);
    if (matcher.matches()) {
      long amount;
      try {
        amount = Long.parseLong(matcher.group(1));
      } catch (NumberFormatException tooLarge) {
        throw new IllegalArgumentException(key + " is out of range: \"" + text + "\"", tooLarge);
      }
      return switch (matcher.group(2).toLowerCase(Locale.ROOT)) {
        case "ns" -> Duration.ofNanos(amount);
        case "us", "µs" -> Duration.ofNanos(Math.multiplyExact(amount, 1_000L));
        case "ms" -> Duration.ofMillis(amount);
        case "s" -> Duration.ofSeconds(amount);
        case "m" -> Duration.ofMinutes(amount);
        default -> Duration.ofHours(amount);
      };
    }
    try {
      return Duration.parse(trimmed);
    } catch (DateTimeParseException notIso) {
      throw new IllegalArgumentException(
          key + " must be a duration such as 50ms, 2s or PT2S, not \"" + text + "\"", notIso);
    }
  }

  /** {@link #parseDuration}, also accepting a bare {@code 0} for "off". */
  private static Duration parseDurationOrZero(String key, String text) {
    return text.strip().equals("0") ? Duration.ZERO : parseDuration(key, text);
  }

  /** See {@link DmaConfiguration#parseBytes(String, String)}. */
  static long parseBytes(String key, String text) {
    Matcher matcher = BYTES.matcher(text.strip());
    if (!matcher.matches()) {
      throw new IllegalArgumentException(
          key + " must be a byte count such as 4096, 512m or 64GiB, not \"" + text + "\"");
    }
    try {
      long amount = Long.parseLong(matcher.group(1));
      String unit = matcher.group(2);
      int shift =
          unit == null
              ? 0
              : switch (unit.toLowerCase(Locale.ROOT)) {
                case "k" -> 10;
                case "m" -> 20;
                case "g" -> 30;
                default -> 40;
              };
      return Math.multiplyExact(amount, 1L << shift);
    } catch (NumberFormatException | ArithmeticException tooLarge) {
      throw new IllegalArgumentException(key + " is out of range: \"" + text + "\"", tooLarge);
    }
  }

  private static List<String> list(String value) {
    if (value.isBlank()) {
      return List.of();
    }
    return Arrays.stream(value.split(",")).map(String::strip).toList();
  }

  private static int integer(String key, String value) {
    try {
      return Integer.parseInt(value.strip());
    } catch (NumberFormatException notANumber) {
      throw new IllegalArgumentException(
          key + " must be a whole number, not \"" + value + "\"", notANumber);
    }
  }
}
