package dev.dma.spi;

import java.util.ArrayList;
import java.util.List;

/**
 * What an endpoint turned out to be: the provider and the memory-registration and capability bits
 * it returned. Immutable.
 *
 * @param provider the libfabric provider name ({@code prov_name}), or empty
 * @param addrFormat the address format ({@code FI_SOCKADDR_IN} = 2, {@code FI_ADDR_EFA}, ...)
 * @param mrMode the returned {@code domain_attr.mr_mode} bits
 * @param caps the returned capability bits
 * @param requiresLocalMr whether local operands need a registration ({@code FI_MR_LOCAL})
 * @param usesVirtualAddressing whether remote addresses are virtual addresses ({@code
 *     FI_MR_VIRT_ADDR}) rather than offsets
 */
public record EndpointInfo(
    String provider,
    int addrFormat,
    int mrMode,
    long caps,
    boolean requiresLocalMr,
    boolean usesVirtualAddressing) {

  private static final String[] MR_MODE_NAMES = {
    "LOCAL", "VIRT_ADDR", "ALLOCATED", "PROV_KEY", "ENDPOINT", "HMEM"
  };
  private static final int[] MR_MODE_BITS = {1 << 2, 1 << 4, 1 << 5, 1 << 6, 1 << 9, 1 << 10};
  private static final String[] CAPS_NAMES = {
    "MSG", "RMA", "READ", "WRITE", "REMOTE_READ", "REMOTE_WRITE"
  };
  private static final long[] CAPS_BITS = {1L << 1, 1L << 2, 1L << 8, 1L << 9, 1L << 12, 1L << 13};

  /**
   * Exactly six lines, in the original crate's order and format: provider, addr_format, mr_mode
   * (hex and flag names), caps (hex and flag names), requires_local_mr, uses_virtual_addressing.
   *
   * @return the lines
   */
  public List<String> lines() {
    return List.of(
        "provider: " + provider,
        "addr_format: " + addrFormat,
        "mr_mode: 0x" + Integer.toHexString(mrMode) + " [" + flags(mrMode) + "]",
        "caps: 0x" + Long.toHexString(caps) + " [" + capsFlags(caps) + "]",
        "requires_local_mr: " + requiresLocalMr,
        "uses_virtual_addressing: " + usesVirtualAddressing);
  }

  private static String flags(int bits) {
    List<String> names = new ArrayList<>();
    for (int i = 0; i < MR_MODE_BITS.length; i++) {
      if ((bits & MR_MODE_BITS[i]) != 0) {
        names.add(MR_MODE_NAMES[i]);
      }
    }
    return String.join("|", names);
  }

  private static String capsFlags(long bits) {
    List<String> names = new ArrayList<>();
    for (int i = 0; i < CAPS_BITS.length; i++) {
      if ((bits & CAPS_BITS[i]) != 0) {
        names.add(CAPS_NAMES[i]);
      }
    }
    return String.join("|", names);
  }
}
