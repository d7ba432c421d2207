package dev.dma.core.internal.peers;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dma.api.DmaException;
import dev.dma.core.internal.CapturedWarnings;
import dev.dma.core.internal.regions.RecordingEndpoint;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The crate's {@code peer_addresses} tests over a recording endpoint (strong counts become holder
 * counts; the EFA cases use its EFA identity rule), plus the table's own rules.
 */
class PeerTableTest {
  /** A tcp-like 16-byte address (a sockaddr_in for 127.0.0.1:port). */
  static byte[] tcp(int port) {
    byte[] address = new byte[16];
    address[0] = 2;
    address[2] = (byte) (port >>> 8);
    address[3] = (byte) port;
    address[4] = 127;
    address[7] = 1;
    return address;
  }

  /** A synthetic 32-byte EFA address: GID 0xfe x 16, QPN native-endian at 16-17, QKEY at 20-23. */
  private static byte[] efa(int qpn, int qkey) {
    ByteBuffer buffer = ByteBuffer.allocate(32).order(ByteOrder.nativeOrder());
    for (int i = 0; i < 16; i++) {
      buffer.put((byte) 0xfe);
    }
    buffer.putShort(16, (short) qpn);
    buffer.putInt(20, qkey);
    return buffer.array();
  }

  private final RecordingEndpoint endpoint = new RecordingEndpoint();
  private final PeerTable table = new PeerTable(endpoint);
  private final CapturedWarnings warnings = new CapturedWarnings(PeerTable.class.getName());

  @BeforeEach
  void captureWarnings() {
    warnings.start();
  }

  @AfterEach
  void noContractViolations() {
    warnings.stop();
    int live = endpoint.livePeers();
    table.clear();
    // clear() leaves the entries to the address vector's close: removing one whose endpoint
    // closed first crashes shm (smr_unmap_region).
    assertEquals(live, endpoint.livePeers(), "clear must not call removePeer");
    assertEquals(List.of(), endpoint.faults());
  }

  @Test
  void clientsSharingAnAddressShareOneEntry() {
    long first = table.handle(1, tcp(9000), null);
    long second = table.handle(2, tcp(9000), null);
    assertEquals(first, second);
    assertEquals(1, endpoint.inserted().size());
    assertEquals(1, table.entries());
    assertEquals(2, table.clients());
    assertEquals(2, table.holders(1));
  }

  @Test
  void oneClientLeavingKeepsAnEntryAnotherStillUses() {
    long handle = table.handle(1, tcp(9000), null);
    table.handle(2, tcp(9000), null);
    table.handle(3, tcp(9000), null);
    table.release(1);
    assertEquals(2, table.holders(2));
    assertTrue(endpoint.isLivePeer(handle));
    assertEquals(List.of(), endpoint.removed());
  }

  @Test
  void theLastClientOutRemovesTheEntry() {
    long handle = table.handle(1, tcp(9000), null);
    table.handle(2, tcp(9000), null);
    table.release(1);
    table.release(2);
    assertEquals(0, table.clients());
    assertEquals(0, table.entries());
    assertEquals(List.of(handle), endpoint.removed());
    assertFalse(endpoint.isLivePeer(handle));
  }

  @Test
  void releasingAClientTwiceIsHarmless() {
    long handle = table.handle(1, tcp(9000), null);
    table.handle(2, tcp(9000), null);
    table.release(1);
    table.release(1);
    table.release(42); // never seen
    assertEquals(1, table.holders(2));
    assertTrue(endpoint.isLivePeer(handle));
    assertEquals(handle, table.handle(2, tcp(9000), null));
    assertEquals(1, endpoint.inserted().size());
  }

  @Test
  void reAskingForTheSameAddressHoldsOneReference() {
    byte[] address = tcp(9000);
    long handle = table.handle(1, address, null);
    assertEquals(handle, table.handle(1, address, null), "the same array");
    assertEquals(handle, table.handle(1, tcp(9000), null), "equal bytes");
    table.handle(2, address, null);
    assertEquals(2, table.holders(1), "client 1 holds it once, however often it asks");
    table.release(2);
    assertEquals(1, table.holders(1));
    assertEquals(1, endpoint.inserted().size());
  }

  @Test
  void theStoredAddressIsACopy() {
    byte[] address = tcp(9000);
    long handle = table.handle(1, address, null);
    address[3] = 99; // the caller reuses its array for another peer
    long other = table.handle(1, address, null);
    assertNotEquals(handle, other);
    assertEquals(List.of(handle), endpoint.removed());
  }

  @Test
  void deadIndexEntriesAreSwept() {
    for (int i = 0; i < 192; i++) {
      table.indexDead(tcp(i));
    }
    assertEquals(192, table.indexSize());
    table.sweep();
    assertEquals(0, table.indexSize());
    assertEquals(PeerTable.SWEEP_FLOOR, table.sweepThreshold());
  }

  @Test
  void sweepingKeepsLiveEntries() {
    long live = table.handle(1, tcp(9000), null);
    table.sweepThreshold(0);
    table.handle(2, tcp(9001), null); // inserting sweeps
    assertEquals(2, table.indexSize());
    assertEquals(PeerTable.SWEEP_FLOOR, table.sweepThreshold());
    assertEquals(
        live, table.handle(3, tcp(9000), null), "the live entry is still found by identity");
    assertEquals(2, endpoint.inserted().size());
  }

  @Test
  void theIndexIsSweptAsItGrows() {
    for (int i = 0; i < 64; i++) {
      table.handle(i, tcp(i), null);
      table.release(i);
    }
    assertEquals(64, table.indexSize(), "released entries stay, dead, until a sweep");
    table.handle(1000, tcp(1000), null);
    assertEquals(1, table.indexSize());
    for (int i = 0; i < 100; i++) {
      table.handle(2000 + i, tcp(2000 + i), null);
    }
    assertEquals(101, table.indexSize());
    assertEquals(128, table.sweepThreshold(), "twice the live entries after the last sweep");
  }

  @Test
  void efaAddressesDifferingOnlyInQkeyAreOneSlot() {
    endpoint.efa = true;
    byte[] one = efa(7, 0x1111);
    byte[] two = efa(7, 0x2222);
    assertFalse(Arrays.equals(one, two));
    assertArrayEquals(endpoint.peerIdentity(one), endpoint.peerIdentity(two));
    table.handle(1, one, null);
    table.handle(2, two, null); // the same slot, a new incarnation: the old one is dead
    assertEquals(1, table.entries());
    assertEquals(1, table.clients());
  }

  @Test
  void efaAddressesWithDifferentQpnsAreDifferentSlots() {
    endpoint.efa = true;
    assertFalse(Arrays.equals(endpoint.peerIdentity(efa(7, 1)), endpoint.peerIdentity(efa(8, 1))));
    long first = table.handle(1, efa(7, 1), null);
    long second = table.handle(2, efa(8, 1), null);
    assertNotEquals(first, second);
    assertEquals(2, table.entries());
    assertEquals(List.of(), warnings.messages());
  }

  @Test
  void efaRejectsAnyLengthButTheProviders() {
    endpoint.efa = true;
    long handle = table.handle(1, efa(7, 1), null);
    for (int length : new int[] {31, 33}) {
      DmaException rejected =
          assertThrows(DmaException.class, () -> table.handle(1, new byte[length], null));
      assertEquals("efa address is " + length + " bytes, not 32", rejected.getMessage());
      assertEquals(DmaException.Kind.FABRIC, rejected.kind());
    }
    assertEquals(
        handle, table.handle(1, efa(7, 1), null), "a rejected address leaves the entry alone");
    assertEquals(1, endpoint.inserted().size());
    table.handle(2, new byte[32], null);
  }

  @Test
  void opaqueAddressesCompareEveryByte() {
    byte[] one = tcp(9000);
    byte[] two = tcp(9000);
    two[15] = 1;
    assertFalse(Arrays.equals(endpoint.peerIdentity(one), endpoint.peerIdentity(two)));
    assertNotEquals(table.handle(1, one, null), table.handle(2, two, null));
    assertEquals(2, table.entries());
  }

  @Test
  void aRecycledQueuePairEvictsItsDeadIncarnation() {
    endpoint.efa = true;
    byte[] old = efa(7, 0x1234);
    long stale = table.handle(1, old, null);
    table.handle(2, old, null);
    table.handle(3, efa(9, 1), null); // another slot, untouched
    byte[] recycled = old.clone();
    recycled[20] ^= 1;

    long fresh = table.handle(1, recycled, null);

    assertNotEquals(stale, fresh);
    assertEquals(2, table.clients(), "client 2 held the dead incarnation and was released");
    assertEquals(0, table.holders(2));
    assertEquals(1, table.holders(1));
    assertEquals(1, table.holders(3));
    assertEquals(List.of(stale), endpoint.removed());
    assertEquals(1, table.evictions());
    assertEquals(
        List.of("client 1 advertised a recycled id; released the stale endpoint and 2 clients"),
        warnings.messages());
    // Client 2 comes back with the new incarnation and shares it.
    assertEquals(fresh, table.handle(2, recycled, null));
    assertEquals(2, table.holders(1));
  }

  /**
   * A client moved from A to B (A is its only past address), B's slot was recycled for another
   * client's endpoint (the client is evicted, its history kept), and the client comes back at A:
   * forgetting A empties its history, which must leave no null in the map (found by the simulator:
   * the NullPointerException escaped the worker's pass).
   */
  @Test
  @Timeout(10)
  void comingBackToTheOnlyPastAddressAfterAnEvictionForgetsTheHistory() {
    endpoint.efa = true;
    byte[] first = efa(5, 1);
    byte[] moved = efa(6, 1);
    table.advertise(new BoundPeer(2, first));
    table.advertise(new BoundPeer(2, moved));
    assertTrue(table.isPreviousAddress(2, first));
    table.handle(1, efa(6, 2), null); // QPN 6 recycled: client 2's entry is the dead incarnation
    assertEquals(0, table.holders(2));

    long back = table.advertise(new BoundPeer(2, first));

    assertEquals(back, table.handle(2, first, null));
    assertFalse(table.isPreviousAddress(2, first));
    assertEquals(1, table.holders(2));
  }

  @Test
  void aStaleIncarnationWithOpsOutstandingLeavesTheVectorOnlyOnceTheyAreDone() {
    endpoint.efa = true;
    java.util.Set<Long> busy = new java.util.HashSet<>(List.of(2L));
    table.deferRemovalWhile(busy::contains);
    byte[] old = efa(7, 0x1234);
    long stale = table.handle(1, old, null);
    table.handle(2, old, null);
    byte[] recycled = old.clone();
    recycled[20] ^= 1;

    long fresh = table.handle(1, recycled, null);

    // Client 2 still has ops posted against the stale handle: removing it now would pull the
    // peer from under them (EFA never completes them).
    assertNotEquals(stale, fresh);
    assertEquals(List.of(), endpoint.removed());
    assertTrue(table.hasRetired());
    table.removeRetired();
    assertEquals(List.of(), endpoint.removed());
    busy.clear();
    table.removeRetired();
    assertEquals(List.of(stale), endpoint.removed());
    assertFalse(table.hasRetired());
    assertEquals(1, table.entries());
  }

  @Test
  void afterAResetLiveClientsAreInsertedAgainAndDeadOnesHoldNothing() {
    long one = table.handle(1, new byte[] {1, 2, 3}, null);
    table.handle(2, new byte[] {1, 2, 3}, null);
    table.handle(3, new byte[] {9, 9}, null);
    endpoint.reset();
    int inserted = table.reinsertAfterReset(clientId -> clientId != 3);
    assertEquals(2, inserted);
    // Nothing was removed: the reset closed the old vector with its entries.
    assertEquals(List.of(), endpoint.removed());
    assertEquals(2, table.holders(1));
    assertEquals(0, table.holders(3));
    assertEquals(1, table.entries());
    assertNotEquals(one, table.handle(1, new byte[] {1, 2, 3}, null), "a handle of the old vector");
  }

  @Test
  void aClientMovingToANewAddressReleasesTheOld() {
    long old = table.handle(1, tcp(9000), null);
    long moved = table.handle(1, tcp(9001), null);
    assertNotEquals(old, moved);
    assertEquals(List.of(old), endpoint.removed());
    assertEquals(1, table.entries());
    // Still shared with another client: moving does not remove it. (Moving back takes an
    // advertisement: a transfer carrying the old address now is stale.)
    table.handle(2, tcp(9001), null);
    table.advertise(new BoundPeer(1, tcp(9000)));
    assertEquals(List.of(old), endpoint.removed());
    assertEquals(2, table.entries());
  }

  @Test
  void aFailedRemovalIsLoggedNotThrown() {
    endpoint.removePeerCode = -22;
    table.handle(1, tcp(9000), null);
    table.release(1);
    assertEquals(List.of("fi_av_remove failed releasing a peer address: -22"), warnings.messages());
    assertEquals(1, table.removes());
  }

  @Test
  void clearForgetsEveryEntryWithoutRemovingIt() {
    table.handle(1, tcp(9000), null);
    table.handle(2, tcp(9000), null);
    table.handle(3, tcp(9001), null);
    table.clear();
    // Nothing is removed from the address vector: its close (right after) releases everything,
    // and a removal of a peer whose endpoint already closed crashes shm.
    assertEquals(0, endpoint.removed().size());
    assertEquals(0, table.clients());
    assertEquals(0, table.entries());
    assertEquals(0, table.indexSize());
    table.release(1);
    assertEquals(0, table.removes());
    assertEquals(2, table.inserts());
  }

  // ------------------------------------------ issue 18: deferred removals, stale addresses

  private static String hex(byte[] address) {
    return java.util.HexFormat.of().formatHex(address);
  }

  @Test
  @Timeout(10)
  void aReAdvertisedAddressLeavesTheVectorOnlyOnceTheClientsOpsAreDone() {
    java.util.Set<Long> busy = new java.util.HashSet<>(List.of(1L));
    table.deferRemovalWhile(busy::contains);
    long old = table.handle(1, tcp(9000), null);
    long moved = table.handle(1, tcp(9001), null);
    assertNotEquals(old, moved);
    // Its transfers posted against the old handle are still in flight.
    assertEquals(List.of(), endpoint.removed());
    assertTrue(table.hasRetired());
    table.removeRetired();
    assertEquals(List.of(), endpoint.removed());
    busy.clear();
    table.removeRetired();
    assertEquals(List.of(old), endpoint.removed());
    assertFalse(table.hasRetired());
    assertEquals(1, table.entries());
  }

  @Test
  @Timeout(10)
  void aTransferCarryingAClientsPreviousAddressFailsAndTouchesNothing() {
    byte[] first = tcp(9000);
    byte[] second = tcp(9001);
    table.handle(1, first, null);
    long current = table.handle(1, second, null);
    int inserted = endpoint.inserted().size();
    List<Long> removed = List.copyOf(endpoint.removed());
    for (int i = 0; i < 3; i++) {
      DmaException stale = assertThrows(DmaException.class, () -> table.handle(1, first, null));
      assertEquals(DmaException.Reason.BAD_REQUEST, stale.reason());
      assertTrue(stale.getMessage().contains("client 1"), stale.getMessage());
      assertTrue(stale.getMessage().contains(hex(first)), stale.getMessage());
      assertTrue(stale.getMessage().contains(hex(second)), stale.getMessage());
      assertTrue(stale.getMessage().contains("current advertisement"), stale.getMessage());
      assertEquals(current, table.handle(1, second, null), "the current address is untouched");
    }
    assertEquals(inserted, endpoint.inserted().size());
    assertEquals(removed, endpoint.removed());
    // Another client may still use the first address: staleness is the moved client's.
    table.handle(2, first, null);
  }

  @Test
  @Timeout(10)
  void anOlderIncarnationFailsInsteadOfEvictingTheLiveOne() {
    endpoint.efa = true;
    java.util.Set<Long> busy = new java.util.HashSet<>(List.of(1L, 2L));
    table.deferRemovalWhile(busy::contains);
    byte[] old = efa(7, 0x1234);
    byte[] recycled = efa(7, 0x5678);
    long stale = table.handle(1, old, null);
    long fresh = table.handle(2, recycled, null);
    assertEquals(1, table.evictions());
    // Client 1's queued transfers still carry the old incarnation, client 2's the new one: they
    // used to evict each other back and forth, a warning each time.
    for (int i = 0; i < 10; i++) {
      DmaException refused = assertThrows(DmaException.class, () -> table.handle(1, old, null));
      assertEquals(DmaException.Reason.BAD_REQUEST, refused.reason());
      assertTrue(refused.getMessage().contains("older incarnation"), refused.getMessage());
      assertTrue(refused.getMessage().contains(hex(recycled)), refused.getMessage());
      assertEquals(fresh, table.handle(2, recycled, null));
    }
    assertEquals(1, table.evictions());
    assertEquals(1, warnings.messages().size(), () -> "warnings: " + warnings.messages());
    assertEquals(2, endpoint.inserted().size());
    // The evicted incarnation waited for client 1's transfers in flight.
    assertEquals(List.of(), endpoint.removed());
    busy.clear();
    table.removeRetired();
    assertEquals(List.of(stale), endpoint.removed());
    // Client 1 re-advertised (or its next transfer carries the new address): it shares the slot.
    assertEquals(fresh, table.handle(1, recycled, null));
  }

  @Test
  @Timeout(10)
  void advertisingAnOldAddressMakesItCurrentAndTheOtherStale() {
    table.handle(1, tcp(9000), null);
    table.handle(1, tcp(9001), null);
    long back = table.advertise(new BoundPeer(1, tcp(9000)));
    assertEquals(back, table.handle(1, tcp(9000), null));
    DmaException stale = assertThrows(DmaException.class, () -> table.handle(1, tcp(9001), null));
    assertEquals(DmaException.Reason.BAD_REQUEST, stale.reason());
    // A new address is a re-advertisement, never stale.
    table.handle(1, tcp(9002), null);
  }

  @Test
  @Timeout(10)
  void aClientComingBackToARetiredEntrySharesItRatherThanInsertingItTwice() {
    java.util.Set<Long> busy = new java.util.HashSet<>(List.of(1L));
    table.deferRemovalWhile(busy::contains);
    long first = table.handle(1, tcp(9000), null);
    table.handle(1, tcp(9001), null);
    assertTrue(table.hasRetired());
    assertEquals(
        first, table.handle(2, tcp(9000), null), "the retired entry is still in the vector");
    assertFalse(table.hasRetired());
    assertEquals(2, endpoint.inserted().size());
    busy.clear();
    table.release(2);
    assertEquals(List.of(first), endpoint.removed());
  }

  @Test
  @Timeout(10)
  void aSharedEntryABusyClientLeftWaitsForItEvenWhenTheLastHolderIsReleased() {
    java.util.Set<Long> busy = new java.util.HashSet<>(List.of(1L));
    table.deferRemovalWhile(busy::contains);
    long shared = table.handle(1, tcp(9000), null);
    table.handle(2, tcp(9000), null);
    table.handle(
        1, tcp(9001), null); // client 1 moves with transfers still posted on the shared entry
    table.release(2);
    assertEquals(List.of(), endpoint.removed());
    busy.clear();
    table.removeRetired();
    assertEquals(List.of(shared), endpoint.removed());
  }

  @Test
  @Timeout(10)
  void releasingABusyClientRemovesAtOnceSoTheProviderFlushesItsOps() {
    java.util.Set<Long> busy = new java.util.HashSet<>(List.of(1L));
    table.deferRemovalWhile(busy::contains);
    long handle = table.handle(1, tcp(9000), null);
    table.release(1);
    assertEquals(List.of(handle), endpoint.removed());
    assertFalse(table.hasRetired());
  }

  @Test
  @Timeout(10)
  void whatMakesAnAddressStaleSurvivesAnEndpointReset() {
    table.handle(1, tcp(9000), null);
    table.handle(1, tcp(9001), null);
    endpoint.reset();
    assertEquals(1, table.reinsertAfterReset(clientId -> true));
    assertThrows(DmaException.class, () -> table.handle(1, tcp(9000), null));
    table.handle(1, tcp(9001), null);
  }

  // ------------------------------------------ mutation testing: outcomes no case above pinned

  /** Inserts a peer no test case uses, so the handles a case then gets are never 0. */
  private void insertAnUnrelatedPeerFirst() {
    table.handle(99, tcp(1), null);
  }

  @Test
  @Timeout(10)
  void anAddressTooLongForTheIndexIsFoundThroughTheClientsEntry() {
    insertAnUnrelatedPeerFirst();
    byte[] longAddress = new byte[HandleIndex.MAX_ADDRESS + 8];
    longAddress[0] = 7;
    long handle = table.handle(1, longAddress, null);
    assertNotEquals(0, handle);
    assertEquals(handle, table.handle(1, longAddress.clone(), null));
    assertEquals(handle, table.handle(1, longAddress, null));
    assertEquals(2, endpoint.inserted().size());
  }

  @Test
  @Timeout(10)
  void isCurrentOrUnknownIsFalseOnlyForAnotherAddressOfAClientHoldingOne() {
    assertTrue(table.isCurrentOrUnknown(1, tcp(9000)), "a client never seen");
    table.handle(1, tcp(9000), null);
    assertTrue(table.isCurrentOrUnknown(1, tcp(9000)), "its current address");
    assertFalse(table.isCurrentOrUnknown(1, tcp(9001)), "another address");
    table.release(1);
    assertTrue(table.isCurrentOrUnknown(1, tcp(9001)), "a released client holds nothing");
  }

  @Test
  @Timeout(10)
  void advertisingTheCurrentAddressAgainReturnsItsHandle() {
    insertAnUnrelatedPeerFirst();
    long handle = table.advertise(new BoundPeer(1, tcp(9000)));
    assertNotEquals(0, handle);
    assertEquals(handle, table.advertise(new BoundPeer(1, tcp(9000))));
    assertEquals(2, endpoint.inserted().size());
    assertEquals(1, table.holders(1));
  }

  /**
   * Client 1 moves onto an address client 2 holds: the index must now give client 1 only that
   * entry, so its old address, which left the vector, fails as stale rather than returning the
   * removed handle.
   */
  @Test
  @Timeout(10)
  void movingOntoAnotherClientsEntryMakesTheOldAddressStale() {
    long old = table.handle(1, tcp(9000), null);
    long shared = table.handle(2, tcp(9001), null);
    assertEquals(shared, table.handle(1, tcp(9001), null));
    assertEquals(List.of(old), endpoint.removed());
    DmaException stale = assertThrows(DmaException.class, () -> table.handle(1, tcp(9000), null));
    assertEquals(DmaException.Reason.BAD_REQUEST, stale.reason());
    assertEquals(shared, table.handle(1, tcp(9001), null));
  }

  @Test
  @Timeout(10)
  void advertisingBackOntoASharedEntryForgetsThatAddressAsPrevious() {
    table.handle(1, tcp(9000), null);
    table.handle(2, tcp(9000), null);
    table.handle(1, tcp(9001), null);
    assertTrue(table.isPreviousAddress(1, tcp(9000)));
    table.advertise(new BoundPeer(1, tcp(9000))); // shares client 2's live entry
    assertFalse(table.isPreviousAddress(1, tcp(9000)), "its current address is not a past one");
    assertTrue(table.isPreviousAddress(1, tcp(9001)));
    assertEquals(2, table.holders(2));
  }

  @Test
  @Timeout(10)
  void theLastFourAddressesAreRememberedAsPrevious() {
    for (int port = 9000; port <= 9004; port++) {
      table.handle(1, tcp(port), null);
    }
    for (int port = 9000; port <= 9003; port++) {
      assertTrue(table.isPreviousAddress(1, tcp(port)), "port " + port);
      int moved = port;
      assertThrows(DmaException.class, () -> table.handle(1, tcp(moved), null));
    }
    assertFalse(table.isPreviousAddress(1, tcp(9004)), "the current one");
    table.handle(1, tcp(9005), null);
    assertFalse(table.isPreviousAddress(1, tcp(9000)), "a fifth one back is forgotten");
  }

  @Test
  @Timeout(10)
  void aNewIncarnationOfASlotNobodyHoldsIsNoEviction() {
    endpoint.efa = true;
    table.handle(1, efa(7, 1), null);
    table.release(1);
    table.handle(2, efa(7, 2), null);
    assertEquals(0, table.evictions());
    assertEquals(List.of(), warnings.messages());
    // The released incarnation is still older than the one now known.
    DmaException stale = assertThrows(DmaException.class, () -> table.handle(3, efa(7, 1), null));
    assertEquals(DmaException.Reason.BAD_REQUEST, stale.reason());
  }

  /** Two opaque addresses whose {@code Arrays.hashCode} is equal are still two peers. */
  @Test
  @Timeout(10)
  void addressesWithEqualHashCodesAreDifferentPeers() {
    byte[] one = {0, 31};
    byte[] two = {1, 0};
    assertEquals(Arrays.hashCode(one), Arrays.hashCode(two));
    long first = table.handle(1, one, null);
    long second = table.handle(2, two, null);
    assertNotEquals(first, second);
    assertEquals(2, table.entries());
    assertEquals(1, table.holders(1));
    assertEquals(0, table.evictions());
  }

  /**
   * Three busy clients leave an entry in turn; it waits for every one of them, not only the first,
   * before it leaves the vector.
   */
  @Test
  @Timeout(10)
  void aRetiredEntryWaitsForEachOfSeveralLingeringClients() {
    java.util.Set<Long> busy = new java.util.HashSet<>(List.of(1L, 2L, 3L));
    table.deferRemovalWhile(busy::contains);
    long shared = table.handle(1, tcp(9000), null);
    for (long client = 2; client <= 4; client++) {
      table.handle(client, tcp(9000), null);
    }
    table.handle(1, tcp(9001), null);
    table.handle(2, tcp(9002), null);
    table.handle(3, tcp(9003), null);
    table.release(4);
    assertTrue(table.hasRetired());
    for (long done = 1; done <= 2; done++) {
      busy.remove(done);
      table.removeRetired();
      assertFalse(endpoint.removed().contains(shared), "client " + (done + 1) + " still busy");
    }
    busy.clear();
    table.removeRetired();
    assertEquals(List.of(shared), endpoint.removed());
    assertFalse(table.hasRetired());
  }

  @Test
  @Timeout(10)
  void afterAResetADeadClientsNextTransferInsertsItsAddressAfresh() {
    table.handle(1, tcp(9000), null);
    long dead = table.handle(3, tcp(9003), null);
    endpoint.reset();
    assertEquals(1, table.reinsertAfterReset(clientId -> clientId != 3));
    long fresh = table.handle(3, tcp(9003), null);
    assertNotEquals(dead, fresh, "a handle of the old vector");
    assertTrue(endpoint.isLivePeer(fresh));
    assertEquals(4, endpoint.inserted().size());
  }

  @Test
  @Timeout(10)
  void afterAResetADeadClientsVouchedPeerTakesTheLookup() {
    BoundPeer peer = new BoundPeer(3, tcp(9003));
    long dead = table.advertise(peer);
    table.handle(1, tcp(9000), null);
    endpoint.reset();
    table.reinsertAfterReset(clientId -> clientId != 3);
    assertFalse(table.vouchesFor(peer));
    long fresh = table.handle(3, tcp(9003), peer);
    assertNotEquals(dead, fresh, "a handle of the old vector");
    assertTrue(endpoint.isLivePeer(fresh));
  }

  @Test
  @Timeout(10)
  void aResetForgetsRetiredEntriesWithTheOldVector() {
    java.util.Set<Long> busy = new java.util.HashSet<>(List.of(1L));
    table.deferRemovalWhile(busy::contains);
    table.handle(1, tcp(9000), null);
    table.handle(1, tcp(9001), null);
    assertTrue(table.hasRetired());
    endpoint.reset();
    assertEquals(1, table.reinsertAfterReset(clientId -> true));
    assertFalse(table.hasRetired());
    busy.clear();
    table.removeRetired();
    assertEquals(
        List.of(), endpoint.removed(), "the old vector's entry is not removed from the new");
  }

  @Test
  @Timeout(10)
  void aSlotsOlderIncarnationsStayStaleAcrossAReset() {
    endpoint.efa = true;
    table.handle(1, efa(7, 1), null);
    long live = table.handle(2, efa(7, 2), null); // evicts client 1's incarnation
    endpoint.reset();
    assertEquals(1, table.reinsertAfterReset(clientId -> true));
    DmaException stale = assertThrows(DmaException.class, () -> table.handle(1, efa(7, 1), null));
    assertTrue(stale.getMessage().contains("older incarnation"), stale.getMessage());
    long again = table.handle(2, efa(7, 2), null);
    assertNotEquals(live, again);
    assertEquals(again, table.handle(1, efa(7, 2), null));
  }

  @Test
  @Timeout(10)
  void aFailedReinsertAfterAResetIsLoggedAndLeavesTheClientHoldingNothing() {
    table.handle(1, tcp(9000), null);
    table.handle(2, tcp(9002), null);
    endpoint.reset();
    endpoint.insertFailure = new IllegalStateException("no room");
    assertEquals(0, table.reinsertAfterReset(clientId -> true));
    assertEquals(0, table.holders(1));
    assertEquals(0, table.clients());
    assertEquals(2, warnings.messages().size(), () -> "warnings: " + warnings.messages());
    assertTrue(
        warnings
            .messages()
            .contains(
                "re-inserting client 1 after an endpoint reset failed: java.lang.IllegalStateException:"
                    + " no room"),
        () -> "warnings: " + warnings.messages());
    endpoint.insertFailure = null;
    table.handle(1, tcp(9000), null);
    assertEquals(1, table.holders(1));
  }

  @Test
  @Timeout(10)
  void clearForgetsRetiredEntriesPreviousAddressesAndTheIndex() {
    java.util.Set<Long> busy = new java.util.HashSet<>(List.of(1L));
    table.deferRemovalWhile(busy::contains);
    long first = table.handle(1, tcp(9000), null);
    long second = table.handle(1, tcp(9001), null);
    assertTrue(table.hasRetired());
    table.clear();
    assertFalse(table.hasRetired());
    assertFalse(table.isPreviousAddress(1, tcp(9000)));
    busy.clear();
    table.removeRetired();
    assertEquals(List.of(), endpoint.removed());
    long again = table.handle(1, tcp(9001), null);
    assertNotEquals(second, again, "looked up afresh, not found in the index");
    assertNotEquals(first, again);
    assertEquals(3, endpoint.inserted().size());
  }
}
