package dev.dma.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.dma.api.Advertisement;
import dev.dma.api.Checksums;
import dev.dma.api.Completion;
import dev.dma.api.Direction;
import dev.dma.api.DmaException;
import dev.dma.api.RemoteAccess;
import dev.dma.core.PassiveTarget;
import dev.dma.provider.efa.EfaFabric;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.Arrays;
import org.junit.jupiter.api.Test;

/**
 * The conformance suite plus what is particular to EFA: 32-byte addresses, every operand
 * registered, virtual addressing, and efa-direct's initiator-first rule broken on purpose.
 */
abstract class EfaConformanceSuite extends ConformanceSuite {
  /** Which EFA fabric's rules apply. */
  protected abstract EfaFabric fabric();

  /** efa has no way to look at a peer's endpoint: a stale advertisement ends at a deadline. */
  @Override
  protected boolean tellsAGonePeer() {
    return false;
  }

  @Test
  void endpointsAreEfaShaped() {
    assertEquals(32, service.localAddress().length);
    assertEquals(32, target.localAddress().length);
    assertTrue(service.endpointInfo().requiresLocalMr(), "every operand is registered");
    assertTrue(service.endpointInfo().usesVirtualAddressing());
  }

  @Test
  void addressesOfAnyOtherLengthAreRefusedBeforeTheAddressVector() {
    byte[] own = service.localAddress();
    for (int length : new int[] {1, 18, 31, 33, 64}) {
      DmaException error =
          assertThrows(DmaException.class, () -> service.addPeer(40, Arrays.copyOf(own, length)));
      assertEquals("efa address is " + length + " bytes, not 32", error.getMessage());
    }
  }

  /** efa-direct's initiator-first rule, broken on purpose: ENOTCONN with advice; nothing lands. */
  @Test
  void aTargetThatHasNotInsertedTheInitiatorFailsWithEnotconn() throws Exception {
    assumeTrue(fabric().initiatorFirst(), fabric().configuredName() + " handshakes instead");
    PassiveTarget stranger = PassiveTarget.start(configuration(), provider(), Duration.ZERO);
    try {
      MemorySegment exposed = arena.allocate(4096, 4096);
      Advertisement ad = stranger.expose(exposed, RemoteAccess.READ_WRITE).advertisement();
      MemorySegment local = arena.allocate(64);
      local.fill((byte) 0x5a);
      assertTrue(service.submit(request(50, ad, Direction.TO_PEER, new Buffer(1, local))));
      Completion<Buffer> failed = completions.take();
      assertFalse(failed.outcome().isDone(), "an RMA to a target that does not know us landed");
      DmaException error = failed.outcome().error();
      assertEquals(DmaException.Kind.TRANSFER, error.kind());
      assertEquals(107, error.fabricErrno(), error.getMessage());
      assertTrue(error.getMessage().startsWith("client 50 at "), error.getMessage());
      assertTrue(error.getMessage().contains(": completion error: "), error.getMessage());
      assertTrue(error.getMessage().contains("; not connected: "), error.getMessage());
      assertEquals(Checksums.crc32c(new byte[4096]), Checksums.crc32c(exposed));
      // Inserting the server fixes it.
      stranger.insertPeer(service.localAddress());
      service.removePeer(50);
      assertTrue(service.submit(request(51, ad, Direction.TO_PEER, new Buffer(2, local))));
      Completion<Buffer> fine = completions.take();
      assertTrue(fine.outcome().isDone(), () -> fine.outcome().error().getMessage());
    } finally {
      stranger.close();
    }
  }
}
