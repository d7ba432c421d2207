/**
 * Provider {@code local} ({@link dev.dma.provider.local.LocalProvider}): same-host RMA through
 * memory the server maps and copies itself.
 */
@NullMarked
package dev.dma.provider.local;

import org.jspecify.annotations.NullMarked;
