package dev.dma.it;

import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.dma.api.DmaConfiguration;
import dev.dma.api.DmaException;
import dev.dma.core.PassiveTarget;
import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;
import java.time.Duration;

/**
 * The conformance suite on the {@code local} provider: the server maps the targets' sealed memfds
 * and copies itself. Exposed memory comes from {@link PassiveTarget#allocate}, the one kind {@code
 * local} can share; everything else is the suite unchanged.
 */
class LocalConformanceTest extends ConformanceSuite {
  /** A well-formed local address nothing listens at. */
  private static final byte[] NOBODY =
      "dmaLOCAL000000000000000000000000".getBytes(StandardCharsets.US_ASCII);

  @Override
  protected DmaConfiguration configuration() {
    return DmaConfiguration.builder()
        .providers("local")
        .completionDeadline(Duration.ofSeconds(2))
        .build();
  }

  @Override
  protected MemorySegment exposable(PassiveTarget owner, long lengthBytes) {
    return owner.allocate(lengthBytes);
  }

  @Override
  protected byte[] deadPeerAddress() {
    return NOBODY.clone();
  }

  /** Nothing listens at the address: the connection is refused, so the peer is gone at once. */
  @Override
  protected void deadPeerFailure(DmaException error) {
    assertEquals(DmaException.Reason.PEER_UNREACHABLE, error.reason(), error::toString);
  }
}
