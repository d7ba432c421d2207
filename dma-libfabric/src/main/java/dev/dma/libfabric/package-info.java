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
 *
 * <h2>What a failure leaves behind, per provider</h2>
 *
 * dma delivers a posted transfer's failure only after the endpoint was reset or closed (or the
 * provider reported the operation over), and after that no provider below reads a write's source or
 * writes a read's landing buffer. What a failed write may still do is land at the target, later,
 * with the bytes its source held when it was posted ({@code
 * DmaException.TargetMemory.MAY_HAVE_CHANGED}). Measured with a target process that was stopped
 * across the failure and resumed (dma-it {@code OperandSafetyTest}, 4 KiB, 64 KiB and 8 MiB, every
 * run, on 1.17 and 2.1):
 *
 * <table class="striped">
 *   <caption>After a failed transfer's completion is delivered</caption>
 *   <thead>
 *     <tr><th>provider</th><th>failed write: target memory</th><th>failed write: source</th>
 *         <th>failed read: landing buffer</th><th>why</th></tr>
 *   </thead>
 *   <tbody>
 *     <tr><td>tcp;ofi_rxm, net / tcp</td><td>may still receive the posted bytes, whole or a
 *         prefix</td><td>never read again</td><td>never written</td><td>the bytes are in kernel
 *         socket buffers, which closing the endpoint does not discard; nothing in this process
 *         reads the source after {@code fi_close(ep)}</td></tr>
 *     <tr><td>sockets, udp;ofi_rxd</td><td>may still receive the posted bytes</td><td>never read
 *         again</td><td>never written</td><td>as above: copies in this process or the kernel,
 *         made while posted</td></tr>
 *     <tr><td>shm</td><td>may still receive the posted bytes</td><td>never read again: writes
 *         above 4 KiB are posted from a dma-owned bounce buffer, given up for good when the write
 *         fails ({@code ShmBounce})</td><td>never written (but a read shm does not refuse is no
 *         failure, as {@code ShmQuirks}' table says)</td><td>with
 *         cross-memory attach the target copies a write straight out of the initiator's memory
 *         whenever it gets to the command, after the failure too (measured: the refilled bytes
 *         landed without the bounce)</td></tr>
 *     <tr><td>efa</td><td>may still receive the posted bytes</td><td>never read again, by
 *         reading of the source: same-host peers are kept off shm ({@code
 *         FI_EFA_ENABLE_SHM_TRANSFER=0}, set by dma unless the environment sets it), and the
 *         device reads a posted source only while the queue pair lives</td><td>never written
 *         (device DMA stops with the queue pair)</td><td>efa posts same-host writes to its own shm
 *         endpoint with dma's flags, which has shm's hazard and is out of the bounce's
 *         reach</td></tr>
 *     <tr><td>efa-direct</td><td>may still receive the posted bytes</td><td>never read again,
 *         by reading of the source (no shm path)</td><td>never written</td><td>the device stops
 *         with the queue pair, which the reset destroys</td></tr>
 *   </tbody>
 * </table>
 *
 * EFA cannot run here; its rows come from the provider's source (2.1 to 2.6) and {@code fi_efa(7)},
 * not from a measurement.
 */
@NullMarked
package dev.dma.libfabric;

import org.jspecify.annotations.NullMarked;
