/**
 * The entry points: {@link dev.dma.core.FabricService} and {@link dev.dma.core.AsyncFabricService}.
 */
@NullMarked
package dev.dma.core;

import org.jspecify.annotations.NullMarked;
