/**
 * The implementation of dma-core: the fabric worker, registration cache, peer table and their
 * helpers. Not API: not exported from the module, and free to change.
 */
package dev.dma.core.internal;
