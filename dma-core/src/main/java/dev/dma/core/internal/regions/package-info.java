/**
 * The registration cache: {@link dev.dma.core.internal.regions.Registration} (one local
 * registration, reference-counted by leases), the process-wide {@link
 * dev.dma.core.internal.regions.RegionRegistry} that {@code invalidate} reaches, and the
 * per-endpoint {@link dev.dma.core.internal.regions.LocalRegions} the fabric worker leases operands
 * from. Not API: not exported from the module, and free to change.
 */
package dev.dma.core.internal.regions;
