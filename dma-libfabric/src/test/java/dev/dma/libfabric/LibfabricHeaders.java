package dev.dma.libfabric;

import dev.dma.libfabric.internal.Native;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

/**
 * The libfabric headers that belong to the library under test, for the ABI checks that compile C
 * against them ({@link AbiTest}, and dma-provider-efa's EfaAbiTest through this test jar).
 *
 * <p>Checking the system headers while another libfabric is loaded would prove nothing about the
 * loaded one, so the directory follows the library: the system property {@value #PROPERTY}, else
 * the environment variable {@value #ENVIRONMENT}, else {@code <prefix>/include} when the library is
 * named by an absolute path {@code <prefix>/lib/libfabric.so.1} (through {@link
 * Libfabric#LIBRARY_PROPERTY} or {@link Libfabric#LIBRARY_ENVIRONMENT}), else the compiler's
 * default, the system headers ({@code /usr/include/rdma}). Stateless.
 */
public final class LibfabricHeaders {
  private LibfabricHeaders() {}

  /** System property naming the include directory (the one holding {@code rdma/fabric.h}). */
  public static final String PROPERTY = "dma.libfabric.include";

  /** Environment variable naming the include directory, when {@link #PROPERTY} is unset. */
  public static final String ENVIRONMENT = "DMA_LIBFABRIC_INCLUDE";

  /**
   * The include directory to pass to gcc.
   *
   * @return the directory, or null for the compiler's default (system) headers
   * @throws IllegalStateException when the library is a path with no headers beside it and no
   *     directory is named: checking the system headers instead would pass for the wrong reason
   */
  public static Path directory() {
    String property = System.getProperty(PROPERTY, "");
    if (!property.isEmpty()) {
      return Path.of(property);
    }
    String environment = System.getenv(ENVIRONMENT);
    if (environment != null && !environment.isEmpty()) {
      return Path.of(environment);
    }
    String library = Native.requestedLibrary();
    if (!library.contains("/")) {
      return null;
    }
    Path libDir = Path.of(library).toAbsolutePath().getParent();
    Path include = libDir.getParent() == null ? null : libDir.getParent().resolve("include");
    if (include == null || !Files.isRegularFile(include.resolve("rdma/fabric.h"))) {
      throw new IllegalStateException(
          "libfabric under test is "
              + library
              + " but there is no "
              + (include == null ? "include directory" : include.resolve("rdma/fabric.h"))
              + " beside it: set "
              + ENVIRONMENT
              + " (or -D"
              + PROPERTY
              + ") to the directory holding that library's rdma/fabric.h");
    }
    return include;
  }

  /**
   * gcc's flags for {@link #directory()}.
   *
   * @return {@code -I<dir>}, or nothing for the system headers
   */
  public static List<String> includeFlags() {
    Path directory = directory();
    return directory == null ? List.of() : List.of("-I" + directory);
  }

  /**
   * Where the headers come from, for the test's output.
   *
   * @return a phrase such as {@code /usr/include (system)}
   */
  public static String describe() {
    Path directory = directory();
    return directory == null ? "the compiler's default (system headers)" : directory.toString();
  }
}
