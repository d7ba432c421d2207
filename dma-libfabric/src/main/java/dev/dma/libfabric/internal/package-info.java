/**
 * The hand-written libfabric binding (offsets and constants in {@link
 * dev.dma.libfabric.internal.Abi}, calls in {@link dev.dma.libfabric.internal.Native}). Internal:
 * not exported from the module and not API.
 */
package dev.dma.libfabric.internal;
