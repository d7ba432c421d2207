/**
 * The entry points: {@link dev.dma.core.FabricService} and {@link dev.dma.core.AsyncFabricService}.
 */
package dev.dma.core;
