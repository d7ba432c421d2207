/**
 * Providers {@code efa-direct} ({@link dev.dma.provider.efa.EfaDirectProvider}) and {@code efa}
 * ({@link dev.dma.provider.efa.EfaProvider}) over libfabric's {@code efa} provider, their shared
 * rules ({@link dev.dma.provider.efa.EfaFabric}, {@link dev.dma.provider.efa.EfaDecisions}, {@link
 * dev.dma.provider.efa.EfaAddresses}, {@link dev.dma.provider.efa.EfaErrors}, {@link
 * dev.dma.provider.efa.EfaEndpoint}). Several devices: {@link dev.dma.core.FabricServiceGroup} (in
 * {@code dma-core}) starts one fabric service per device these providers discover.
 *
 * <h2>The initiator-first rule (efa-direct)</h2>
 *
 * An RMA target must hold the initiator's address in its own address vector before the initiator's
 * first operation reaches it; otherwise the operation fails with {@code FI_ENOTCONN} (provider
 * status 14, "No valid address handle at remote side"). So a client calls {@link
 * dev.dma.core.PassiveTarget#insertPeer(byte[])} with the server's address (with a {@link
 * dev.dma.core.FabricServiceGroup}, every device's address) <em>before</em> it advertises its
 * memory. The {@code efa} fabric handshakes instead, so the rule does not bind there.
 */
@NullMarked
package dev.dma.provider.efa;

import org.jspecify.annotations.NullMarked;
