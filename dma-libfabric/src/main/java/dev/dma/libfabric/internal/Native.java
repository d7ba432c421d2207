package dev.dma.libfabric.internal;

import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.VarHandle;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * The hand-written libfabric binding: library loading (with the signal-handler guard), one
 * address-less downcall handle per C signature, and small helpers over raw addresses.
 *
 * <p>Pointers cross the boundary as {@code long}s (an x86_64/AArch64 pointer travels in the same
 * integer register as a 64-bit integer), so no call on the data path allocates a {@link
 * MemorySegment}; only the target function is a segment, created once per object when its ops table
 * is read. libfabric's {@code static inline} wrappers are reproduced by reading the ops table from
 * the object and calling the function pointer through these handles.
 *
 * <p>Class initialization never throws: when {@code libfabric.so.1} cannot be loaded, {@link
 * #unavailableReason()} says why and every libfabric call site checks {@link #require()} first.
 *
 * <p>Thread-safe: everything here is immutable after class initialization. Internal: not exported.
 */
public final class Native {
  private Native() {}

  private static final Linker LINKER = Linker.nativeLinker();

  /**
   * All of memory, for reading and writing native structs by address. Bounds are the caller's
   * responsibility, as in C.
   */
  @SuppressWarnings("restricted")
  public static final MemorySegment MEMORY = MemorySegment.NULL.reinterpret(Long.MAX_VALUE);

  // ---- one handle per C signature; the first argument is always the function pointer ----

  /** {@code int f(void*, void*, void**, void*)}: domain, cq_open, av_open, endpoint, av_remove. */
  public static final MethodHandle I_LLLL =
      handle(FunctionDescriptor.of(JAVA_INT, JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_LONG));

  /** {@code int f(void*, void*, void*)}: fi_fabric, fi_getname, fi_ep_bind. */
  public static final MethodHandle I_LLL =
      handle(FunctionDescriptor.of(JAVA_INT, JAVA_LONG, JAVA_LONG, JAVA_LONG));

  /** {@code int f(void*, void*)}: dladdr. */
  public static final MethodHandle I_LL =
      handle(FunctionDescriptor.of(JAVA_INT, JAVA_LONG, JAVA_LONG));

  /** {@code int f(void*)}: fi_close, unsetenv. */
  public static final MethodHandle I_L = handle(FunctionDescriptor.of(JAVA_INT, JAVA_LONG));

  /** {@code int f(void*, int, void*)}: fi_control (fi_enable). */
  public static final MethodHandle I_LIL =
      handle(FunctionDescriptor.of(JAVA_INT, JAVA_LONG, JAVA_INT, JAVA_LONG));

  /** {@code int f(void*, void*, int)}: setenv. */
  public static final MethodHandle I_LLI =
      handle(FunctionDescriptor.of(JAVA_INT, JAVA_LONG, JAVA_LONG, JAVA_INT));

  /** {@code int f(int, void*, void*)}: sigaction. */
  public static final MethodHandle I_ILL =
      handle(FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_LONG, JAVA_LONG));

  /** {@code int f(uint32_t, char*, char*, uint64_t, fi_info*, fi_info**)}: fi_getinfo. */
  public static final MethodHandle I_ILLLLL =
      handle(
          FunctionDescriptor.of(
              JAVA_INT, JAVA_INT, JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_LONG));

  /** {@code int f(void*, void*, size_t, fi_addr_t*, uint64_t, void*)}: fi_av_insert. */
  public static final MethodHandle I_LLLLLL =
      handle(
          FunctionDescriptor.of(
              JAVA_INT, JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_LONG));

  /** {@code int f(fid*, void*, size_t, u64, u64, u64, u64, fid_mr**, void*)}: fi_mr_reg. */
  public static final MethodHandle I_LLLLLLLLL =
      handle(
          FunctionDescriptor.of(
              JAVA_INT, JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_LONG,
              JAVA_LONG, JAVA_LONG));

  /** {@code void f(void*)}: fi_freeinfo, free. */
  public static final MethodHandle V_L = handle(FunctionDescriptor.ofVoid(JAVA_LONG));

  /** {@code void* f(void*)}: fi_dupinfo, strdup. */
  public static final MethodHandle L_L = handle(FunctionDescriptor.of(JAVA_LONG, JAVA_LONG));

  /** {@code uint32_t f(void)}: fi_version. */
  public static final MethodHandle I_ = handle(FunctionDescriptor.of(JAVA_INT));

  /** {@code char* f(int)}: fi_strerror. */
  public static final MethodHandle L_I = handle(FunctionDescriptor.of(JAVA_LONG, JAVA_INT));

  /** {@code char* f(void*, int, void*, char*, size_t)}: fi_cq_strerror. */
  public static final MethodHandle L_LILLL =
      handle(
          FunctionDescriptor.of(JAVA_LONG, JAVA_LONG, JAVA_INT, JAVA_LONG, JAVA_LONG, JAVA_LONG));

  /**
   * {@code ssize_t f(void*, void*, uint64_t)}: fi_writemsg, fi_cq_read, fi_cq_readerr. Critical:
   * these return at once (a post or a non-blocking queue read), and critical linkage drops the
   * thread-state transition from the hottest calls.
   */
  public static final MethodHandle L_LLL_CRITICAL =
      handle(
          FunctionDescriptor.of(JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_LONG),
          Linker.Option.critical(false));

  /**
   * {@code ssize_t f(ep, buf, len, desc, fi_addr, addr, key, context)}: fi_read. Critical as above.
   */
  public static final MethodHandle L_LLLLLLLL_CRITICAL =
      handle(
          FunctionDescriptor.of(
              JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_LONG,
              JAVA_LONG, JAVA_LONG),
          Linker.Option.critical(false));

  /**
   * {@code ssize_t f(ep, msg, resultv, result_desc, result_count, flags)}: fi_fetch_atomicmsg.
   * Critical as above.
   */
  public static final MethodHandle L_LLLLLL_CRITICAL =
      handle(
          FunctionDescriptor.of(
              JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_LONG),
          Linker.Option.critical(false));

  // ---- libc ----

  private static final MemorySegment SETENV = libc("setenv");
  private static final MemorySegment UNSETENV = libc("unsetenv");
  private static final MemorySegment SIGACTION = libc("sigaction");
  private static final MemorySegment STRDUP = libc("strdup");
  private static final MemorySegment FREE = libc("free");
  private static final MemorySegment PPOLL = libc("ppoll");
  private static final MemorySegment EVENTFD = libc("eventfd");
  private static final MemorySegment WRITE = libc("write");
  private static final MemorySegment READ = libc("read");
  private static final MemorySegment CLOSE_FD = libc("close");
  private static final MemorySegment PROCESS_VM_READV = libc("process_vm_readv");
  private static final MemorySegment MMAP = libc("mmap");
  private static final MemorySegment MUNMAP = libc("munmap");
  private static final MemorySegment MADVISE = libc("madvise");

  /** {@code void* f(void*, size_t, int, int, int, off_t)}: mmap. */
  private static final MethodHandle L_LLIIIL =
      handle(
          FunctionDescriptor.of(
              JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_INT, JAVA_INT, JAVA_INT, JAVA_LONG));

  /** The size of a transparent huge page on x86_64 and AArch64 with 4 KiB pages. */
  public static final long HUGE_PAGE_BYTES = 2L << 20;

  /**
   * {@code ssize_t f(pid_t, const struct iovec*, unsigned long, const struct iovec*, unsigned long,
   * unsigned long)}: process_vm_readv, with errno captured.
   */
  private static final MethodHandle L_ILLLLL_ERRNO =
      handle(
          FunctionDescriptor.of(
              JAVA_LONG, JAVA_INT, JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_LONG),
          Linker.Option.captureCallState("errno"));

  private static final VarHandle CAPTURED_ERRNO =
      Linker.Option.captureStateLayout().varHandle(MemoryLayout.PathElement.groupElement("errno"));

  /** {@code EFAULT} (asm-generic/errno-base.h; the same on every Linux architecture). */
  private static final int EFAULT = 14;

  /** {@code int f(int, int)}: eventfd. */
  private static final MethodHandle I_II =
      handle(FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_INT));

  /** {@code ssize_t f(int, void*, size_t)}: read, write. */
  private static final MethodHandle L_ILL =
      handle(FunctionDescriptor.of(JAVA_LONG, JAVA_INT, JAVA_LONG, JAVA_LONG));

  /** {@code int f(int)}: close. */
  private static final MethodHandle I_I = handle(FunctionDescriptor.of(JAVA_INT, JAVA_INT));

  /** {@code EFD_NONBLOCK | EFD_CLOEXEC} (sys/eventfd.h, Linux x86_64 and AArch64). */
  private static final int EFD_NONBLOCK_CLOEXEC = 0x800 | 0x80000;

  /** {@code POLLIN} (poll.h; the same value on every Linux architecture). */
  public static final short POLLIN = 1;

  /** {@code dladdr}, in libc since glibc 2.34; NULL where it is not (the path is then unknown). */
  private static final MemorySegment DLADDR =
      LINKER.defaultLookup().find("dladdr").orElse(MemorySegment.NULL);

  /** The signals whose handlers the JVM relies on and libraries have been seen to replace. */
  private static final int[] GUARDED_SIGNALS = {Abi.SIGSEGV, Abi.SIGBUS, Abi.SIGILL, Abi.SIGFPE};

  // ---- libfabric ----

  /**
   * The efa provider's switch for handing peers on the same host to its own shm endpoint, which dma
   * sets to 0 in its process before libfabric reads it, unless it is already set. efa posts a
   * same-host write to shm with dma's flags ({@code fi_writemsg(shm_ep, msg, flags)}, 2.1 to 2.6),
   * so that write is a command in the peer's queue naming this process's memory, which the peer
   * copies whenever it gets to it, after a failure was delivered too; dma's own shm bounce buffers
   * do not reach inside efa. With it off, same-host peers go through the EFA device like any other.
   */
  public static final String EFA_SHM_ENVIRONMENT = "FI_EFA_ENABLE_SHM_TRANSFER";

  /** The library loaded when {@link #LIBRARY_PROPERTY} is not set: the SONAME of 1.x and 2.x. */
  public static final String DEFAULT_LIBRARY = "libfabric.so.1";

  /**
   * System property naming the libfabric library to load instead of {@link #DEFAULT_LIBRARY}: a
   * name the dynamic loader searches for, or an absolute path (for example AWS's {@code
   * /opt/amazon/efa/lib64/libfabric.so.1}). Read once, when the binding loads.
   */
  public static final String LIBRARY_PROPERTY = "dma.libfabric.library";

  /**
   * Environment variable naming the libfabric library to load when {@link #LIBRARY_PROPERTY} is not
   * set. An environment variable, not only a property, because every process a JVM starts inherits
   * it: child JVMs of tests and Maven builds of downstream fixtures load the same library as the
   * build that started them (CI's libfabric 2.1 leg sets it once).
   */
  public static final String LIBRARY_ENVIRONMENT = "DMA_LIBFABRIC";

  /** Why libfabric is unusable, or null when it loaded. */
  private static final String UNAVAILABLE;

  /** {@code fi_getinfo}. */
  public static final MemorySegment FI_GETINFO;

  /** {@code fi_freeinfo}. */
  public static final MemorySegment FI_FREEINFO;

  /** {@code fi_dupinfo}. */
  public static final MemorySegment FI_DUPINFO;

  /** {@code fi_fabric}. */
  public static final MemorySegment FI_FABRIC;

  /** {@code fi_strerror}. */
  public static final MemorySegment FI_STRERROR;

  /** {@code fi_version()} of the loaded library, or 0 when it is unavailable. */
  public static final int LIBRARY_VERSION;

  /**
   * The file the dynamic loader mapped for libfabric (symbolic links resolved), or the requested
   * name when it is unavailable or the mapping could not be read.
   */
  public static final String LIBRARY_FILE;

  /**
   * The API version every call asks for: {@link #apiVersionFor apiVersionFor(fi_version())}, the
   * newest version dma has been verified against ({@code FI_VERSION(2, 6)}) that the loaded library
   * supports. Never above the library's: {@code fi_getinfo} refuses a newer API with {@code
   * -FI_ENOSYS} (and skips any provider built for an older one).
   */
  public static final int API_VERSION;

  /** The newest API version dma has run its suites against: libfabric 2.6. */
  public static final int NEWEST_VERIFIED_API = Abi.FI_VERSION_2_6;

  /**
   * The API version dma asks a library of version {@code libraryVersion} for: {@code
   * min(libraryVersion, 2.6)}. So 1.17 gets 1.17, 2.1 gets 2.1, 2.6 gets 2.6, and a later library
   * gets 2.6 until dma is verified against it.
   *
   * <p>What the requested version switches, from the {@code FI_VERSION_GE}/{@code FI_VERSION_LT}
   * checks on the requested version (or {@code fabric_attr->api_version}) in the 2.1.0 and 2.6.0
   * sources ({@code src/}, {@code prov/util}, {@code prov/tcp}, {@code prov/rxm}, {@code prov/shm},
   * {@code prov/efa}, {@code prov/sockets}, {@code include/}) and man pages. The gates at or below
   * 1.17 are on for every library dma supports and are not listed.
   *
   * <ul>
   *   <li>Any version: {@code fi_getinfo} answers {@code -FI_ENOSYS} when it is newer than {@code
   *       fi_version()} ({@code src/fabric.c}), and skips every provider whose own {@code
   *       fi_version} is older than it; built-in providers carry their library's version ({@code
   *       OFI_VERSION_LATEST}), so only an external provider built for an older libfabric is
   *       affected. Every returned {@code fabric_attr->api_version}, and so the fabric the
   *       providers see, carries the requested version.
   *   <li>1.18 (efa only): CUDA API use permitted, {@code FI_OPT_EFA_USE_DEVICE_RDMA} through
   *       {@code fi_setopt}, device RDMA on by default where the hardware has it, {@code FI_HMEM}
   *       offered with CUDA. tcp, shm: nothing.
   *   <li>1.19 (util MR map: tcp, shm, rxm, efa): {@code hmem_data} of an {@code fi_mr_attr} is
   *       copied. dma registers host memory only.
   *   <li>1.20: {@code fi_cq_readerr} copies the 88-byte {@code fi_cq_err_entry} with {@code
   *       src_addr} (util, {@code include/ofi_util.h}; see {@code LibfabricEndpoint}); {@code
   *       FI_AV_AUTH_KEY} and {@code max_ep_auth_key} are checked in the domain and endpoint
   *       attributes (util); {@code FI_MR_DMABUF} is accepted (efa, util MR map). dma sets no auth
   *       key and registers host memory.
   *   <li>1.22 and 2.0 (util MR map): {@code page_size} (1.22), {@code base_mr} and {@code
   *       sub_mr_cnt} (2.0) of an {@code fi_mr_attr} are copied. dma's {@code fi_mr_reg} passes no
   *       attribute struct.
   *   <li>2.1 to 2.4: no gate in 2.1.0's or 2.6.0's sources (2.1 asks 2.1 and behaves as 2.0).
   *   <li>2.5: {@code fi_domain_attr} has {@code max_cntr_value}/{@code max_err_cntr_value}: util
   *       ({@code ofi_check_domain_attr}: tcp, rxm, shm) refuses hints that ask more than a
   *       provider's static limit, which tcp, rxm and shm leave unset (0: no check), and reports
   *       {@code UINT64_MAX} either way; efa reports its device's counter limits only from 2.5. dma
   *       opens no counters and leaves both hints zero, so on tcp and shm nothing observable
   *       changes; on efa, only the reported limits.
   *   <li>2.6: no gate of its own.
   * </ul>
   *
   * <p>So asking for 2.6 rather than 2.0 changes nothing dma uses on tcp, shm or sockets, and on
   * efa only the counter limits it reports; the reason to ask is that behaviour gated on newer API
   * versions is on where dma has been verified with it.
   *
   * @param libraryVersion the library's packed {@code fi_version()}
   * @return the packed API version to request
   */
  public static int apiVersionFor(int libraryVersion) {
    return Math.min(NEWEST_VERIFIED_API, libraryVersion);
  }

  static {
    String reason = null;
    MemorySegment getinfo = MemorySegment.NULL;
    MemorySegment freeinfo = MemorySegment.NULL;
    MemorySegment dupinfo = MemorySegment.NULL;
    MemorySegment fabric = MemorySegment.NULL;
    MemorySegment strerror = MemorySegment.NULL;
    int version = 0;
    try {
      SymbolLookup library = load();
      getinfo = symbol(library, "fi_getinfo");
      freeinfo = symbol(library, "fi_freeinfo");
      dupinfo = symbol(library, "fi_dupinfo");
      fabric = symbol(library, "fi_fabric");
      strerror = symbol(library, "fi_strerror");
      version = (int) I_.invokeExact(symbol(library, "fi_version"));
      if ((version >>> 16) < 1) {
        reason =
            "libfabric.so.1 reports version " + versionText(version) + ": dma needs 1.x or 2.x";
      }
    } catch (LibraryMissing missing) {
      reason = missing.getMessage();
    } catch (IllegalCallerException denied) {
      reason =
          "native access to libfabric is denied: run java with --enable-native-access=ALL-UNNAMED"
              + " (or =dev.dma.libfabric on the module path) ("
              + denied.getMessage()
              + ")";
    } catch (Throwable failed) {
      reason = "libfabric.so.1 could not be loaded: " + failed;
    }
    UNAVAILABLE = reason;
    FI_GETINFO = getinfo;
    FI_FREEINFO = freeinfo;
    FI_DUPINFO = dupinfo;
    FI_FABRIC = fabric;
    FI_STRERROR = strerror;
    LIBRARY_VERSION = reason == null ? version : 0;
    LIBRARY_FILE = reason == null ? mappedFile(requestedLibrary()) : requestedLibrary();
    API_VERSION = reason == null ? apiVersionFor(version) : 0;
  }

  /** A failure to find the library or one of its symbols, with the sentence to show the user. */
  private static final class LibraryMissing extends Exception {
    private static final long serialVersionUID = 1L;

    LibraryMissing(String message) {
      super(message, null, false, false);
    }
  }

  @SuppressWarnings("restricted")
  private static SymbolLookup load() throws Throwable {
    // libinfinipath (linked by Debian's psm provider) installs a SIGSEGV handler in its ELF
    // constructor that exit(1)s on the first implicit null check in JIT code; these variables
    // make it (and libpsm2) skip that. The sigaction save/restore below is the second line.
    try (Arena arena = Arena.ofConfined()) {
      int ignored =
          (int)
              I_LLI.invokeExact(
                  SETENV,
                  arena.allocateFrom("IPATH_NO_BACKTRACE").address(),
                  arena.allocateFrom("1").address(),
                  1);
      ignored = (int) I_L.invokeExact(UNSETENV, arena.allocateFrom("HFI_BACKTRACE").address());
      // Before the first fi_getinfo, when efa reads its parameters; overwrite 0, so a value the
      // user set stands. See EFA_SHM_ENVIRONMENT.
      ignored =
          (int)
              I_LLI.invokeExact(
                  SETENV,
                  arena.allocateFrom(EFA_SHM_ENVIRONMENT).address(),
                  arena.allocateFrom("0").address(),
                  0);
    }
    String name = requestedLibrary();
    try (var _ = SignalGuard.save()) {
      return SymbolLookup.libraryLookup(name, Arena.global());
    } catch (IllegalArgumentException notFound) {
      throw new LibraryMissing(
          DEFAULT_LIBRARY.equals(name)
              ? "libfabric.so.1 was not found: install it (Debian: apt-get install libfabric1)"
              : name + " was not found (it is named by " + requestSource() + ")");
    }
  }

  /**
   * The library to load: {@link #LIBRARY_PROPERTY}, else {@link #LIBRARY_ENVIRONMENT}, else {@link
   * #DEFAULT_LIBRARY}. Empty values count as unset.
   *
   * @return a name for the dynamic loader or an absolute path
   */
  public static String requestedLibrary() {
    String property = System.getProperty(LIBRARY_PROPERTY, "");
    if (!property.isEmpty()) {
      return property;
    }
    String environment = System.getenv(LIBRARY_ENVIRONMENT);
    return environment == null || environment.isEmpty() ? DEFAULT_LIBRARY : environment;
  }

  /** Where {@link #requestedLibrary()} came from, as the user would write it. */
  private static String requestSource() {
    return System.getProperty(LIBRARY_PROPERTY, "").isEmpty()
        ? "the environment variable " + LIBRARY_ENVIRONMENT
        : "-D" + LIBRARY_PROPERTY;
  }

  /**
   * The file behind the loaded library, from {@code /proc/self/maps}: a name like {@code
   * libfabric.so.1} says nothing about which of several installed copies the loader picked, and the
   * mapping does. The first mapping whose file name starts with {@code libfabric.so} wins (dma
   * loads one libfabric per process).
   */
  private static String mappedFile(String requested) {
    try (var lines = Files.lines(Path.of("/proc/self/maps"))) {
      return lines
          .map(line -> line.indexOf('/') < 0 ? "" : line.substring(line.indexOf('/')))
          .filter(path -> path.substring(path.lastIndexOf('/') + 1).startsWith("libfabric.so"))
          .findFirst()
          .orElse(requested);
    } catch (IOException | UncheckedIOException unreadable) {
      return requested;
    }
  }

  private static MemorySegment symbol(SymbolLookup library, String name) throws LibraryMissing {
    return library
        .find(name)
        .orElseThrow(
            () ->
                new LibraryMissing(
                    "libfabric.so.1 has no symbol " + name + ": it is too old or not libfabric"));
  }

  private static MemorySegment libc(String name) {
    return LINKER
        .defaultLookup()
        .find(name)
        .orElseThrow(() -> new IllegalStateException("libc has no " + name));
  }

  @SuppressWarnings("restricted")
  private static MethodHandle handle(FunctionDescriptor descriptor, Linker.Option... options) {
    return LINKER.downcallHandle(descriptor, options);
  }

  /**
   * The file the dynamic loader loaded libfabric from ({@code dladdr} of {@code fi_getinfo}), for
   * messages that must say which library lacks something.
   *
   * @return the path, for example {@code /usr/lib/x86_64-linux-gnu/libfabric.so.1}, or the
   *     requested name when the path cannot be found; null when libfabric is unavailable
   */
  public static String libraryPath() {
    if (UNAVAILABLE != null) {
      return null;
    }
    String requested = System.getProperty(LIBRARY_PROPERTY, DEFAULT_LIBRARY);
    if (DLADDR.equals(MemorySegment.NULL)) {
      return requested;
    }
    try (Arena arena = Arena.ofConfined()) {
      // Dl_info: dli_fname, dli_fbase, dli_sname, dli_saddr.
      MemorySegment info = arena.allocate(32, 8);
      int found = (int) I_LL.invokeExact(DLADDR, FI_GETINFO.address(), info.address());
      String path = found == 0 ? null : string(info.get(JAVA_LONG, 0));
      return path == null || path.isEmpty() ? requested : path;
    } catch (RuntimeException | Error rethrown) {
      throw rethrown;
    } catch (Throwable impossible) {
      throw new AssertionError(impossible);
    }
  }

  /**
   * Why libfabric cannot be used here, or null when it loaded.
   *
   * @return the reason, a sentence a user can act on, or null
   */
  public static String unavailableReason() {
    return UNAVAILABLE;
  }

  /**
   * Fails unless libfabric loaded.
   *
   * @throws dev.dma.api.DmaException of kind FABRIC with the reason
   */
  public static void require() {
    if (UNAVAILABLE != null) {
      throw dev.dma.api.DmaException.fabric(
          dev.dma.api.DmaException.Reason.PROVIDER_UNAVAILABLE, UNAVAILABLE);
    }
  }

  /**
   * {@code major.minor} of a packed {@code FI_VERSION}.
   *
   * @param version the packed version
   * @return the text
   */
  public static String versionText(int version) {
    return (version >>> 16) + "." + (version & 0xffff);
  }

  // ---- helpers ----

  /**
   * A function pointer read from an ops table, as the target of a downcall.
   *
   * @param table the ops table's address
   * @param offset the function's offset in the table
   * @param what the name for the error message
   * @return the function
   * @throws dev.dma.api.DmaException when the provider left the slot empty
   */
  public static MemorySegment function(long table, long offset, String what) {
    long pointer = table == 0 ? 0 : MEMORY.get(JAVA_LONG, table + offset);
    if (pointer == 0) {
      throw dev.dma.api.DmaException.fabric(what + ": the provider does not implement it");
    }
    return MemorySegment.ofAddress(pointer);
  }

  /**
   * Reads a pointer-sized field.
   *
   * @param address the field's address
   * @return its value
   */
  public static long word(long address) {
    return MEMORY.get(JAVA_LONG, address);
  }

  /**
   * Reads a 4-byte field.
   *
   * @param address the field's address
   * @return its value
   */
  public static int int32(long address) {
    return MEMORY.get(JAVA_INT, address);
  }

  /**
   * A NUL-terminated UTF-8 string.
   *
   * @param address the first byte, or 0
   * @return the string, or null for address 0
   */
  public static String string(long address) {
    return address == 0 ? null : MEMORY.getString(address);
  }

  /**
   * {@code fi_strerror(abs(code))}.
   *
   * @param code a libfabric code, either sign
   * @return the text
   */
  public static String strerror(int code) {
    if (UNAVAILABLE != null) {
      return "libfabric error " + Math.abs(code);
    }
    try {
      String text = string((long) L_I.invokeExact(FI_STRERROR, Math.abs(code)));
      return text == null ? "Unknown error " + Math.abs(code) : text;
    } catch (Throwable impossible) {
      throw new AssertionError(impossible);
    }
  }

  /**
   * The failure text of a checked call: {@code "{what}: {fi_strerror(-code)} ({code})"}.
   *
   * @param what the step label
   * @param code the negative return code
   * @return the text
   */
  public static String failure(String what, long code) {
    return what + ": " + strerror((int) code) + " (" + code + ")";
  }

  /**
   * A libc {@code strdup} of a string, for fields that {@code fi_freeinfo} will {@code free()}.
   *
   * @param value the string, without NUL characters
   * @return the malloc'ed copy, never 0
   */
  public static long strdup(String value) {
    try (Arena arena = Arena.ofConfined()) {
      long copy = (long) L_L.invokeExact(STRDUP, arena.allocateFrom(value).address());
      if (copy == 0) {
        throw new OutOfMemoryError("strdup");
      }
      return copy;
    } catch (RuntimeException | Error rethrown) {
      throw rethrown;
    } catch (Throwable impossible) {
      throw new AssertionError(impossible);
    }
  }

  /**
   * Invokes {@code fi_freeinfo}.
   *
   * @param info the list, or 0 (ignored)
   */
  public static void freeinfo(long info) {
    if (info == 0) {
      return;
    }
    try {
      V_L.invokeExact(FI_FREEINFO, info);
    } catch (Throwable impossible) {
      throw new AssertionError(impossible);
    }
  }

  /**
   * Invokes {@code fi_dupinfo}.
   *
   * @param info the entry to copy, or 0 for a blank one (what {@code fi_allocinfo} does)
   * @return the copy, or 0 when it failed
   */
  public static long dupinfo(long info) {
    try {
      return (long) L_L.invokeExact(FI_DUPINFO, info);
    } catch (Throwable impossible) {
      throw new AssertionError(impossible);
    }
  }

  /**
   * Invokes {@code fi_getinfo} inside a {@link SignalGuard}, because it may load DL providers whose
   * constructors install signal handlers.
   *
   * @param node the node string's address, or 0
   * @param flags the flags ({@code FI_SOURCE} or 0)
   * @param hints the hints, or 0
   * @param out where the result list pointer is written
   * @return 0 or a negative {@code FI_E*} code
   */
  public static int getinfo(long node, long flags, long hints, long out) {
    try (var _ = SignalGuard.save()) {
      return (int) I_ILLLLL.invokeExact(FI_GETINFO, API_VERSION, node, 0L, flags, hints, out);
    } catch (RuntimeException | Error rethrown) {
      throw rethrown;
    } catch (Throwable impossible) {
      throw new AssertionError(impossible);
    }
  }

  /**
   * {@code ppoll(fds, nfds, timeout, NULL)}: waits for one of the {@code struct pollfd}s at {@code
   * fds} to be ready, or for {@code timeout} (a {@code struct timespec}).
   *
   * @param fds the {@code struct pollfd} array
   * @param count how many
   * @param timeout the {@code struct timespec}
   * @return what ppoll returned: ready descriptors, 0 on timeout, -1 on error (EINTR included)
   */
  public static int ppoll(long fds, long count, long timeout) {
    try {
      return (int) I_LLLL.invokeExact(PPOLL, fds, count, timeout, 0L);
    } catch (RuntimeException | Error rethrown) {
      throw rethrown;
    } catch (Throwable impossible) {
      throw new AssertionError(impossible);
    }
  }

  /**
   * Whether another process has mapped the first and the last byte of {@code [address, address +
   * length)}, asked with {@code process_vm_readv}, the call shm's CMA copies use (so where shm can
   * copy, this can ask). Allocates; for paths that already failed, never per transfer.
   *
   * @param pid the process
   * @param address the range's first byte in that process
   * @param length the range's length, at least 1
   * @return 1 when both bytes are mapped and readable, 0 when either is not ({@code EFAULT}, or a
   *     partial read), -1 when the kernel would not say (another user's process, an exited one, no
   *     CMA)
   */
  public static int processMapped(long pid, long address, long length) {
    try (Arena call = Arena.ofConfined()) {
      MemorySegment local = call.allocate(Abi.IOVEC_SIZE + 2, 8);
      MemorySegment remote = call.allocate(2 * Abi.IOVEC_SIZE, 8);
      MemorySegment state = call.allocate(Linker.Option.captureStateLayout());
      local.set(JAVA_LONG, Abi.IOVEC_BASE, local.address() + Abi.IOVEC_SIZE);
      local.set(JAVA_LONG, Abi.IOVEC_LEN, 2);
      remote.set(JAVA_LONG, Abi.IOVEC_BASE, address);
      remote.set(JAVA_LONG, Abi.IOVEC_LEN, 1);
      remote.set(JAVA_LONG, Abi.IOVEC_SIZE + Abi.IOVEC_BASE, address + length - 1);
      remote.set(JAVA_LONG, Abi.IOVEC_SIZE + Abi.IOVEC_LEN, 1);
      long read =
          (long)
              L_ILLLLL_ERRNO.invokeExact(
                  PROCESS_VM_READV,
                  state,
                  (int) pid,
                  local.address(),
                  1L,
                  remote.address(),
                  2L,
                  0L);
      if (read == 2) {
        return 1;
      }
      if (read >= 0) {
        return 0;
      }
      return (int) CAPTURED_ERRNO.get(state, 0L) == EFAULT ? 0 : -1;
    } catch (RuntimeException | Error rethrown) {
      throw rethrown;
    } catch (Throwable impossible) {
      throw new AssertionError(impossible);
    }
  }

  /**
   * A non-blocking, close-on-exec {@code eventfd}, for waking a thread blocked in {@link #ppoll}.
   *
   * @return the fd, or -1 when the kernel refused one
   */
  public static int eventfd() {
    try {
      return (int) I_II.invokeExact(EVENTFD, 0, EFD_NONBLOCK_CLOEXEC);
    } catch (RuntimeException | Error rethrown) {
      throw rethrown;
    } catch (Throwable impossible) {
      throw new AssertionError(impossible);
    }
  }

  /**
   * {@code write(fd, buffer, bytes)}.
   *
   * @param fd the descriptor
   * @param buffer the bytes' address
   * @param bytes how many
   * @return what write returned
   */
  public static long write(int fd, long buffer, long bytes) {
    try {
      return (long) L_ILL.invokeExact(WRITE, fd, buffer, bytes);
    } catch (RuntimeException | Error rethrown) {
      throw rethrown;
    } catch (Throwable impossible) {
      throw new AssertionError(impossible);
    }
  }

  /**
   * {@code read(fd, buffer, bytes)}.
   *
   * @param fd the descriptor
   * @param buffer where to put the bytes
   * @param bytes at most how many
   * @return what read returned
   */
  public static long read(int fd, long buffer, long bytes) {
    try {
      return (long) L_ILL.invokeExact(READ, fd, buffer, bytes);
    } catch (RuntimeException | Error rethrown) {
      throw rethrown;
    } catch (Throwable impossible) {
      throw new AssertionError(impossible);
    }
  }

  /**
   * {@code close(fd)}.
   *
   * @param fd the descriptor
   * @return what close returned
   */
  public static int closeFd(int fd) {
    try {
      return (int) I_I.invokeExact(CLOSE_FD, fd);
    } catch (RuntimeException | Error rethrown) {
      throw rethrown;
    } catch (Throwable impossible) {
      throw new AssertionError(impossible);
    }
  }

  /**
   * {@code fi_close(fid)}: {@code fid->ops->close(fid)}.
   *
   * @param fid the object, not 0
   * @return 0 or a negative code
   */
  public static int close(long fid) {
    try {
      return (int)
          I_L.invokeExact(function(word(fid + Abi.FID_OPS), Abi.OPS_CLOSE, "fi_close"), fid);
    } catch (RuntimeException | Error rethrown) {
      throw rethrown;
    } catch (Throwable impossible) {
      throw new AssertionError(impossible);
    }
  }

  /**
   * The JVM's handlers for SIGSEGV, SIGBUS, SIGILL and SIGFPE, saved with {@code sigaction} and put
   * back on {@link #close()}.
   *
   * <p>HotSpot raises SIGSEGV on purpose (implicit null checks in JIT code, safepoint polls).
   * Libraries loaded by libfabric, and shm's first {@code fi_endpoint}, replace these handlers with
   * ones that exit the process or unlink shared memory; restoring the JVM's handlers after each
   * such call keeps the JVM alive and the shm names in place. Use one guard per call, on one
   * thread, in a try-with-resources.
   */
  public static final class SignalGuard implements AutoCloseable {
    private final Arena arena;
    private final MemorySegment saved;

    private SignalGuard(Arena arena, MemorySegment saved) {
      this.arena = arena;
      this.saved = saved;
    }

    /**
     * Saves the current handlers.
     *
     * @return the guard; closing it restores them
     */
    public static SignalGuard save() {
      Arena arena = Arena.ofConfined();
      MemorySegment saved = arena.allocate(Abi.SIGACTION_SIZE * GUARDED_SIGNALS.length, 16);
      for (int i = 0; i < GUARDED_SIGNALS.length; i++) {
        sigaction(GUARDED_SIGNALS[i], 0, saved.address() + i * Abi.SIGACTION_SIZE);
      }
      return new SignalGuard(arena, saved);
    }

    /** Puts the saved handlers back and frees the saved copies. */
    @Override
    public void close() {
      try {
        for (int i = 0; i < GUARDED_SIGNALS.length; i++) {
          sigaction(GUARDED_SIGNALS[i], saved.address() + i * Abi.SIGACTION_SIZE, 0);
        }
      } finally {
        arena.close();
      }
    }

    private static void sigaction(int signal, long action, long old) {
      try {
        int rc = (int) I_ILL.invokeExact(SIGACTION, signal, action, old);
        if (rc != 0) {
          throw new IllegalStateException("sigaction(" + signal + ") failed");
        }
      } catch (RuntimeException | Error rethrown) {
        throw rethrown;
      } catch (Throwable impossible) {
        throw new AssertionError(impossible);
      }
    }
  }

  /**
   * The address of the JVM's current SIGSEGV handler ({@code sa_handler}, the first field of {@code
   * struct sigaction}), for tests that check the guard works.
   *
   * @return the handler address
   */
  public static long currentSegvHandler() {
    try (Arena arena = Arena.ofConfined()) {
      MemorySegment action = arena.allocate(Abi.SIGACTION_SIZE, 16);
      int rc = (int) I_ILL.invokeExact(SIGACTION, Abi.SIGSEGV, 0L, action.address());
      if (rc != 0) {
        throw new IllegalStateException("sigaction failed");
      }
      return action.get(JAVA_LONG, 0);
    } catch (RuntimeException | Error rethrown) {
      throw rethrown;
    } catch (Throwable impossible) {
      throw new AssertionError(impossible);
    }
  }

  /**
   * Anonymous memory aligned to {@link #HUGE_PAGE_BYTES} and advised {@code MADV_HUGEPAGE}, so that
   * the kernel backs it with transparent huge pages where they are enabled ({@code always} or
   * {@code madvise}); plain pages elsewhere. Freed by {@link #unmap} or never.
   *
   * @param bytes how many bytes, a multiple of {@link #HUGE_PAGE_BYTES}
   * @return the address
   * @throws OutOfMemoryError when mmap fails
   */
  public static long mapHuge(long bytes) {
    // PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, MADV_HUGEPAGE: the same values on every
    // Linux architecture dma runs on (asm-generic/mman-common.h).
    try {
      long mapped = (long) L_LLIIIL.invokeExact(MMAP, 0L, bytes + HUGE_PAGE_BYTES, 3, 0x22, -1, 0L);
      if (mapped == -1L) {
        throw new OutOfMemoryError("mmap(" + (bytes + HUGE_PAGE_BYTES) + ") failed");
      }
      long aligned = (mapped + HUGE_PAGE_BYTES - 1) & -HUGE_PAGE_BYTES;
      unmap(mapped, aligned - mapped);
      unmap(aligned + bytes, mapped + HUGE_PAGE_BYTES - aligned);
      // Advice only: where huge pages are off or unsupported the memory is still usable.
      int ignored = (int) I_LLI.invokeExact(MADVISE, aligned, bytes, 14);
      return aligned;
    } catch (OutOfMemoryError e) {
      throw e;
    } catch (Throwable impossible) {
      throw new AssertionError(impossible);
    }
  }

  /**
   * Unmaps memory from {@link #mapHuge}, or part of it.
   *
   * @param address the first byte, page-aligned
   * @param bytes how many bytes; nothing happens for 0
   */
  public static void unmap(long address, long bytes) {
    if (bytes == 0) {
      return;
    }
    try {
      int ignored = (int) I_LL.invokeExact(MUNMAP, address, bytes);
    } catch (Throwable impossible) {
      throw new AssertionError(impossible);
    }
  }

  /**
   * Frees memory that libc allocated ({@code malloc}, {@code strdup}).
   *
   * @param address the block, or 0
   */
  public static void free(long address) {
    try {
      V_L.invokeExact(FREE, address);
    } catch (Throwable impossible) {
      throw new AssertionError(impossible);
    }
  }
}
