/** Provider {@code tcp} ({@link dev.dma.provider.tcp.TcpProvider}): libfabric RMA over TCP. */
package dev.dma.provider.tcp;
