package dev.dma.bench;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Transfer sizes as users write them: {@code 64}, {@code 4k}, {@code 64KiB}, {@code 1m}, {@code
 * 1MB}; the suffixes are binary ({@code 1k} = 1024 bytes), as in the C anchor's {@code -s}.
 */
public final class Sizes {
  /** The largest size accepted: 1 GiB, since one buffer of that size is registered per side. */
  public static final long MAX_BYTES = 1L << 30;

  private static final Pattern SIZE =
      Pattern.compile("(\\d{1,10})\\s*(?:([kmg])(?:i?b)?|b)?", Pattern.CASE_INSENSITIVE);

  private Sizes() {}

  /**
   * Parses one size.
   *
   * @param text a whole number with an optional {@code k}, {@code m} or {@code g} suffix, which may
   *     be followed by {@code b} or {@code ib}
   * @return the size in bytes, in {@code [1, MAX_BYTES]}
   * @throws IllegalArgumentException naming the text and what a size looks like
   */
  public static long parse(String text) {
    Matcher matcher = SIZE.matcher(text.strip());
    if (!matcher.matches()) {
      throw new IllegalArgumentException(
          "invalid size \""
              + text
              + "\": use a whole number of bytes with an optional k, m or g"
              + " suffix, such as 64, 4k, 64KiB or 1m");
    }
    int shift =
        matcher.group(2) == null
            ? 0
            : switch (matcher.group(2).toLowerCase(Locale.ROOT)) {
              case "k" -> 10;
              case "m" -> 20;
              default -> 30;
            };
    long value = Long.parseLong(matcher.group(1)) << shift;
    if (value < 1 || value > MAX_BYTES) {
      throw new IllegalArgumentException(
          "invalid size \"" + text + "\": sizes must be between 1 byte and 1g");
    }
    return value;
  }

  /**
   * Parses a comma-separated list, keeping the order given and dropping repeats.
   *
   * @param text for example {@code 64,4k,64k,1m}
   * @return the sizes, never empty
   * @throws IllegalArgumentException for an empty list or any invalid size
   */
  public static List<Long> parseList(String text) {
    List<Long> sizes = new ArrayList<>();
    for (String part : text.split(",", -1)) {
      long size = parse(part);
      if (!sizes.contains(size)) {
        sizes.add(size);
      }
    }
    return List.copyOf(sizes);
  }

  /**
   * A size for people: {@code 64 B}, {@code 4 KiB}, {@code 1 MiB}, or bytes when not a whole unit.
   *
   * @param bytes the size
   * @return the text
   */
  public static String format(long bytes) {
    if (bytes >= 1 << 30 && bytes % (1 << 30) == 0) {
      return (bytes >> 30) + " GiB";
    }
    if (bytes >= 1 << 20 && bytes % (1 << 20) == 0) {
      return (bytes >> 20) + " MiB";
    }
    if (bytes >= 1 << 10 && bytes % (1 << 10) == 0) {
      return (bytes >> 10) + " KiB";
    }
    return bytes + " B";
  }
}
