/**
 * The service-provider interface between dma-core and a fabric: {@link dev.dma.spi.FabricProvider}
 * (found with {@link java.util.ServiceLoader}) opens {@link dev.dma.spi.FabricEndpoint}s, one per
 * device, each driven by one fabric worker thread.
 *
 * <p>Providers implement these types; users only name providers in their configuration.
 */
@NullMarked
package dev.dma.spi;

import org.jspecify.annotations.NullMarked;
