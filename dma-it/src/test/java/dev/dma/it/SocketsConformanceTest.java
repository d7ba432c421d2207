package dev.dma.it;

import dev.dma.api.DmaConfiguration;
import java.time.Duration;

/** The conformance suite on libfabric's {@code sockets} provider, through the generic binding. */
class SocketsConformanceTest extends ConformanceSuite {
  @Override
  protected DmaConfiguration configuration() {
    // A short completion deadline: when sockets loses completions, the case ends in seconds.
    return DmaConfiguration.builder()
        .providers("libfabric:sockets")
        .bind("127.0.0.1")
        .completionDeadline(Duration.ofSeconds(5))
        .build();
  }

  @Override
  protected boolean losesCompletionsUnderLoad() {
    return true;
  }

  @Override
  protected byte[] deadPeerAddress() {
    return TcpConformanceTest.DEAD_PEER.clone();
  }
}
