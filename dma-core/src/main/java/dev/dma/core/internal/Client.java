package dev.dma.core.internal;

/**
 * A client's outstanding count and pending removal, recycled by {@link FabricWorker}, which keeps
 * one for every client with an op queued or in flight. Worker thread only.
 */
final class Client {
  long id;
  int outstanding;
  boolean removalPending;
  // The worker pass in which a post to this client last answered -FI_EAGAIN.
  int refusedInPass;
  // When a post of this client was last accepted or a completion of it reaped (coarse clock).
  long movedNs;
  // Its ops posted and not yet reaped.
  int inFlight;
  // When the endpoint was last asked whether its peer is gone (PeerProbe).
  long probedNs;

  /** Fills a recycled record for a client that has nothing outstanding yet. */
  void opened(long clientId, int pass, long now, long probeAfterNs) {
    id = clientId;
    outstanding = 0;
    removalPending = false;
    refusedInPass = pass - 1;
    movedNs = now;
    inFlight = 0;
    probedNs = now - probeAfterNs;
  }
}
