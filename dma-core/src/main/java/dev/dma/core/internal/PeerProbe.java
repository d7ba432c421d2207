package dev.dma.core.internal;

import dev.dma.api.DmaException;
import dev.dma.spi.FabricEndpoint;
import org.jspecify.annotations.Nullable;

/**
 * The worker's questions to its endpoint whether a client's peer is gone ({@link
 * FabricEndpoint#peerGone}): asked only for ops refused, failed or long in flight, never on the
 * per-transfer path, and at most once per {@link #probeAfterNs} per client. What a question costs
 * is the endpoint's to bound (a tcp endpoint limits its connection attempts).
 *
 * <p>Threads: the worker thread only.
 */
final class PeerProbe {
  private final FabricEndpoint endpoint;
  private final RateLimitedLog warnings;
  // How long an op of a client with nothing in flight is refused (or, where the endpoint strands a
  // gone peer's ops, stays in flight) before the worker asks, and the least time between two such
  // questions about one client: a tenth of the progress deadline, 100 ms by default.
  private final long probeAfterNs;

  PeerProbe(FabricEndpoint endpoint, RateLimitedLog warnings, long progressDeadlineNs) {
    this.endpoint = endpoint;
    this.warnings = warnings;
    this.probeAfterNs = Math.max(1_000_000L, progressDeadlineNs / 10);
  }

  /** How long an op waits before its peer is asked about, and between two questions. */
  long probeAfterNs() {
    return probeAfterNs;
  }

  /**
   * Asks the endpoint whether the client's peer at {@code address} is gone, at most once per {@link
   * #probeAfterNs} per client; its evidence, or null.
   *
   * @param now the worker's coarse clock
   */
  @Nullable String gone(Client client, byte[] address, long now) {
    if (now - client.probedNs < probeAfterNs) {
      return null;
    }
    client.probedNs = now;
    try {
      return endpoint.peerGone(address);
    } catch (RuntimeException probeBug) {
      warnings.warn("the endpoint's peer probe threw; taken as no answer: " + probeBug);
      return null;
    }
  }

  /**
   * For a completion error that may mean its peer went away (a refusal, which on tcp is the closing
   * of the connection that a dying peer causes too; a lost connection), the endpoint's evidence
   * that the peer's endpoint is gone, or null. Not for an op past its deadline or one whose
   * incarnation is dead already.
   *
   * @param dead whether the op's incarnation is marked dead
   */
  @Nullable String goneAfterFailure(Op<?> op, DmaException.Reason failed, boolean dead, long now) {
    if (op.expired
        || (failed != DmaException.Reason.ACCESS_DENIED
            && failed != DmaException.Reason.PEER_UNREACHABLE)
        || dead) {
      return null;
    }
    return gone(op.client, op.request.peerAddress(), now);
  }
}
