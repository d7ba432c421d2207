/**
 * The user-facing API of dma: one-sided RDMA from a server into and out of its clients' registered
 * memory.
 *
 * <p>A server submits {@link dev.dma.api.TransferRequest}s to a fabric service (in {@code
 * dma-core}); each request carries a caller context that implements {@link dev.dma.api.Operands}
 * and supplies the local memory. Every submitted request comes back exactly once, as a {@link
 * dev.dma.api.Completion} handed to the service's {@link dev.dma.api.BatchCompleter}.
 */
@NullMarked
package dev.dma.api;

import org.jspecify.annotations.NullMarked;
