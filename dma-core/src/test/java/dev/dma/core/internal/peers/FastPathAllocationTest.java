package dev.dma.core.internal.peers;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dma.core.internal.regions.Allocations;
import dev.dma.core.internal.regions.RecordingEndpoint;
import java.util.Arrays;
import org.junit.jupiter.api.Test;

/**
 * {@link PeerTable#handle} runs on every post and {@link PeerTable#warm} on every post pass: their
 * fast paths must allocate nothing.
 */
class FastPathAllocationTest {
  @Test
  void aKnownClientsHandleAllocatesNothing() {
    RecordingEndpoint endpoint = new RecordingEndpoint();
    endpoint.efa = true;
    PeerTable table = new PeerTable(endpoint);
    int clients = 256;
    byte[][] sameArrays = new byte[clients][];
    byte[][] equalCopies = new byte[clients][];
    for (int i = 0; i < clients; i++) {
      byte[] address = new byte[32];
      address[16] = (byte) i;
      address[17] = (byte) (i >>> 8);
      sameArrays[i] = address;
      equalCopies[i] = address.clone();
      table.handle(i, address, null);
    }
    int[] next = {0};
    long[] sink = {0};
    long[] batch = {1, 2, 3, 4};
    boolean[] noPeers = new boolean[batch.length];
    long allocated =
        Allocations.measure(
            200_000,
            () -> {
              int client = next[0]++ & (clients - 1);
              sink[0] += table.handle(client, sameArrays[client], null);
              sink[0] += table.handle(client, equalCopies[client], null);
              table.warm(batch, noPeers, batch.length);
            });
    assertEquals(clients, endpoint.inserted().size());
    assertEquals(clients, table.entries());
    assertTrue(allocated < 1024, "the fast path allocated " + allocated + " bytes");
    assertTrue(sink[0] > 0);
    table.clear();
  }

  @Test
  void aVouchedPeersHandleAllocatesNothing() {
    RecordingEndpoint endpoint = new RecordingEndpoint();
    PeerTable table = new PeerTable(endpoint);
    int clients = 256;
    BoundPeer[] peers = new BoundPeer[clients];
    byte[][] addresses = new byte[clients][];
    long[] ids = new long[clients];
    boolean[] carriesPeer = new boolean[clients];
    Arrays.fill(carriesPeer, true);
    for (int i = 0; i < clients; i++) {
      addresses[i] = new byte[] {1, (byte) i, (byte) (i >>> 8)};
      peers[i] = new BoundPeer(i, addresses[i]);
      ids[i] = i;
      table.advertise(peers[i]);
    }
    int[] next = {0};
    long[] sink = {0};
    long allocated =
        Allocations.measure(
            200_000,
            () -> {
              int client = next[0]++ & (clients - 1);
              sink[0] += table.handle(client, addresses[client], peers[client]);
              table.warm(ids, carriesPeer, 8);
            });
    assertEquals(clients, endpoint.inserted().size());
    assertTrue(allocated < 1024, "the fast path allocated " + allocated + " bytes");
    assertTrue(sink[0] > 0);
    table.clear();
  }
}
