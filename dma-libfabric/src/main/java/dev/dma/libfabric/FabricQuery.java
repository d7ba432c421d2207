package dev.dma.libfabric;

import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import dev.dma.api.DmaException;
import dev.dma.libfabric.internal.Abi;
import dev.dma.libfabric.internal.Native;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import org.jspecify.annotations.Nullable;

/**
 * The {@code fi_getinfo} query every libfabric endpoint is opened from (SEED-SPEC 5.1), and the
 * reading of the {@code fi_info} list it returns: which domains it names (SEED-SPEC 2.14) and which
 * entry an endpoint opens. Stateless; any thread may call it once the library is loaded ({@link
 * Native#require()}).
 */
final class FabricQuery {
  private FabricQuery() {}

  /**
   * SEED-SPEC 5.1: the {@code fi_getinfo} query with the policy's hints; the caller frees the
   * returned list.
   *
   * @param policy the provider's choices
   * @param sourceNode the node passed with {@code FI_SOURCE}, or null for none
   * @return the list, not 0
   * @throws DmaException of kind FABRIC when the query fails or matches nothing
   */
  static long query(EndpointPolicy policy, @Nullable String sourceNode) {
    long hints = Native.dupinfo(0);
    if (hints == 0) {
      throw DmaException.fabric("fi_allocinfo failed");
    }
    try (Arena arena = Arena.ofConfined()) {
      Native.MEMORY.set(JAVA_LONG, hints + Abi.INFO_CAPS, InfoEntry.HINT_CAPS);
      Native.MEMORY.set(JAVA_LONG, hints + Abi.INFO_MODE, policy.hintMode());
      Native.MEMORY.set(
          JAVA_INT, Native.word(hints + Abi.INFO_EP_ATTR) + Abi.EP_ATTR_TYPE, Abi.FI_EP_RDM);
      Native.MEMORY.set(
          JAVA_INT,
          Native.word(hints + Abi.INFO_DOMAIN_ATTR) + Abi.DOMAIN_ATTR_MR_MODE,
          policy.hintMrMode());
      long fabricAttr = Native.word(hints + Abi.INFO_FABRIC_ATTR);
      // fi_freeinfo free()s every string it finds in the hints, so they must come from malloc.
      Native.MEMORY.set(
          JAVA_LONG, fabricAttr + Abi.FABRIC_ATTR_PROV_NAME, Native.strdup(policy.providerName()));
      String fabricName = policy.fabricName();
      if (fabricName != null) {
        Native.MEMORY.set(JAVA_LONG, fabricAttr + Abi.FABRIC_ATTR_NAME, Native.strdup(fabricName));
      }
      long node = sourceNode == null ? 0 : arena.allocateFrom(sourceNode).address();
      MemorySegment out = arena.allocate(JAVA_LONG);
      int rc = Native.getinfo(node, sourceNode == null ? 0 : Abi.FI_SOURCE, hints, out.address());
      if (rc == -Abi.FI_ENODATA) {
        // Nothing here serves these hints: the provider is not built into this libfabric, or not
        // on the named node or domain. The set-up, not the call, is what to fix.
        throw new DmaException(
            DmaException.Kind.FABRIC,
            DmaException.Reason.PROVIDER_UNAVAILABLE,
            Native.failure("fi_getinfo", rc),
            -rc,
            0,
            null);
      }
      if (rc != 0) {
        throw DmaException.fabric(Native.failure("fi_getinfo", rc));
      }
      long list = out.get(JAVA_LONG, 0);
      if (list == 0) {
        throw DmaException.fabric(DmaException.Reason.PROVIDER_UNAVAILABLE, "no provider matched");
      }
      return list;
    } finally {
      Native.freeinfo(hints);
    }
  }

  /**
   * The domain names the policy's query returns (SEED-SPEC 2.14), in libfabric's order without
   * duplicates; null and non-UTF-8 names are skipped. With a source node, only the domains that
   * serve that address: libfabric matches {@code FI_SOURCE} against each interface's addresses (on
   * 1.17 {@code net} with {@code 127.0.0.1} answers {@code lo} alone, without it {@code eth0} and
   * {@code lo}).
   *
   * @param policy the provider's choices
   * @param sourceNode the node passed with {@code FI_SOURCE}, or null for every domain
   * @return the names, possibly empty
   * @throws DmaException of kind FABRIC when the query fails
   */
  static List<String> domainNames(EndpointPolicy policy, @Nullable String sourceNode) {
    long list = query(policy, sourceNode);
    try {
      Set<String> names = new LinkedHashSet<>();
      for (long entry = list; entry != 0; entry = Native.word(entry + Abi.INFO_NEXT)) {
        String name = domainName(entry);
        if (name != null && !name.contains("\uFFFD")) {
          names.add(name);
        }
      }
      return new ArrayList<>(names);
    } finally {
      Native.freeinfo(list);
    }
  }

  /**
   * The entry on {@code interfaces[0]} (or any), preferring the exact provider name asked for.
   *
   * @param list the list {@link #query} returned
   * @param interfaces the configured interfaces; only the first counts
   * @param providerName the provider name the policy asked for
   * @return the entry, inside {@code list}
   * @throws DmaException of kind FABRIC when no entry is on that domain
   */
  static long choose(long list, List<String> interfaces, String providerName) {
    String wanted = interfaces.isEmpty() ? null : interfaces.getFirst();
    long first = 0;
    for (long entry = list; entry != 0; entry = Native.word(entry + Abi.INFO_NEXT)) {
      if (wanted != null && !wanted.equals(domainName(entry))) {
        continue;
      }
      if (providerName.equals(providerName(entry))) {
        return entry;
      }
      if (first == 0) {
        first = entry;
      }
    }
    if (first == 0) {
      throw DmaException.fabric(
          DmaException.Reason.PROVIDER_UNAVAILABLE, "no fabric domain named \"" + wanted + "\"");
    }
    return first;
  }

  /** {@code domain_attr->name} of an entry, or null. */
  private static @Nullable String domainName(long entry) {
    long domainAttr = Native.word(entry + Abi.INFO_DOMAIN_ATTR);
    return domainAttr == 0 ? null : Native.string(Native.word(domainAttr + Abi.DOMAIN_ATTR_NAME));
  }

  /**
   * {@code fabric_attr->prov_name} of an entry.
   *
   * @param entry an {@code fi_info} entry
   * @return the name, or null
   */
  static @Nullable String providerName(long entry) {
    long fabricAttr = Native.word(entry + Abi.INFO_FABRIC_ATTR);
    return fabricAttr == 0
        ? null
        : Native.string(Native.word(fabricAttr + Abi.FABRIC_ATTR_PROV_NAME));
  }
}
