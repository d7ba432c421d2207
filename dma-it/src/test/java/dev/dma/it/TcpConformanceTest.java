package dev.dma.it;

import dev.dma.api.DmaConfiguration;

/** The conformance suite on the {@code tcp} provider over 127.0.0.1. */
class TcpConformanceTest extends ConformanceSuite {
  /** 127.0.0.1:1 as a 16-byte sockaddr_in: nothing listens there. */
  static final byte[] DEAD_PEER = {2, 0, 0, 1, 127, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0};

  @Override
  protected DmaConfiguration configuration() {
    return DmaConfiguration.builder().providers("tcp").bind("127.0.0.1").build();
  }

  @Override
  protected byte[] deadPeerAddress() {
    return DEAD_PEER.clone();
  }
}
