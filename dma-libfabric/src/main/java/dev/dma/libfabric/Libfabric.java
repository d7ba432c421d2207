package dev.dma.libfabric;

import static java.lang.foreign.ValueLayout.JAVA_LONG;

import dev.dma.api.DmaException;
import dev.dma.libfabric.internal.Abi;
import dev.dma.libfabric.internal.Native;
import dev.dma.spi.Availability;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;

/**
 * The loaded libfabric library: whether it is usable here, its version, and what it offers.
 *
 * <p>Loading happens once, on first use of this class or of {@link LibfabricEndpoint}, and never
 * throws: a missing library makes {@link #availability()} unavailable with the reason. The library
 * is {@code libfabric.so.1}, or the name or absolute path in the system property {@value
 * #LIBRARY_PROPERTY} (for example AWS's {@code /opt/amazon/efa/lib64/libfabric.so.1}), or when that
 * is unset in the environment variable {@value #LIBRARY_ENVIRONMENT}. Loading keeps the JVM's
 * signal handlers (see the package documentation). Thread-safe and stateless.
 */
public final class Libfabric {
  private Libfabric() {}

  /** The system property that names another libfabric library or path to load. */
  public static final String LIBRARY_PROPERTY = Native.LIBRARY_PROPERTY;

  /**
   * The environment variable that names another libfabric library or path to load when {@link
   * #LIBRARY_PROPERTY} is unset; child processes inherit it.
   */
  public static final String LIBRARY_ENVIRONMENT = Native.LIBRARY_ENVIRONMENT;

  /**
   * The file libfabric was loaded from (symbolic links resolved), to tell which of several
   * installed copies is in use.
   *
   * @return the path, or the requested name when libfabric is unavailable
   */
  public static String libraryFile() {
    return Native.LIBRARY_FILE;
  }

  /**
   * Whether libfabric loaded, and why not.
   *
   * @return the availability, computed once
   */
  public static Availability availability() {
    String reason = Native.unavailableReason();
    return reason == null ? Availability.AVAILABLE : Availability.unavailable(reason);
  }

  /**
   * {@code fi_version()} of the loaded library, packed as {@code major << 16 | minor}.
   *
   * @return the version, or 0 when libfabric is unavailable
   */
  public static int version() {
    return Native.LIBRARY_VERSION;
  }

  /**
   * What the loaded library's shm does with a write or read whose remote key, range or access the
   * target refuses, and which defence dma has there (one line, for {@code dma-bench info}); see
   * {@link ShmQuirks}' table and {@link Quirks#shmReportsRefusedRmaAsDone}.
   *
   * @param libraryVersion a packed {@code fi_version()}, for example {@link #version()}
   * @return the line
   */
  public static String shmRefusalDefence(int libraryVersion) {
    if (Quirks.shmReportsRefusedRmaAsDone("shm", libraryVersion)) {
      return "shm (2.5+) reports refused writes as done: every write is checked before its"
          + " success is delivered (a fetching atomic on its first and last bytes; a refused write"
          + " fails FI_EACCES); reads are not checked against keys or bounds (with CMA the"
          + " initiator copies the target's bytes itself)";
    }
    if (libraryVersion >> 16 >= 2) {
      return "shm (2.0 to 2.4; checked on 2.1) never completes a refused write: the completion"
          + " deadline fails it; reads are not checked against keys or bounds (with CMA the"
          + " initiator copies the target's bytes itself)";
    }
    return "shm (1.x) never completes a refused write: the completion deadline fails it; reads are"
        + " not checked against keys or bounds (the target's bytes are read)";
  }

  /**
   * The API version this binding asks for: the smaller of the newest version dma has been verified
   * against (2.6) and the library's version (see {@code Native.apiVersionFor} for what each version
   * gate changes).
   *
   * @return the packed version, or 0 when libfabric is unavailable
   */
  public static int apiVersion() {
    return Native.API_VERSION;
  }

  /**
   * The major version of the loaded library (1 or 2).
   *
   * @return the major version, or 0 when libfabric is unavailable
   */
  public static int majorVersion() {
    return Native.LIBRARY_VERSION >>> 16;
  }

  /**
   * {@code major.minor} of a packed version.
   *
   * @param version a packed {@code FI_VERSION}
   * @return the text
   */
  public static String versionText(int version) {
    return Native.versionText(version);
  }

  /**
   * The file libfabric was loaded from.
   *
   * @return the path (or the requested name when the loader cannot say), null when unavailable
   */
  public static String libraryPath() {
    return Native.libraryPath();
  }

  /**
   * The providers this library holds, whether or not any device answers for them: {@code
   * fi_getinfo} with {@code FI_PROV_ATTR_ONLY}, as {@code fi_info -l} lists them. Unlike {@link
   * #providerNames()}, a provider built in but with no device here (efa on a host without an EFA
   * NIC) is listed; a provider this build lacks is not.
   *
   * @return the names in libfabric's order, without duplicates
   * @throws DmaException of kind FABRIC when libfabric is unavailable or the query fails
   */
  public static List<String> builtInProviders() {
    Native.require();
    try (Arena arena = Arena.ofConfined()) {
      MemorySegment out = arena.allocate(JAVA_LONG);
      int rc = Native.getinfo(0, Abi.FI_PROV_ATTR_ONLY, 0, out.address());
      if (rc != 0) {
        throw DmaException.fabric(Native.failure("fi_getinfo(FI_PROV_ATTR_ONLY)", rc));
      }
      long list = out.get(JAVA_LONG, 0);
      try {
        Set<String> names = new LinkedHashSet<>();
        for (long entry = list; entry != 0; entry = Native.word(entry + Abi.INFO_NEXT)) {
          String name = FabricQuery.providerName(entry);
          if (name != null) {
            names.add(name);
          }
        }
        return new ArrayList<>(names);
      } finally {
        Native.freeinfo(list);
      }
    }
  }

  /**
   * Whether {@code fi_getinfo}, asked exactly as {@link LibfabricEndpoint} asks ({@code FI_EP_RDM},
   * {@code FI_RMA} with remote read and write, the policy's mode and {@code mr_mode} hints, no
   * source node), returns an entry of provider {@code policy.providerName()} itself: layered
   * answers do not count. On libfabric 1.17 the hint {@code tcp} is answered only by {@code
   * tcp;ofi_rxm} (tcp alone is {@code FI_EP_MSG}), so this is false there and true from 1.18 on,
   * where tcp serves RDM.
   *
   * @param policy the provider and hints
   * @return whether that provider serves RDM with RMA here
   */
  public static boolean serves(EndpointPolicy policy) {
    if (!availability().available()) {
      return false;
    }
    long list;
    try {
      list = FabricQuery.query(policy, null);
    } catch (DmaException noMatch) {
      return false;
    }
    try {
      for (long entry = list; entry != 0; entry = Native.word(entry + Abi.INFO_NEXT)) {
        if (policy.providerName().equals(FabricQuery.providerName(entry))) {
          return true;
        }
      }
      return false;
    } finally {
      Native.freeinfo(list);
    }
  }

  /**
   * The provider names {@code fi_getinfo} lists with no hints, in its order, without duplicates
   * (for example {@code tcp;ofi_rxm}, {@code shm}, {@code net}).
   *
   * @return the names
   * @throws DmaException of kind FABRIC when libfabric is unavailable or the query fails
   */
  public static List<String> providerNames() {
    Native.require();
    try (Arena arena = Arena.ofConfined()) {
      MemorySegment out = arena.allocate(JAVA_LONG);
      int rc = Native.getinfo(0, 0, 0, out.address());
      if (rc != 0) {
        throw DmaException.fabric(Native.failure("fi_getinfo", rc));
      }
      long list = out.get(JAVA_LONG, 0);
      try {
        Set<String> names = new LinkedHashSet<>();
        for (long entry = list; entry != 0; entry = Native.word(entry + Abi.INFO_NEXT)) {
          long fabricAttr = Native.word(entry + Abi.INFO_FABRIC_ATTR);
          String name =
              fabricAttr == 0
                  ? null
                  : Native.string(Native.word(fabricAttr + Abi.FABRIC_ATTR_PROV_NAME));
          if (name != null) {
            names.add(name);
          }
        }
        return new ArrayList<>(names);
      } finally {
        Native.freeinfo(list);
      }
    }
  }
}
