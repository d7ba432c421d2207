package dev.dma.core.internal.peers;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dma.api.DmaException;
import dev.dma.api.Peer;
import dev.dma.core.internal.regions.RecordingEndpoint;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The peers a table vouches for: posted with a reference compare while the client's entry is the
 * one the table matched them to, and through the lookup, with the lookup's outcomes, from any
 * change on.
 */
@Timeout(30)
class BoundPeerTest {
  private static byte[] tcp(int port) {
    return PeerTableTest.tcp(port);
  }

  private final RecordingEndpoint endpoint = new RecordingEndpoint();
  private final PeerTable table = new PeerTable(endpoint);

  @Test
  void anAddedPeerIsVouchedForWithTheClientsHandle() {
    BoundPeer peer = new BoundPeer(1, tcp(9000));
    long handle = table.advertise(peer);
    assertTrue(table.vouchesFor(peer));
    assertEquals(handle, table.handle(1, tcp(9000), peer));
    assertEquals(handle, table.handle(1, tcp(9000), null));
    assertEquals(1, endpoint.inserted().size());
  }

  @Test
  void aClientMovingAwayWithdrawsItsPeerWhoseRequestsThenFailAsStale() {
    BoundPeer old = new BoundPeer(1, tcp(9000));
    long oldHandle = table.advertise(old);
    BoundPeer moved = new BoundPeer(1, tcp(9001));
    table.advertise(moved);
    assertFalse(table.vouchesFor(old));
    assertTrue(table.vouchesFor(moved));
    assertEquals(List.of(oldHandle), endpoint.removed());
    // The vector may hand the old entry's handle to anyone now; the old peer must not post to it.
    DmaException stale = assertThrows(DmaException.class, () -> table.handle(1, tcp(9000), old));
    assertEquals(DmaException.Reason.BAD_REQUEST, stale.reason());
    assertFalse(table.vouchesFor(old));
  }

  @Test
  void aTransferCarryingANewAddressWithdrawsThePeerOfTheOldOne() {
    BoundPeer peer = new BoundPeer(1, tcp(9000));
    long first = table.advertise(peer);
    long moved =
        table.handle(1, tcp(9001), null); // a request without a peer, carrying a new address
    assertNotEquals(first, moved);
    assertFalse(table.vouchesFor(peer));
    assertThrows(DmaException.class, () -> table.handle(1, tcp(9000), peer));
  }

  @Test
  void movingOntoAnAddressAnotherClientHoldsWithdrawsThePeerOfTheOldOne() {
    BoundPeer peer = new BoundPeer(1, tcp(9000));
    long old = table.advertise(peer);
    table.advertise(new BoundPeer(2, tcp(9001)));
    // Client 1 moves onto client 2's entry: shared, not inserted, so nothing is dropped first.
    long shared = table.handle(1, tcp(9001), null);
    assertNotEquals(old, shared);
    assertEquals(List.of(old), endpoint.removed());
    assertFalse(table.vouchesFor(peer));
    assertThrows(DmaException.class, () -> table.handle(1, tcp(9000), peer));
  }

  @Test
  void aReleasedClientsPeerTakesTheLookupAndIsVouchedForAgain() {
    BoundPeer peer = new BoundPeer(1, tcp(9000));
    long first = table.advertise(peer);
    table.release(1);
    assertFalse(table.vouchesFor(peer));
    long again = table.handle(1, tcp(9000), peer);
    assertNotEquals(first, again, "inserted afresh");
    assertTrue(table.vouchesFor(peer));
    assertEquals(again, table.handle(1, tcp(9000), peer));
  }

  @Test
  void anEvictedIncarnationsPeerIsWithdrawn() {
    endpoint.efa = true;
    byte[] gid = new byte[32];
    gid[16] = 5; // QPN 5
    byte[] recycled = gid.clone();
    recycled[20] = 9; // same QPN, new QKEY: a new endpoint in the same slot
    BoundPeer first = new BoundPeer(1, gid);
    table.advertise(first);
    BoundPeer other = new BoundPeer(2, gid);
    table.advertise(other);
    table.advertise(new BoundPeer(3, recycled));
    assertFalse(table.vouchesFor(first));
    assertFalse(table.vouchesFor(other));
  }

  @Test
  void aResetWithdrawsEveryPeerAndTheNextPostVouchesWithTheNewHandle() {
    BoundPeer peer = new BoundPeer(1, tcp(9000));
    long before = table.advertise(peer);
    endpoint.reset();
    table.reinsertAfterReset(clientId -> true);
    assertFalse(table.vouchesFor(peer));
    long after = table.handle(1, tcp(9000), peer);
    assertNotEquals(before, after, "a handle of the old vector");
    assertEquals(after, table.handle(1, tcp(9000), null));
    assertTrue(table.vouchesFor(peer));
  }

  @Test
  void clearWithdrawsEveryPeer() {
    BoundPeer peer = new BoundPeer(1, tcp(9000));
    table.advertise(peer);
    table.clear();
    assertFalse(table.vouchesFor(peer));
  }

  @Test
  void aNewerPeerOfTheClientReplacesTheOlderWhichStillWorks() {
    BoundPeer older = new BoundPeer(1, tcp(9000));
    BoundPeer newer = new BoundPeer(1, tcp(9000));
    long handle = table.advertise(older);
    assertEquals(handle, table.advertise(newer));
    assertTrue(table.vouchesFor(newer));
    assertFalse(table.vouchesFor(older));
    assertEquals(handle, table.handle(1, tcp(9000), older));
    assertEquals(1, endpoint.inserted().size());
  }

  @Test
  void anotherServicesPeerIsVouchedForWithThisTablesHandle() {
    RecordingEndpoint second = new RecordingEndpoint();
    second.insertPeer(new byte[] {7}); // so the two vectors' handles differ
    PeerTable other = new PeerTable(second);
    BoundPeer peer = new BoundPeer(1, tcp(9000));
    long theirs = other.advertise(peer);
    long ours = table.handle(1, tcp(9000), peer);
    assertNotEquals(theirs, ours);
    assertEquals(ours, table.handle(1, tcp(9000), peer));
    assertEquals(theirs, other.handle(1, tcp(9000), peer));
    table.release(1);
    assertFalse(table.vouchesFor(peer));
    assertTrue(other.vouchesFor(peer), "each table withdraws only its own");
  }

  @Test
  void sparseOrLargeIdsTakeTheLookupAndCostNoArray() {
    for (long id : new long[] {-1, PeerTable.DENSE_LIMIT, 5_000}) {
      BoundPeer peer = new BoundPeer(id, tcp(9000));
      long handle = table.advertise(peer);
      assertFalse(table.vouchesFor(peer), "id " + id);
      assertEquals(handle, table.handle(id, tcp(9000), peer));
    }
    BoundPeer dense = new BoundPeer(1_000, tcp(9000));
    table.advertise(dense);
    assertTrue(table.vouchesFor(dense));
  }

  @Test
  void aPeerOfAnotherKindIsLookedUpAndNeverVouchedFor() {
    Peer foreign =
        new Peer() {
          @Override
          public long clientId() {
            return 1;
          }

          @Override
          public byte[] address() {
            return tcp(9000);
          }

          @Override
          public boolean hasAddress(byte[] address) {
            return true; // lies: a table must not trust it
          }
        };
    long handle = table.handle(1, tcp(9000), foreign);
    assertEquals(handle, table.handle(1, tcp(9000), foreign));
    // Had it been vouched for, its claim would post this to 9000's handle.
    assertNotEquals(handle, table.handle(1, tcp(9001), foreign));
  }

  @Test
  void thePeerHandsOutCopiesAndComparesItsAddress() {
    byte[] address = tcp(9000);
    BoundPeer peer = new BoundPeer(5, address);
    address[0] = 9;
    assertArrayEquals(tcp(9000), peer.address());
    peer.address()[0] = 9;
    assertTrue(peer.hasAddress(tcp(9000)));
    assertFalse(peer.hasAddress(tcp(9001)));
    assertEquals(5, peer.clientId());
  }

  // ------------------------------------------ mutation testing: the vouched-for arrays' bounds

  @Test
  void aPeerPostedBeforeTheTableVouchesForAnyoneIsLookedUpThenVouchedFor() {
    BoundPeer zero = new BoundPeer(0, tcp(9000));
    assertFalse(table.vouchesFor(zero), "nothing vouched for yet");
    long handle = table.handle(0, tcp(9000), zero);
    assertTrue(table.vouchesFor(zero), "client 0 is as vouchable as any other");
    assertEquals(handle, table.handle(0, tcp(9000), zero));
  }

  @Test
  void clientZerosPeerIsWithdrawnWhenItsAddressChanges() {
    BoundPeer zero = new BoundPeer(0, tcp(9000));
    long old = table.advertise(zero);
    assertTrue(table.vouchesFor(zero));
    long moved = table.handle(0, tcp(9001), null);
    assertNotEquals(old, moved);
    assertFalse(table.vouchesFor(zero));
    DmaException stale = assertThrows(DmaException.class, () -> table.handle(0, tcp(9000), zero));
    assertEquals(DmaException.Reason.BAD_REQUEST, stale.reason());
  }

  @Test
  void anIdPastTheArraysIsVouchedForOnlyBelowTwiceTheVouchedCountPlus1024() {
    BoundPeer edge = new BoundPeer(1024, tcp(9000));
    long handle = table.advertise(edge);
    assertFalse(table.vouchesFor(edge), "none vouched for: ids from 1,024 on take the lookup");
    assertEquals(handle, table.handle(1024, tcp(9000), edge));
    assertFalse(table.vouchesFor(edge));
    BoundPeer below = new BoundPeer(1023, tcp(9001));
    table.advertise(below);
    assertTrue(table.vouchesFor(below));
  }

  @Test
  void aReleasedPeerNoLongerCountsTowardsTheVouchedLimit() {
    BoundPeer five = new BoundPeer(5, tcp(9005));
    table.advertise(five);
    table.release(5);
    assertFalse(table.vouchesFor(five));
    // The arrays are 1,024 long now, and nobody is vouched for: 1,024 is past both limits.
    for (long id : new long[] {1024, 1025}) {
      BoundPeer past = new BoundPeer(id, tcp(9000));
      long handle = table.advertise(past);
      assertFalse(table.vouchesFor(past), "id " + id);
      assertEquals(handle, table.handle(id, tcp(9000), past));
    }
  }

  @Test
  void theArraysGrowToReachAnIdTheVouchedCountAllows() {
    for (int id = 0; id < 600; id++) {
      table.advertise(new BoundPeer(id, tcp(id)));
    }
    // 600 vouched for: ids below 2,224 are vouchable, far past the first 1,024 long arrays.
    BoundPeer far = new BoundPeer(2_200, tcp(9000));
    long handle = table.advertise(far);
    assertTrue(table.vouchesFor(far));
    assertEquals(handle, table.handle(2_200, tcp(9000), far));
    BoundPeer tooFar = new BoundPeer(4_096, tcp(9001));
    table.advertise(tooFar);
    assertFalse(table.vouchesFor(tooFar), "past the arrays and past twice 601 plus 1,024");
  }

  @Test
  void warmingIdsOutsideTheArraysReadsNothingOutOfBoundsAndChangesNothing() {
    BoundPeer zero = new BoundPeer(0, tcp(9000));
    long handle = table.advertise(zero);
    long[] ids = {-1, 1_024, 5_000_000, Long.MAX_VALUE, 0, 1_024, -7};
    boolean[] carriesPeer = {true, true, true, true, true, false, false};
    table.warm(ids, carriesPeer, ids.length);
    PeerTable empty = new PeerTable(new RecordingEndpoint());
    empty.warm(ids, carriesPeer, ids.length);
    empty.warm(new long[] {0}, new boolean[] {true}, 1);
    assertTrue(table.vouchesFor(zero));
    assertEquals(handle, table.handle(0, tcp(9000), zero));
    assertEquals(1, endpoint.inserted().size());
  }

  @Test
  void vouchesForAnIdPastTheArraysIsFalse() {
    assertFalse(table.vouchesFor(new BoundPeer(0, tcp(9000))), "empty arrays");
    table.advertise(new BoundPeer(1, tcp(9001)));
    assertFalse(table.vouchesFor(new BoundPeer(1024, tcp(9000))), "the arrays' length");
  }

  @Test
  void aPeerSaysItsClientAndAddress() {
    assertEquals(
        "Peer[clientId=7, address=0a0bff]", new BoundPeer(7, new byte[] {10, 11, -1}).toString());
  }

  /**
   * With enough clients vouched for that the arrays could reach {@link PeerTable#DENSE_LIMIT}, an
   * id of exactly the limit still takes the lookup: the arrays stop there. Every client shares one
   * address, so this costs the arrays (12 MiB) and one slot a client, not an entry each.
   */
  @Test
  void theArraysStopAtTheDenseLimitHoweverManyClientsAreVouchedFor() {
    byte[] shared = tcp(9000);
    int vouched = PeerTable.DENSE_LIMIT / 2;
    for (int id = 0; id < vouched; id++) {
      table.advertise(new BoundPeer(id, shared));
    }
    assertEquals(1, endpoint.inserted().size());
    BoundPeer last = new BoundPeer(PeerTable.DENSE_LIMIT - 1, shared);
    table.advertise(last);
    assertTrue(table.vouchesFor(last), "the arrays' last index");
    BoundPeer atTheLimit = new BoundPeer(PeerTable.DENSE_LIMIT, shared);
    long handle = table.advertise(atTheLimit);
    assertFalse(table.vouchesFor(atTheLimit));
    assertEquals(handle, table.handle(PeerTable.DENSE_LIMIT, shared, atTheLimit));
  }
}
