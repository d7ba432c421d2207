package dev.dma.core;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertSame;

import dev.dma.api.Advertisement;
import dev.dma.api.Checksum;
import dev.dma.api.Direction;
import dev.dma.api.Operands;
import dev.dma.api.Peer;
import dev.dma.api.TransferRequest;
import dev.dma.core.internal.peers.BoundPeer;
import dev.dma.spi.EndpointInfo;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The futures API hands the service exactly the request it was given, its {@link Peer} included,
 * with only the context wrapped: a request that carries its peer must reach the worker with it, or
 * every async transfer takes the lookup the peer exists to skip. A recording {@link DmaService}
 * stands in for the service, so the test sees the request the worker would get ({@link
 * FabricService#offer} queues it as it is).
 */
@Timeout(value = 30, unit = TimeUnit.SECONDS)
class AsyncFabricServicePeerTest {

  /** Accepts every offer and keeps the request; nothing else is asked of it here. */
  private static final class Recording implements DmaService<Operands> {
    final List<TransferRequest<Operands>> offered = new CopyOnWriteArrayList<>();

    @Override
    public Offer offer(TransferRequest<Operands> request) {
      offered.add(request);
      return Offer.ACCEPTED;
    }

    @Override
    public MemoryRegion register(MemorySegment segment) {
      throw new UnsupportedOperationException();
    }

    @Override
    public Peer addPeer(long clientId, byte[] address) {
      throw new UnsupportedOperationException();
    }

    @Override
    public void removePeer(long clientId) {}

    @Override
    public long outstanding() {
      return offered.size();
    }

    @Override
    public List<byte[]> localAddresses() {
      return List.of(new byte[] {1});
    }

    @Override
    public List<String> devices() {
      return List.of("recording");
    }

    @Override
    public EndpointInfo endpointInfo() {
      throw new UnsupportedOperationException();
    }

    @Override
    public void close() {}
  }

  @Test
  void aRequestReachesTheServiceWithItsPeerAndEveryFieldAsGiven() {
    Recording recording = new Recording();
    byte[] address = {10, 0, 0, 2, 0x12, 0x67};
    Peer peer = new BoundPeer(7, address);
    Advertisement ad = new Advertisement(address, 0xabcdL, 4096, 1 << 20);
    try (Arena arena = Arena.ofConfined();
        AsyncFabricService<Operands> service = AsyncFabricService.over(recording)) {
      MemorySegment landing = arena.allocate(256);
      Operands context = Operands.of(landing);
      TransferRequest<Operands> write =
          TransferRequest.write(peer, ad, context)
              .withChecksum(Checksum.CRC32C)
              .withRetryWrite(true);
      TransferRequest<Operands> read = TransferRequest.read(peer, ad, 256, context);
      TransferRequest<Operands> plain = TransferRequest.read(7, ad, 256, context);
      service.transfer(write);
      service.transfer(read);
      service.transfer(plain);

      assertEquals(3, recording.offered.size());
      List<TransferRequest<Operands>> sent = List.of(write, read, plain);
      for (int i = 0; i < sent.size(); i++) {
        TransferRequest<Operands> given = sent.get(i);
        TransferRequest<Operands> reached = recording.offered.get(i);
        assertSame(given.peer(), reached.peer(), "request " + i + " lost its peer");
        assertEquals(given.clientId(), reached.clientId());
        assertArrayEquals(given.peerAddress(), reached.peerAddress());
        assertEquals(given.remoteKey(), reached.remoteKey());
        assertEquals(given.remoteAddress(), reached.remoteAddress());
        assertEquals(given.direction(), reached.direction());
        assertEquals(given.checksum(), reached.checksum());
        assertEquals(given.remoteBase(), reached.remoteBase());
        assertEquals(given.remoteLength(), reached.remoteLength());
        assertEquals(given.retryWrite(), reached.retryWrite());
        // Only the context is the futures' own, and its operand is the caller's.
        assertNotSame(context, reached.context());
        assertEquals(
            landing.address(), Operands.resolve(reached.context(), Direction.TO_PEER).address());
      }
      assertSame(peer, recording.offered.get(0).peer());
      assertEquals(null, recording.offered.get(2).peer());
      assertEquals(List.of("recording"), service.devices());
    }
  }
}
