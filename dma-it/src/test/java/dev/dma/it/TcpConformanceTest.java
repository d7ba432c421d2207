package dev.dma.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dma.api.DmaConfiguration;
import dev.dma.api.DmaException;

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

  /**
   * tcp answers -FI_EAGAIN for as long as it is asked, whether the peer is connecting or gone; the
   * worker asks the address a tenth of the progress deadline in, and nothing accepts connections at
   * port 1: gone, before the deadline.
   */
  @Override
  protected void deadPeerFailure(DmaException error) {
    assertTrue(
        error
            .getMessage()
            .startsWith(
                "client 1 at 127.0.0.1:1: its endpoint is gone: nothing accepts connections at"
                    + " 127.0.0.1:1 any more"),
        error.getMessage());
    assertEquals(DmaException.Reason.PEER_UNREACHABLE, error.reason());
    assertEquals(DmaException.Kind.TRANSFER, error.kind());
    assertEquals(11, error.fabricErrno());
  }
}
