/** Provider {@code tcp} ({@link dev.dma.provider.tcp.TcpProvider}): libfabric RMA over TCP. */
@NullMarked
package dev.dma.provider.tcp;

import org.jspecify.annotations.NullMarked;
