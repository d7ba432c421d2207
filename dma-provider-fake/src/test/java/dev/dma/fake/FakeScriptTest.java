package dev.dma.fake;

import static dev.dma.spi.FabricEndpoint.AGAIN;
import static dev.dma.spi.FabricEndpoint.POSTED;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dma.api.Checksums;
import dev.dma.api.DmaException;
import java.lang.foreign.MemorySegment;
import java.util.List;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.Test;

class FakeScriptTest {

  @Test
  void againTimesAnswersAgainThenAccepts() {
    try (Pair pair = new Pair(1, 64)) {
      pair.fabric.script().againTimes(3);
      MemorySegment local = pair.local(8, 0);
      assertEquals(AGAIN, pair.write(0, local, 0));
      assertEquals(AGAIN, pair.write(0, local, 0));
      assertEquals(AGAIN, pair.write(0, local, 0));
      assertEquals(POSTED, pair.write(0, local, 0));
      FakeCounters counters = pair.counters();
      assertEquals(3, counters.againAnswers());
      assertEquals(4, counters.postAttempts());
      assertEquals(1, counters.posts());
      assertEquals(0, pair.reapAll().only().errno());
    }
  }

  @Test
  void againWhileAnswersAgainWhileTheConditionHolds() {
    try (Pair pair = new Pair(1, 64)) {
      AtomicBoolean stuck = new AtomicBoolean(true);
      pair.fabric.script().againWhile(stuck::get);
      MemorySegment local = pair.local(8, 0);
      for (int i = 0; i < 50; i++) {
        assertEquals(AGAIN, pair.write(0, local, 0));
      }
      stuck.set(false);
      assertEquals(POSTED, pair.write(0, local, 0));
      assertEquals(50, pair.counters().againAnswers());
    }
  }

  @Test
  void postsCanBeRefusedOutrightWithoutAViolation() {
    try (Pair pair = new Pair(1, 64)) {
      MemorySegment local = pair.local(8, 0);
      pair.fabric.script().failNextPosts(2, FiErrno.EIO);
      assertEquals(-5, pair.write(0, local, 0));
      assertEquals(-5, pair.write(0, local, 0));
      assertEquals(POSTED, pair.write(0, local, 0));
      pair.reapAll();
      pair.fabric.script().failPostsTo(pair.target.localAddress(), FiErrno.ENOENT);
      assertEquals(-2, pair.write(0, local, 0));
      pair.fabric.script().failPostsTo(pair.target.localAddress(), 0);
      assertEquals(POSTED, pair.write(0, local, 0));
      FakeCounters counters = pair.counters();
      assertEquals(3, counters.postErrors());
      assertEquals(0, counters.violations());
      assertEquals(2, counters.posts());
    }
  }

  @Test
  void maxTxIsReportedAndEnforced() {
    try (Pair pair = new Pair(4, 64)) {
      pair.fabric.script().maxTx(2);
      assertEquals(2, pair.initiator.maxTx());
      MemorySegment local = pair.local(8, 0);
      assertEquals(POSTED, pair.write(0, local, 0));
      assertEquals(POSTED, pair.write(1, local, 0));
      assertEquals(AGAIN, pair.write(2, local, 0));
      RecordingSink sink = new RecordingSink();
      assertEquals(1, pair.initiator.reap(sink, 1));
      assertEquals(POSTED, pair.write(2, local, 0));
      assertEquals(AGAIN, pair.write(3, local, 0));
    }
  }

  @Test
  void maxTxZeroReportsNoDepthAndRefusesNothing() {
    try (Pair pair = new Pair(8, 64)) {
      pair.fabric.script().maxTx(0);
      assertEquals(0, pair.initiator.maxTx());
      MemorySegment local = pair.local(8, 0);
      for (int slot = 0; slot < 8; slot++) {
        assertEquals(POSTED, pair.write(slot, local, 0));
      }
    }
  }

  @Test
  void maxTxCanReportZeroAndStillRefuse() {
    try (Pair pair = new Pair(4, 64)) {
      pair.fabric.script().maxTx(0, 1);
      assertEquals(0, pair.initiator.maxTx());
      MemorySegment local = pair.local(8, 0);
      assertEquals(POSTED, pair.write(0, local, 0));
      assertEquals(AGAIN, pair.write(1, local, 0));
    }
  }

  @Test
  void heldCompletionsMoveNoBytesUntilReleased() {
    try (Pair pair = new Pair(3, 64)) {
      pair.fabric.script().holdCompletions();
      MemorySegment source = pair.local(16, 5);
      for (int slot = 0; slot < 3; slot++) {
        assertEquals(POSTED, pair.write(slot, source, 16L * slot));
      }
      assertEquals(0, pair.reapAll().entries.size());
      assertEquals(3, pair.fabric.script().heldCompletions());
      assertEquals(0, pair.counters().bytesWritten());
      assertEquals(3, pair.fabric.script().releaseCompletions());
      assertEquals(List.of(0, 1, 2), pair.reapAll().slots());
      assertEquals(48, pair.counters().bytesWritten());
      assertEquals(Checksums.crc32c(source), Checksums.crc32c(pair.targetMemory.asSlice(32, 16)));
    }
  }

  @Test
  void heldCompletionsCanBeReleasedReversedOrInAnyOrder() {
    try (Pair pair = new Pair(4, 64)) {
      pair.fabric.script().holdCompletions();
      MemorySegment local = pair.local(8, 0);
      for (int slot = 0; slot < 4; slot++) {
        pair.write(slot, local, 0);
      }
      assertEquals(2, pair.fabric.script().releaseCompletions(2, 0));
      assertEquals(List.of(2, 0), pair.reapAll().slots());
      assertThrows(
          IllegalArgumentException.class, () -> pair.fabric.script().releaseCompletions(0));
      assertEquals(2, pair.fabric.script().releaseCompletionsReversed());
      assertEquals(List.of(3, 1), pair.reapAll().slots());
    }
  }

  @Test
  void holdingOnlyMatchingOpsReordersThemBehindLaterOnes() {
    try (Pair pair = new Pair(3, 64)) {
      pair.fabric.script().holdCompletions(OpMatcher.nth(1));
      MemorySegment local = pair.local(8, 0);
      for (int slot = 0; slot < 3; slot++) {
        pair.write(slot, local, 0);
      }
      assertEquals(List.of(1, 2), pair.reapAll().slots());
      pair.fabric.script().stopHolding().releaseCompletions();
      assertEquals(List.of(0), pair.reapAll().slots());
    }
  }

  @Test
  void newestFirstOrderReversesEachReap() {
    try (Pair pair = new Pair(3, 64)) {
      pair.fabric.script().completionOrder(FakeScript.CompletionOrder.NEWEST_FIRST);
      MemorySegment local = pair.local(8, 0);
      for (int slot = 0; slot < 3; slot++) {
        pair.write(slot, local, 0);
      }
      RecordingSink sink = new RecordingSink();
      pair.initiator.reap(sink, 2);
      assertEquals(POSTED, pair.write(1, local, 0));
      pair.initiator.reap(sink, 5);
      assertEquals(List.of(2, 1, 1, 0), sink.slots());
    }
  }

  @Test
  void aChosenOpFailsWithTheExactMessageAndMovesNoBytes() {
    try (Pair pair = new Pair(3, 64)) {
      pair.fabric.script().failOp(OpMatcher.nth(2), FiErrno.EIO, -5, "Input/output error");
      MemorySegment local = pair.local(8, 1);
      for (int slot = 0; slot < 3; slot++) {
        assertEquals(POSTED, pair.write(slot, local, 8L * slot));
      }
      List<RecordingSink.Entry> entries = pair.reapAll().entries;
      assertEquals(0, entries.get(0).errno());
      assertEquals(
          new RecordingSink.Entry(
              1,
              5,
              -5,
              "completion error: Input/output error (err=5); provider: Input/output error"
                  + " (prov_errno=-5)"),
          entries.get(1));
      assertEquals(0, entries.get(2).errno());
      assertEquals(16, pair.counters().bytesWritten());
      assertEquals(1, pair.counters().errorCompletions());
    }
  }

  @Test
  void failNextOpsAndMatchersCombine() {
    try (Pair pair = new Pair(4, 64)) {
      pair.fabric
          .script()
          .failNextOps(1, FiErrno.ECANCELED, 107, "Transport endpoint is not connected")
          .failOp(OpMatcher.reads().and(OpMatcher.slot(3)), FiErrno.ENOTCONN, 32, "Broken pipe");
      MemorySegment local = pair.local(8, 1);
      pair.write(0, local, 0);
      pair.write(1, local, 0);
      pair.read(2, local, 0);
      pair.read(3, local, 0);
      List<RecordingSink.Entry> entries = pair.reapAll().entries;
      assertEquals(
          List.of(125, 0, 0, 107), entries.stream().map(RecordingSink.Entry::errno).toList());
      assertEquals(
          "completion error: Transport endpoint is not connected (err=107); provider: Broken pipe"
              + " (prov_errno=32)",
          entries.get(3).message());
      pair.fabric.script().clearFaults();
      pair.read(3, local, 0);
      assertEquals(0, pair.reapAll().only().errno());
    }
  }

  @Test
  void aFailedCqReadDeliversTheEarlierEntriesFirst() {
    try (Pair pair = new Pair(3, 64)) {
      pair.fabric.script().failNextCqRead(1, FiErrno.EIO);
      MemorySegment local = pair.local(8, 0);
      for (int slot = 0; slot < 3; slot++) {
        pair.write(slot, local, 0);
      }
      RecordingSink sink = new RecordingSink();
      DmaException failure = assertThrows(DmaException.class, () -> pair.initiator.reap(sink, 10));
      assertEquals("fi_cq_read: Input/output error (-5)", failure.getMessage());
      assertEquals(DmaException.Kind.FABRIC, failure.kind());
      assertEquals(5, failure.fabricErrno());
      assertEquals(List.of(0), sink.slots());
      assertEquals(2, pair.initiator.reap(sink, 10));
      assertEquals(List.of(0, 1, 2), sink.slots());
      assertEquals(1, pair.counters().cqReadFailures());
    }
  }

  @Test
  void aFailedCqReadCanCarryAnyMessage() {
    try (Pair pair = new Pair(1, 64)) {
      pair.fabric.script().failNextCqRead(0, "completion carried a null op_context");
      pair.write(0, pair.local(8, 0), 0);
      RecordingSink sink = new RecordingSink();
      DmaException failure = assertThrows(DmaException.class, () -> pair.initiator.reap(sink, 10));
      assertEquals("completion carried a null op_context", failure.getMessage());
      assertEquals(0, sink.entries.size());
      assertEquals(1, pair.initiator.reap(sink, 10));
    }
  }

  @Test
  void anUnreachablePeerAnswersAgainForEver() {
    try (Pair pair = new Pair(1, 64)) {
      byte[] target = pair.target.localAddress();
      pair.fabric.script().unreachable(target);
      MemorySegment local = pair.local(8, 0);
      for (int i = 0; i < 10_000; i++) {
        assertEquals(AGAIN, pair.write(0, local, 0));
      }
      assertEquals(0, pair.reapAll().entries.size());
      pair.fabric.script().reachable(target);
      assertEquals(POSTED, pair.write(0, local, 0));
      assertEquals(10_000, pair.counters().againAnswers());
    }
  }

  @Test
  void localRegistrationIsRequiredLikeEfa() {
    try (Pair pair = new Pair(2, 64, script -> script.requireLocalRegistration(true))) {
      assertTrue(pair.initiator.requiresLocalRegistration());
      MemorySegment local = pair.local(32, 0);
      long key = pair.region.advertisement().remoteKey();
      long registration = pair.initiator.register(local.address(), 32);
      long descriptor = pair.initiator.descriptor(registration);

      assertEquals(-22, write(pair, local.address(), 32, 0, key));
      assertEquals(
          "postWrite: descriptor 0, but local registration is required (FI_MR_LOCAL)",
          pair.counters().lastViolation());
      assertEquals(-22, write(pair, local.address(), 32, registration, key));
      assertTrue(pair.counters().lastViolation().contains("(it is a registration handle)"));
      assertEquals(-22, write(pair, local.address() + 8, 32, descriptor, key));
      assertTrue(pair.counters().lastViolation().contains("not the operand"));
      assertEquals(POSTED, write(pair, local.address() + 8, 24, descriptor, key));
      pair.reapAll();

      pair.initiator.deregister(registration);
      assertEquals(-22, write(pair, local.address(), 32, descriptor, key));
      assertTrue(pair.counters().lastViolation().contains("was deregistered"));

      long foreign = pair.target.descriptor(pair.target.register(local.address(), 32));
      assertEquals(-22, write(pair, local.address(), 32, foreign, key));
      assertTrue(pair.counters().lastViolation().contains("belongs to another endpoint"));

      FakeCounters counters = pair.counters();
      assertEquals(5, counters.violations());
      assertEquals(1, counters.posts());
      assertEquals(2, counters.registrations());
      assertEquals(1, counters.deregistrations());
      assertEquals(1, counters.liveRegistrations());
    }
  }

  @Test
  void deregisteringWhileAnOpUsesTheRegistrationIsAViolation() {
    try (Pair pair = new Pair(1, 64, script -> script.requireLocalRegistration(true))) {
      MemorySegment local = pair.local(8, 0);
      long registration = pair.initiator.register(local.address(), 8);
      long descriptor = pair.initiator.descriptor(registration);
      assertEquals(
          POSTED,
          write(pair, local.address(), 8, descriptor, pair.region.advertisement().remoteKey()));
      pair.initiator.deregister(registration);
      assertTrue(
          pair.counters().lastViolation().contains("was deregistered while op #1 in slot 0"),
          pair.counters().lastViolation());
      pair.initiator.deregister(registration);
      assertTrue(pair.counters().lastViolation().contains("already deregistered"));
      assertEquals(2, pair.counters().violations());
    }
  }

  @Test
  void aHeldOpWhoseRegistrationClosedFailsWithoutTouchingMemory() {
    try (Pair pair = new Pair(1, 64, script -> script.requireLocalRegistration(true))) {
      pair.fabric.script().holdCompletions();
      MemorySegment local = pair.local(8, 0);
      long registration = pair.initiator.register(local.address(), 8);
      assertEquals(
          POSTED,
          write(
              pair,
              local.address(),
              8,
              pair.initiator.descriptor(registration),
              pair.region.advertisement().remoteKey()));
      pair.initiator.deregister(registration);
      pair.fabric.script().releaseCompletions();
      RecordingSink.Entry entry = pair.reapAll().only();
      assertEquals(22, entry.errno());
      assertEquals(0, pair.counters().bytesWritten());
      assertEquals(1, pair.counters().violations());
    }
  }

  @Test
  void violationsCanThrowWhereTheyHappen() {
    try (Pair pair = new Pair(1, 64, script -> script.throwOnViolation(true))) {
      MemorySegment local = pair.local(8, 0);
      assertEquals(POSTED, pair.write(0, local, 0));
      IllegalStateException failure =
          assertThrows(IllegalStateException.class, () -> pair.write(0, local, 0));
      assertEquals(
          "fake fabric violation: postWrite: slot 0 is still owned by op #1, which was not reaped",
          failure.getMessage());
      assertEquals(1, pair.counters().violations());
      assertEquals(0, pair.reapAll().only().errno()); // the first op is untouched
    }
  }

  @Test
  void deregisteringAfterTheEndpointClosedIsAViolation() {
    try (Pair pair = new Pair(1, 64)) {
      long registration = pair.initiator.register(pair.local(8, 0).address(), 8);
      pair.initiator.close();
      pair.initiator.deregister(registration);
      assertTrue(pair.counters().lastViolation().contains("after the endpoint closed"));
      assertEquals(1, pair.counters().registrationsOpenAtClose());
    }
  }

  @Test
  void aMatcherThatThrowsLeavesNoHalfPostedOp() {
    try (Pair pair = new Pair(1, 64)) {
      pair.fabric
          .script()
          .holdCompletions(
              op -> {
                throw new IllegalStateException("matcher bug (expected by the test)");
              });
      MemorySegment local = pair.local(8, 0);
      assertThrows(IllegalStateException.class, () -> pair.write(0, local, 0));
      pair.fabric.script().stopHolding();
      assertEquals(POSTED, pair.write(0, local, 0));
      assertEquals(0, pair.reapAll().only().errno());
    }
  }

  @Test
  void withoutLocalRegistrationDescriptorsAreIgnored() {
    try (Pair pair = new Pair(1, 64)) {
      assertEquals(
          POSTED,
          write(
              pair, pair.local(8, 0).address(), 8, 12345, pair.region.advertisement().remoteKey()));
      assertEquals(0, pair.counters().violations());
    }
  }

  @Test
  void scribbledContextsArePoliced() {
    try (Pair pair = new Pair(2, 64, script -> script.scribbleContexts(true))) {
      MemorySegment local = pair.local(8, 0);
      assertEquals(POSTED, pair.write(0, local, 0));
      MemorySegment context = pair.initiator.opContext(0);
      assertEquals((1L << 2) | (1L << 9), context.get(java.lang.foreign.ValueLayout.JAVA_LONG, 0));
      assertEquals(pair.peer, context.get(java.lang.foreign.ValueLayout.JAVA_LONG, 8));
      pair.reapAll();
      assertEquals(0, pair.counters().violations());

      assertEquals(POSTED, pair.write(1, local, 0));
      pair.initiator.opContext(1).set(java.lang.foreign.ValueLayout.JAVA_BYTE, 40, (byte) 0);
      pair.reapAll();
      assertEquals(1, pair.counters().violations());
      assertTrue(pair.counters().lastViolation().contains("FI_CONTEXT2"));
    }
  }

  @Test
  void removingAPeerWithOpsOutstandingFlushesThemLikeEfa() {
    try (Pair pair = new Pair(4, 64, script -> script.flushOnRemove(true))) {
      MemorySegment local = pair.local(8, 0);
      pair.fabric.script().holdCompletions(OpMatcher.slot(1));
      pair.write(0, local, 0); // completed, not reaped
      pair.write(1, local, 0); // held: still on the wire
      assertEquals(0, pair.initiator.removePeer(pair.peer));
      List<RecordingSink.Entry> entries = pair.reapAll().entries;
      assertEquals(List.of(0, 1), entries.stream().map(RecordingSink.Entry::slot).toList());
      for (RecordingSink.Entry entry : entries) {
        assertEquals(
            "completion error: Operation canceled (err=125); provider: Flushed during queue pair"
                + " destroy (prov_errno=1)",
            entry.message());
      }
      FakeCounters counters = pair.counters();
      assertEquals(2, counters.flushedOps());
      assertEquals(1, counters.removesWithOpsOutstanding());
      assertEquals(0, pair.fabric.script().heldCompletions());
    }
  }

  @Test
  void withoutFlushARemovalWithOpsOutstandingIsOnlyCounted() {
    try (Pair pair = new Pair(1, 64)) {
      pair.write(0, pair.local(8, 0), 0);
      pair.initiator.removePeer(pair.peer);
      assertEquals(0, pair.reapAll().only().errno());
      assertEquals(1, pair.counters().removesWithOpsOutstanding());
      assertEquals(0, pair.counters().flushedOps());
    }
  }

  @Test
  void aTargetThatHasNotInsertedTheInitiatorRejectsItLikeEfa() {
    try (Pair pair = new Pair(1, 64, script -> script.rejectUninsertedInitiator(true))) {
      MemorySegment local = pair.local(8, 0);
      pair.write(0, local, 0);
      RecordingSink.Entry entry = pair.reapAll().only();
      assertEquals(107, entry.errno());
      assertEquals(14, entry.providerErrno());
      assertTrue(
          entry
              .message()
              .startsWith(
                  "completion error: Transport endpoint is not connected (err=107); provider:"
                      + " Unknown peer"));
      pair.target.insertPeer(pair.initiator.localAddress());
      pair.write(0, local, 0);
      assertEquals(0, pair.reapAll().only().errno());
    }
  }

  @Test
  void registrationFailsOnDemandAndWhenPinnableMemoryRunsOut() {
    try (Pair pair = new Pair(1, 64)) {
      MemorySegment local = pair.local(4096, 0);
      pair.fabric.script().failNextRegistrations(1, FiErrno.ENOMEM);
      DmaException failure =
          assertThrows(DmaException.class, () -> pair.initiator.register(local.address(), 4096));
      assertEquals("fi_mr_reg: Cannot allocate memory (-12)", failure.getMessage());
      assertEquals(12, failure.fabricErrno());
      long first = pair.initiator.register(local.address(), 4096);

      pair.fabric.script().pinnableBytes(6000);
      assertThrows(DmaException.class, () -> pair.initiator.register(local.address(), 2048));
      pair.initiator.deregister(first);
      long second = pair.initiator.register(local.address(), 2048);
      pair.initiator.deregister(second);

      FakeCounters counters = pair.counters();
      assertEquals(2, counters.registrationFailures());
      assertEquals(2, counters.registrations());
      assertEquals(2, counters.deregistrations());
      assertEquals(0, counters.liveRegistrations());
      assertEquals(0, counters.violations());
    }
  }

  @Test
  void insertsFailOnDemand() {
    try (Pair pair = new Pair(1, 64)) {
      pair.fabric.script().failNextInserts(1, FiErrno.ENOMEM);
      DmaException failure =
          assertThrows(
              DmaException.class, () -> pair.initiator.insertPeer(pair.target.localAddress()));
      assertEquals("fi_av_insert: Cannot allocate memory (-12)", failure.getMessage());
      assertEquals(1, pair.initiator.insertPeer(pair.target.localAddress()));
    }
  }

  @Test
  void aTargetThatMustProgressMovesBytesOnlyWhenItDoes() {
    try (Pair pair = new Pair(1, 64, script -> script.targetProgressRequired(true))) {
      MemorySegment source = pair.local(8, 3);
      assertEquals(POSTED, pair.write(0, source, 0));
      for (int i = 0; i < 100; i++) {
        assertEquals(0, pair.reapAll().entries.size());
      }
      assertEquals(0, pair.counters().bytesWritten());
      pair.target.progress();
      assertEquals(0, pair.reapAll().only().errno());
      assertEquals(Checksums.crc32c(source), Checksums.crc32c(pair.targetMemory.asSlice(0, 8)));
    }
  }

  @Test
  void efaAddressesShareIdentityAcrossARecycledQpn() {
    try (FakeFabric fabric = FakeFabric.create("efa-addresses")) {
      fabric.script().likeEfaDirect();
      FakeEndpoint server = fabric.openEndpoint();
      FakeEndpoint first = fabric.openEndpoint();
      byte[] firstAddress = first.localAddress();
      assertEquals(32, firstAddress.length);
      assertEquals(12, server.describe().addrFormat());
      first.close();
      byte[] secondAddress = fabric.openEndpoint().localAddress();
      assertTrue(!java.util.Arrays.equals(firstAddress, secondAddress));
      assertEquals(
          java.util.Arrays.toString(server.peerIdentity(firstAddress)),
          java.util.Arrays.toString(server.peerIdentity(secondAddress)));
      assertEquals(18, server.peerIdentity(secondAddress).length);
      DmaException failure =
          assertThrows(DmaException.class, () -> server.peerIdentity(new byte[16]));
      assertEquals("efa address is 16 bytes, not 32", failure.getMessage());
    }
  }

  @Test
  void resetRestoresAPerfectFabric() {
    try (Pair pair = new Pair(1, 64)) {
      pair.fabric
          .script()
          .againTimes(5)
          .maxTx(1)
          .failNextOps(3, 5, 5, "x")
          .requireLocalRegistration(true)
          .reset();
      assertEquals(POSTED, pair.write(0, pair.local(8, 0), 0));
      assertEquals(0, pair.reapAll().only().errno());
      assertEquals(0, pair.initiator.maxTx());
    }
  }

  private static int write(Pair pair, long local, long length, long descriptor, long key) {
    return pair.initiator.postWrite(0, pair.peer, local, length, descriptor, 0, key);
  }
}
