package dev.dma.libfabric;

import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import dev.dma.api.DmaException;
import dev.dma.libfabric.internal.Abi;
import dev.dma.libfabric.internal.Native;

/**
 * One {@code fi_info} entry allocated by libfabric itself ({@code fi_dupinfo}), never by Java: the
 * hints of an {@link EndpointPolicy} exactly as {@link LibfabricEndpoint} builds them for {@code
 * fi_getinfo}, or an entry filled with documented facts so the decisions taken on a returned entry
 * can be tested without the hardware that would return it.
 *
 * <p>Strings written into the entry come from libc {@code strdup}, because {@code fi_freeinfo}
 * {@code free()}s every string it finds.
 *
 * <p>Threads and ownership: not thread-safe; the creator owns the entry and frees it with {@link
 * #close()} (idempotent). The address handed out by {@link #address()} is valid until then.
 */
public final class InfoEntry implements AutoCloseable {
  /**
   * The capabilities every endpoint asks for: {@code FI_MSG | FI_RMA | FI_READ | FI_WRITE |
   * FI_REMOTE_READ | FI_REMOTE_WRITE}.
   */
  public static final long HINT_CAPS =
      Abi.FI_MSG
          | Abi.FI_RMA
          | Abi.FI_READ
          | Abi.FI_WRITE
          | Abi.FI_REMOTE_READ
          | Abi.FI_REMOTE_WRITE;

  private long address;

  private InfoEntry(long address) {
    this.address = address;
  }

  /**
   * A blank entry with every attribute struct allocated, as {@code fi_allocinfo} gives.
   *
   * @return the entry, owned by the caller
   * @throws DmaException of kind FABRIC when libfabric is unavailable, or {@code fi_allocinfo
   *     failed}
   */
  public static InfoEntry blank() {
    Native.require();
    long info = Native.dupinfo(0);
    if (info == 0) {
      throw DmaException.fabric("fi_allocinfo failed");
    }
    return new InfoEntry(info);
  }

  /**
   * The {@code fi_getinfo} hints of a policy (SEED-SPEC 5.1): caps {@link #HINT_CAPS}, {@code
   * FI_EP_RDM}, the policy's mode and {@code mr_mode}, its provider name, and its fabric name when
   * it pins one; address format, progress, threading and domain left unset.
   *
   * @param policy the policy
   * @return the hints, owned by the caller
   */
  public static InfoEntry hints(EndpointPolicy policy) {
    InfoEntry hints = blank();
    try {
      hints.caps(HINT_CAPS).mode(policy.hintMode()).endpointType(Abi.FI_EP_RDM);
      hints.mrMode(policy.hintMrMode()).providerName(policy.providerName());
      if (policy.fabricName() != null) {
        hints.fabricName(policy.fabricName());
      }
      return hints;
    } catch (RuntimeException | Error failed) {
      hints.close();
      throw failed;
    }
  }

  /**
   * A blank entry filled with these facts (every field of {@link InfoFacts}; empty names stay
   * null).
   *
   * @param facts the facts
   * @return the entry, owned by the caller
   */
  public static InfoEntry of(InfoFacts facts) {
    InfoEntry entry = blank();
    try {
      entry.caps(facts.caps()).mode(facts.mode()).addrFormat(facts.addrFormat());
      entry.endpointType(facts.endpointType()).mrMode(facts.mrMode());
      entry.threading(facts.threading()).dataProgress(facts.dataProgress());
      entry.txSize(facts.txSize()).injectSize(facts.injectSize());
      if (!facts.providerName().isEmpty()) {
        entry.providerName(facts.providerName());
      }
      if (!facts.fabricName().isEmpty()) {
        entry.fabricName(facts.fabricName());
      }
      if (!facts.domainName().isEmpty()) {
        entry.domainName(facts.domainName());
      }
      return entry;
    } catch (RuntimeException | Error failed) {
      entry.close();
      throw failed;
    }
  }

  /**
   * A deep copy made by libfabric ({@code fi_dupinfo}), as {@link LibfabricEndpoint} keeps of the
   * entry it chose.
   *
   * @return the copy, owned by the caller
   */
  public InfoEntry copy() {
    long copy = Native.dupinfo(live());
    if (copy == 0) {
      throw DmaException.fabric("fi_dupinfo failed");
    }
    return new InfoEntry(copy);
  }

  /**
   * The entry's native address, valid until {@link #close()}.
   *
   * @return the address
   */
  public long address() {
    return live();
  }

  /**
   * Reads the entry's facts.
   *
   * @return the facts
   */
  public InfoFacts facts() {
    return InfoFacts.read(live());
  }

  /**
   * Sets {@code caps}.
   *
   * @param value the bits
   * @return this entry
   */
  public InfoEntry caps(long value) {
    Native.MEMORY.set(JAVA_LONG, live() + Abi.INFO_CAPS, value);
    return this;
  }

  /**
   * Sets {@code mode}.
   *
   * @param value the bits
   * @return this entry
   */
  public InfoEntry mode(long value) {
    Native.MEMORY.set(JAVA_LONG, live() + Abi.INFO_MODE, value);
    return this;
  }

  /**
   * Sets {@code addr_format}.
   *
   * @param value the format
   * @return this entry
   */
  public InfoEntry addrFormat(int value) {
    Native.MEMORY.set(JAVA_INT, live() + Abi.INFO_ADDR_FORMAT, value);
    return this;
  }

  /**
   * Sets {@code ep_attr->type}.
   *
   * @param value the endpoint type
   * @return this entry
   */
  public InfoEntry endpointType(int value) {
    Native.MEMORY.set(JAVA_INT, attr(Abi.INFO_EP_ATTR) + Abi.EP_ATTR_TYPE, value);
    return this;
  }

  /**
   * Sets {@code domain_attr->mr_mode}.
   *
   * @param value the bits
   * @return this entry
   */
  public InfoEntry mrMode(int value) {
    Native.MEMORY.set(JAVA_INT, attr(Abi.INFO_DOMAIN_ATTR) + Abi.DOMAIN_ATTR_MR_MODE, value);
    return this;
  }

  /**
   * Sets {@code domain_attr->threading}.
   *
   * @param value the threading model
   * @return this entry
   */
  public InfoEntry threading(int value) {
    Native.MEMORY.set(JAVA_INT, attr(Abi.INFO_DOMAIN_ATTR) + Abi.DOMAIN_ATTR_THREADING, value);
    return this;
  }

  /**
   * Sets {@code domain_attr->data_progress}.
   *
   * @param value the progress model
   * @return this entry
   */
  public InfoEntry dataProgress(int value) {
    Native.MEMORY.set(JAVA_INT, attr(Abi.INFO_DOMAIN_ATTR) + Abi.DOMAIN_ATTR_DATA_PROGRESS, value);
    return this;
  }

  /**
   * Sets {@code tx_attr->size}.
   *
   * @param value the transmit depth
   * @return this entry
   */
  public InfoEntry txSize(long value) {
    Native.MEMORY.set(JAVA_LONG, attr(Abi.INFO_TX_ATTR) + Abi.TX_ATTR_SIZE, value);
    return this;
  }

  /**
   * Sets {@code tx_attr->inject_size}.
   *
   * @param value bytes
   * @return this entry
   */
  public InfoEntry injectSize(long value) {
    Native.MEMORY.set(JAVA_LONG, attr(Abi.INFO_TX_ATTR) + Abi.TX_ATTR_INJECT_SIZE, value);
    return this;
  }

  /**
   * Sets {@code fabric_attr->prov_name}.
   *
   * @param value the name, without NUL characters
   * @return this entry
   */
  public InfoEntry providerName(String value) {
    replaceString(attr(Abi.INFO_FABRIC_ATTR) + Abi.FABRIC_ATTR_PROV_NAME, value);
    return this;
  }

  /**
   * Sets {@code fabric_attr->name}.
   *
   * @param value the name, without NUL characters
   * @return this entry
   */
  public InfoEntry fabricName(String value) {
    replaceString(attr(Abi.INFO_FABRIC_ATTR) + Abi.FABRIC_ATTR_NAME, value);
    return this;
  }

  /**
   * Sets {@code domain_attr->name}.
   *
   * @param value the name, without NUL characters
   * @return this entry
   */
  public InfoEntry domainName(String value) {
    replaceString(attr(Abi.INFO_DOMAIN_ATTR) + Abi.DOMAIN_ATTR_NAME, value);
    return this;
  }

  /** Frees the entry with {@code fi_freeinfo}; idempotent. */
  @Override
  public void close() {
    long info = address;
    address = 0;
    Native.freeinfo(info);
  }

  private long live() {
    if (address == 0) {
      throw new IllegalStateException("the fi_info entry is freed");
    }
    return address;
  }

  private long attr(long field) {
    long attr = Native.word(live() + field);
    if (attr == 0) {
      throw new IllegalStateException(
          "the fi_info entry has no attribute struct at offset " + field);
    }
    return attr;
  }

  private static void replaceString(long field, String value) {
    if (value == null || value.indexOf('\0') >= 0) {
      throw new IllegalArgumentException("invalid name: " + value);
    }
    long old = Native.word(field);
    // fi_freeinfo free()s it later, so the new value must come from malloc; the old one is ours.
    Native.MEMORY.set(JAVA_LONG, field, Native.strdup(value));
    Native.free(old);
  }
}
