/**
 * The libfabric binding's public face: {@link dev.dma.libfabric.LibfabricEndpoint}, the generic
 * {@link dev.dma.spi.FabricEndpoint} over libfabric's RDM endpoints; {@link
 * dev.dma.libfabric.EndpointPolicy}, what a provider module decides; {@link
 * dev.dma.libfabric.Libfabric}, whether the library loaded; and provider {@code libfabric} ({@link
 * dev.dma.libfabric.LibfabricProvider}).
 *
 * <p>Loading {@code libfabric.so.1} is guarded: it sets {@code IPATH_NO_BACKTRACE=1}, unsets {@code
 * HFI_BACKTRACE}, and saves and restores the JVM's SIGSEGV, SIGBUS, SIGILL and SIGFPE handlers
 * around {@code dlopen}, {@code fi_getinfo}, {@code fi_fabric}, {@code fi_domain} and {@code
 * fi_endpoint}. Without that, the first implicit null check in JIT-compiled code after loading
 * kills the JVM (Debian's psm/infinipath), and shm's first endpoint unlinks its shared memory on
 * the JVM's next deliberate SIGSEGV.
 */
@NullMarked
package dev.dma.libfabric;

import org.jspecify.annotations.NullMarked;
