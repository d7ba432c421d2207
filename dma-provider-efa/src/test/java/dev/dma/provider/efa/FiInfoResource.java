package dev.dma.provider.efa;

import dev.dma.libfabric.InfoFacts;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.util.Map;
import java.util.Properties;

/**
 * Reads the documented fi_info facts of a test resource ({@code efa-direct.fi_info.properties}):
 * names are libfabric's constant names, flags joined with {@code |}. Every name's value is checked
 * against the installed headers by {@link EfaAbiTest}.
 */
final class FiInfoResource {
  /** The constant names the resources may use, with their values (checked by gcc in EfaAbiTest). */
  static final Map<String, Long> NAMES =
      Map.ofEntries(
          Map.entry("FI_MSG", 1L << 1),
          Map.entry("FI_RMA", 1L << 2),
          Map.entry("FI_TAGGED", 1L << 3),
          Map.entry("FI_ATOMIC", 1L << 4),
          Map.entry("FI_READ", 1L << 8),
          Map.entry("FI_WRITE", 1L << 9),
          Map.entry("FI_REMOTE_READ", 1L << 12),
          Map.entry("FI_REMOTE_WRITE", 1L << 13),
          Map.entry("FI_MULTI_RECV", 1L << 16),
          Map.entry("FI_SOURCE", 1L << 57),
          Map.entry("FI_CONTEXT", 1L << 59),
          Map.entry("FI_CONTEXT2", 1L << 52),
          Map.entry("FI_RX_CQ_DATA", 1L << 56),
          Map.entry("FI_MSG_PREFIX", 1L << 58),
          Map.entry("FI_MR_LOCAL", 1L << 2),
          Map.entry("FI_MR_VIRT_ADDR", 1L << 4),
          Map.entry("FI_MR_ALLOCATED", 1L << 5),
          Map.entry("FI_MR_PROV_KEY", 1L << 6),
          Map.entry("FI_MR_ENDPOINT", 1L << 9),
          Map.entry("FI_MR_HMEM", 1L << 10),
          Map.entry("FI_ADDR_EFA", 12L),
          Map.entry("FI_SOCKADDR_IN", 2L),
          Map.entry("FI_EP_RDM", 3L),
          Map.entry("FI_THREAD_SAFE", 1L),
          Map.entry("FI_PROGRESS_AUTO", 1L),
          Map.entry("FI_PROGRESS_MANUAL", 2L));

  private FiInfoResource() {}

  static InfoFacts load(String resource) {
    Properties properties = new Properties();
    try (InputStream in = FiInfoResource.class.getResourceAsStream(resource)) {
      if (in == null) {
        throw new IllegalArgumentException("no resource " + resource);
      }
      properties.load(in);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return new InfoFacts(
        properties.getProperty("prov_name"),
        properties.getProperty("fabric_name"),
        properties.getProperty("domain_name"),
        value(properties, "caps"),
        value(properties, "mode"),
        (int) value(properties, "addr_format"),
        (int) value(properties, "ep_type"),
        (int) value(properties, "mr_mode"),
        (int) value(properties, "threading"),
        (int) value(properties, "data_progress"),
        value(properties, "tx_size"),
        value(properties, "inject_size"));
  }

  static long value(Properties properties, String key) {
    String text = properties.getProperty(key);
    if (text == null) {
      throw new IllegalArgumentException("missing key " + key);
    }
    long bits = 0;
    for (String part : text.split("\\|")) {
      String name = part.strip();
      if (name.matches("\\d+")) {
        bits |= Long.parseLong(name);
      } else {
        Long known = NAMES.get(name);
        if (known == null) {
          throw new IllegalArgumentException("unknown constant " + name + " in " + key);
        }
        bits |= known;
      }
    }
    return bits;
  }
}
