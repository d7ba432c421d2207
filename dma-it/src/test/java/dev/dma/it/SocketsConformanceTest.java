package dev.dma.it;

import dev.dma.api.DmaConfiguration;

/** The conformance suite on libfabric's {@code sockets} provider, through the generic binding. */
class SocketsConformanceTest extends ConformanceSuite {
  @Override
  protected DmaConfiguration configuration() {
    return DmaConfiguration.builder().providers("libfabric:sockets").bind("127.0.0.1").build();
  }

  @Override
  protected byte[] deadPeerAddress() {
    return TcpConformanceTest.DEAD_PEER.clone();
  }
}
