/**
 * The peer table: address-vector entries shared by address identity and counted per client, used by
 * the fabric worker on every post. Not API: not exported from the module, and free to change.
 */
package dev.dma.core.internal.peers;
