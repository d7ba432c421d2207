package dev.dma.fake;

import static dev.dma.spi.FabricEndpoint.AGAIN;
import static dev.dma.spi.FabricEndpoint.POSTED;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dma.api.Checksums;
import dev.dma.api.DmaException;
import dev.dma.api.RemoteAccess;
import dev.dma.spi.EndpointInfo;
import dev.dma.spi.ExposedRegion;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;

class FakeEndpointTest {

  @Test
  void writesAndReadsRealBytesBetweenTwoEndpoints() {
    try (Pair pair = new Pair(4, 1 << 20)) {
      MemorySegment source = pair.local(65_536, 7);
      assertEquals(POSTED, pair.write(0, source, 4096));
      RecordingSink written = pair.reapAll();
      assertEquals(List.of(new RecordingSink.Entry(0, 0, 0, null)), written.entries);
      assertEquals(
          Checksums.crc32c(source), Checksums.crc32c(pair.targetMemory.asSlice(4096, 65_536)));

      MemorySegment landing = pair.arena.allocate(65_536);
      assertEquals(POSTED, pair.read(1, landing, 4096));
      assertEquals(List.of(1), pair.reapAll().slots());
      assertEquals(Checksums.crc32c(source), Checksums.crc32c(landing));

      FakeCounters counters = pair.counters();
      assertEquals(2, counters.posts());
      assertEquals(1, counters.writes());
      assertEquals(1, counters.reads());
      assertEquals(65_536, counters.bytesWritten());
      assertEquals(65_536, counters.bytesRead());
      assertEquals(131_072, counters.bytesCopied());
      assertEquals(2, counters.completions());
      assertEquals(0, counters.violations(), counters.lastViolation());
    }
  }

  @Test
  void virtualAddressingAdvertisesAndResolvesTheSegmentAddress() {
    try (Pair pair = new Pair(2, 8192, script -> script.virtualAddressing(true))) {
      assertEquals(pair.targetMemory.address(), pair.region.advertisement().remoteAddress());
      assertTrue(pair.initiator.describe().usesVirtualAddressing());
      MemorySegment source = pair.local(100, 3);
      assertEquals(POSTED, pair.write(0, source, 8000));
      assertEquals(0, pair.reapAll().only().errno());
      assertEquals(
          Checksums.crc32c(source), Checksums.crc32c(pair.targetMemory.asSlice(8000, 100)));
      // An offset is out of range under virtual addressing.
      pair.initiator.postWrite(
          1, pair.peer, source.address(), 100, 0, 0, pair.region.advertisement().remoteKey());
      assertEquals(13, pair.reapAll().only().errno());
    }
  }

  @Test
  void offsetAddressingAdvertisesZero() {
    try (Pair pair = new Pair(1, 64)) {
      assertEquals(0, pair.region.advertisement().remoteAddress());
      assertArrayEquals(pair.target.localAddress(), pair.region.advertisement().address());
      assertFalse(pair.initiator.describe().usesVirtualAddressing());
    }
  }

  @Test
  void aWrongKeyFailsWithPermissionDeniedLikeSockets() {
    try (Pair pair = new Pair(1, 4096)) {
      MemorySegment source = pair.local(16, 1);
      long key = pair.region.advertisement().remoteKey();
      assertEquals(
          POSTED, pair.initiator.postWrite(0, pair.peer, source.address(), 16, 0, 0, key + 99));
      RecordingSink.Entry entry = pair.reapAll().only();
      assertEquals(13, entry.errno());
      assertEquals(-13, entry.providerErrno());
      assertEquals(
          "completion error: Permission denied (err=13); provider: remote key "
              + (key + 99)
              + " is not registered at the target (prov_errno=-13)",
          entry.message());
      assertEquals(1, pair.counters().errorCompletions());
      assertEquals(0, pair.counters().bytesWritten());
    }
  }

  @Test
  void boundsAreCheckedAgainstTheExposedRegion() {
    try (Pair pair = new Pair(3, 4096)) {
      MemorySegment source = pair.local(16, 1);
      assertEquals(POSTED, pair.write(0, source, 4080)); // the last 16 bytes: fine
      assertEquals(POSTED, pair.write(1, source, 4081)); // one past the end
      assertEquals(POSTED, pair.write(2, source, -1));
      List<RecordingSink.Entry> entries = pair.reapAll().entries;
      assertEquals(0, entries.get(0).errno());
      assertEquals(13, entries.get(1).errno());
      assertTrue(
          entries.get(1).message().contains("is outside the region"), entries.get(1).message());
      assertEquals(13, entries.get(2).errno());
    }
  }

  @Test
  void accessRightsAreChecked() {
    try (Pair pair = new Pair(2, 64);
        Arena arena = Arena.ofConfined()) {
      ExposedRegion readOnly = pair.target.expose(arena.allocate(64), RemoteAccess.READ);
      ExposedRegion writeOnly = pair.target.expose(arena.allocate(64), RemoteAccess.WRITE);
      MemorySegment local = pair.local(8, 0);
      pair.initiator.postWrite(
          0, pair.peer, local.address(), 8, 0, 0, readOnly.advertisement().remoteKey());
      pair.initiator.postRead(
          1, pair.peer, local.address(), 8, 0, 0, writeOnly.advertisement().remoteKey());
      List<RecordingSink.Entry> entries = pair.reapAll().entries;
      assertTrue(entries.get(0).message().contains("does not allow remote writes"));
      assertTrue(entries.get(1).message().contains("does not allow remote reads"));
      readOnly.close();
      writeOnly.close();
    }
  }

  @Test
  void aClosedRegionNoLongerAcceptsItsKey() {
    try (Pair pair = new Pair(1, 64)) {
      pair.region.close();
      pair.region.close(); // idempotent
      assertEquals(POSTED, pair.write(0, pair.local(8, 0), 0));
      assertEquals(13, pair.reapAll().only().errno());
      assertEquals(0, pair.counters().liveExposes());
    }
  }

  @Test
  void zeroLengthOperationsComplete() {
    try (Pair pair = new Pair(1, 64)) {
      assertEquals(
          POSTED,
          pair.initiator.postWrite(
              0, pair.peer, 0, 0, 0, 0, pair.region.advertisement().remoteKey()));
      assertEquals(0, pair.reapAll().only().errno());
    }
  }

  @Test
  void reapDeliversAtMostMaxAndFreesSlots() {
    try (Pair pair = new Pair(4, 64)) {
      MemorySegment local = pair.local(8, 0);
      for (int slot = 0; slot < 4; slot++) {
        assertEquals(POSTED, pair.write(slot, local, 0));
      }
      assertEquals(4, pair.initiator.inFlight());
      RecordingSink sink = new RecordingSink();
      assertEquals(3, pair.initiator.reap(sink, 3));
      assertEquals(List.of(0, 1, 2), sink.slots());
      assertEquals(POSTED, pair.write(0, local, 0)); // freed by the reap
      assertEquals(2, pair.initiator.reap(sink, 10));
      assertEquals(List.of(0, 1, 2, 3, 0), sink.slots());
      assertEquals(0, pair.initiator.reap(sink, 10));
      assertEquals(0, pair.initiator.inFlight());
    }
  }

  @Test
  void contractViolationsFailLoudlyAndAreCounted() {
    try (Pair pair = new Pair(2, 64)) {
      MemorySegment local = pair.local(8, 0);
      long key = pair.region.advertisement().remoteKey();
      assertEquals(POSTED, pair.write(0, local, 0));
      assertEquals(-22, pair.write(0, local, 0)); // slot still posted
      assertTrue(pair.counters().lastViolation().contains("slot 0 is still owned by op #1"));
      assertEquals(-22, pair.write(2, local, 0)); // out of range
      assertEquals(-22, pair.initiator.postWrite(1, 42, local.address(), 8, 0, 0, key));
      assertTrue(pair.counters().lastViolation().contains("peer handle 42 was never inserted"));
      assertEquals(-22, pair.initiator.postWrite(1, pair.peer, 0, 8, 0, 0, key)); // null operand
      pair.reapAll();
      assertEquals(0, pair.initiator.removePeer(pair.peer));
      assertEquals(-22, pair.write(1, local, 0));
      assertTrue(pair.counters().lastViolation().contains("was removed"));
      assertEquals(-22, pair.initiator.removePeer(pair.peer));
      pair.initiator.openSlots(8); // twice
      assertEquals(0, pair.initiator.reap(new RecordingSink(), 0));
      FakeCounters counters = pair.counters();
      assertEquals(8, counters.violations());
      assertEquals(5, counters.postErrors());
      assertEquals(1, counters.posts());
    }
  }

  @Test
  void postingBeforeOpenSlotsIsAViolation() {
    try (FakeFabric fabric = FakeFabric.create("no-slots")) {
      FakeEndpoint endpoint = fabric.openEndpoint();
      long peer = endpoint.insertPeer(fabric.openEndpoint().localAddress());
      assertEquals(-22, endpoint.postWrite(0, peer, 1, 0, 0, 0, 1));
      assertEquals("postWrite before openSlots", fabric.counters().lastViolation());
    }
  }

  @Test
  void peerHandlesCountFromZeroAndAreNeverReused() {
    try (FakeFabric fabric = FakeFabric.create("handles")) {
      FakeEndpoint endpoint = fabric.openEndpoint();
      byte[] other = fabric.openEndpoint().localAddress();
      assertEquals(0, endpoint.insertPeer(other));
      assertEquals(0, endpoint.removePeer(0));
      assertEquals(1, endpoint.insertPeer(other));
      assertEquals(1, endpoint.livePeers());
      FakeCounters counters = fabric.counters();
      assertEquals(2, counters.inserts());
      assertEquals(1, counters.removes());
    }
  }

  @Test
  void handlesAreReusedWhenScriptedLikeRxm() {
    try (FakeFabric fabric = FakeFabric.create("reuse")) {
      fabric.script().reuseAddressHandles(true);
      FakeEndpoint endpoint = fabric.openEndpoint();
      byte[] first = fabric.openEndpoint().localAddress();
      byte[] second = fabric.openEndpoint().localAddress();
      assertEquals(0, endpoint.insertPeer(first));
      assertEquals(1, endpoint.insertPeer(second));
      assertEquals(0, endpoint.removePeer(0));
      assertFalse(endpoint.hasPeer(first));
      assertEquals(0, endpoint.insertPeer(second));
      assertTrue(endpoint.hasPeer(second));
      assertEquals(2, endpoint.livePeers());
    }
  }

  @Test
  void endpointsAreFoundByAddress() {
    try (FakeFabric fabric = FakeFabric.create("lookup")) {
      FakeEndpoint endpoint = fabric.openEndpoint();
      assertSame(endpoint, fabric.endpoint(endpoint.localAddress()));
      endpoint.close();
      assertNull(fabric.endpoint(endpoint.localAddress()));
    }
  }

  @Test
  void malformedAddressesAreRejectedByIdentityAndInsert() {
    try (FakeFabric fabric = FakeFabric.create("malformed")) {
      FakeEndpoint endpoint = fabric.openEndpoint();
      DmaException tooShort =
          assertThrows(DmaException.class, () -> endpoint.peerIdentity(new byte[5]));
      assertEquals("fake address is 5 bytes, not 16", tooShort.getMessage());
      assertEquals(DmaException.Kind.FABRIC, tooShort.kind());
      assertThrows(DmaException.class, () -> endpoint.insertPeer(new byte[16]));
      assertEquals(1, fabric.counters().insertFailures());
      byte[] address = fabric.openEndpoint().localAddress();
      assertArrayEquals(address, endpoint.peerIdentity(address));
    }
  }

  @Test
  void anAddressNobodyHasIsUnreachable() {
    try (Pair pair = new Pair(1, 64)) {
      byte[] stranger;
      try (FakeFabric other = FakeFabric.create("elsewhere")) {
        stranger = other.openEndpoint().localAddress();
      }
      long handle = pair.initiator.insertPeer(stranger);
      MemorySegment local = pair.local(8, 0);
      for (int i = 0; i < 100; i++) {
        assertEquals(AGAIN, pair.initiator.postWrite(0, handle, local.address(), 8, 0, 0, 1));
      }
      assertEquals(100, pair.counters().againAnswers());
    }
  }

  @Test
  void aClosedTargetIsUnreachableAndFailsWhatWaitedForIt() {
    try (Pair pair = new Pair(2, 64)) {
      pair.fabric.script().holdCompletions();
      MemorySegment local = pair.local(8, 0);
      assertEquals(POSTED, pair.write(0, local, 0));
      pair.target.close();
      assertEquals(AGAIN, pair.write(1, local, 0));
      pair.fabric.script().releaseCompletions();
      RecordingSink.Entry entry = pair.reapAll().only();
      assertEquals(
          "completion error: Operation canceled (err=125); provider: Transport endpoint is not"
              + " connected (prov_errno=107)",
          entry.message());
    }
  }

  @Test
  void describeReflectsTheScript() {
    try (FakeFabric fabric = FakeFabric.create("describe")) {
      FakeEndpoint endpoint = fabric.openEndpoint();
      assertEquals(new EndpointInfo("fake", 0, 0, 0x3304, false, false), endpoint.describe());
      fabric.script().requireLocalRegistration(true).virtualAddressing(true);
      EndpointInfo info = endpoint.describe();
      assertEquals(0x14, info.mrMode());
      assertTrue(info.requiresLocalMr());
      assertTrue(endpoint.requiresLocalRegistration());
      assertEquals("mr_mode: 0x14 [LOCAL|VIRT_ADDR]", info.lines().get(2));
      assertEquals("caps: 0x3304 [RMA|READ|WRITE|REMOTE_READ|REMOTE_WRITE]", info.lines().get(3));
    }
  }

  @Test
  void addressesAreUniquePerEndpointAndCopied() {
    try (FakeFabric fabric = FakeFabric.create("addresses")) {
      FakeEndpoint a = fabric.openEndpoint();
      FakeEndpoint b = fabric.openEndpoint();
      assertEquals(16, a.localAddress().length);
      assertNotEquals(List.of(a.localAddress()), List.of(b.localAddress()));
      assertFalse(java.util.Arrays.equals(a.localAddress(), b.localAddress()));
      a.localAddress()[0] = 0;
      assertEquals('F', a.localAddress()[0]);
    }
  }

  @Test
  void closingTheEndpointClosesWhatItOpenedAndCountsLeftovers() {
    try (Pair pair = new Pair(2, 64)) {
      MemorySegment local = pair.local(8, 0);
      pair.initiator.register(local.address(), 8);
      assertEquals(POSTED, pair.write(0, local, 0));
      pair.initiator.close();
      pair.initiator.close();
      FakeCounters counters = pair.counters();
      assertEquals(1, counters.opsInFlightAtClose());
      assertEquals(1, counters.registrationsOpenAtClose());
      assertEquals(0, counters.liveRegistrations());
      assertEquals(-22, pair.write(1, local, 0));
      assertTrue(pair.initiator.isClosed());
      assertEquals(List.of(pair.target), pair.fabric.endpoints());
      pair.target.close();
      assertEquals(0, pair.counters().liveExposes());
    }
  }

  @Test
  void exposingHeapMemoryFails() {
    try (FakeFabric fabric = FakeFabric.create("heap")) {
      FakeEndpoint endpoint = fabric.openEndpoint();
      DmaException failure =
          assertThrows(
              DmaException.class,
              () -> endpoint.expose(MemorySegment.ofArray(new byte[8]), RemoteAccess.READ_WRITE));
      assertTrue(failure.getMessage().startsWith("fi_mr_reg: Invalid argument (-22)"));
    }
  }

  @Test
  void memoryFreedWhileExposedIsAViolation() {
    try (Pair pair = new Pair(1, 64)) {
      Arena arena = Arena.ofConfined();
      ExposedRegion region = pair.target.expose(arena.allocate(64), RemoteAccess.READ_WRITE);
      arena.close();
      pair.initiator.postWrite(
          0, pair.peer, pair.local(8, 0).address(), 8, 0, 0, region.advertisement().remoteKey());
      assertEquals(5, pair.reapAll().only().errno());
      assertEquals(1, pair.counters().violations());
      region.close();
    }
  }

  @Test
  void exposedMemoryFromAConfinedArenaIsWrittenFromAnotherThread() throws Exception {
    try (Pair pair = new Pair(1, 64);
        Arena confined = Arena.ofConfined()) {
      MemorySegment memory = confined.allocate(64);
      ExposedRegion region = pair.target.expose(memory, RemoteAccess.READ_WRITE);
      MemorySegment source = pair.local(64, 9);
      Thread worker =
          new Thread(
              () -> {
                pair.initiator.postWrite(
                    0, pair.peer, source.address(), 64, 0, 0, region.advertisement().remoteKey());
                pair.reapAll();
              });
      worker.start();
      assertTrue(worker.join(Duration.ofSeconds(30)), "the posting thread did not finish");
      assertEquals(Checksums.crc32c(source), Checksums.crc32c(memory));
      region.close();
    }
  }
}
