package dev.dma.libfabric;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dma.api.Advertisement;
import dev.dma.api.RemoteAccess;
import dev.dma.libfabric.internal.Abi;
import dev.dma.spi.ExposedRegion;
import dev.dma.spi.FabricEndpoint;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * sockets' {@code fi_av_remove} from libfabric 2.5 on answers {@code -FI_EINVAL} for a peer it
 * never connected to, and removes it all the same ({@link Quirks#socketsRemovalAnswersEinval}): dma
 * reports that removal as the success it is, on the versions it applies to, and on no other.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class SocketsRemovalQuirkTest {
  private static final String SOCKETS = "libfabric:sockets";

  private static boolean quirkApplies() {
    return Libfabric.version() >= Abi.FI_VERSION_2_5;
  }

  @Test
  void theQuirkIsPinnedToSocketsFromLibfabric25On() {
    int v1x17 = 1 << 16 | 17;
    int v2x1 = 2 << 16 | 1;
    int v2x4 = 2 << 16 | 4;
    assertFalse(Quirks.socketsRemovalAnswersEinval("sockets", v1x17));
    assertFalse(Quirks.socketsRemovalAnswersEinval("sockets", v2x1));
    assertFalse(Quirks.socketsRemovalAnswersEinval("sockets", v2x4));
    assertTrue(Quirks.socketsRemovalAnswersEinval("sockets", Abi.FI_VERSION_2_5));
    assertTrue(Quirks.socketsRemovalAnswersEinval("sockets", Abi.FI_VERSION_2_6));
    assertFalse(Quirks.socketsRemovalAnswersEinval("tcp;ofi_rxm", Abi.FI_VERSION_2_6));
    assertFalse(Quirks.socketsRemovalAnswersEinval("shm", Abi.FI_VERSION_2_6));
  }

  /**
   * A peer inserted and removed without ever being used: on 2.5+ sockets answered {@code
   * -FI_EINVAL} and dma confirmed the removal (the counter says so); before 2.5 it answered 0 and
   * the quirk path never ran. Either way the caller sees 0, and the handle is dead.
   */
  @Test
  void removingANeverUsedPeerSucceedsAndOnlyTheAffectedVersionsTakeTheQuirkPath() {
    Assumptions.assumeTrue(Libfabric.availability().available(), Libfabric.availability().reason());
    LoopbackTest.assumeOffered(SOCKETS);
    try (FabricEndpoint endpoint = ErrorPathsTest.opener(SOCKETS).get()) {
      LibfabricEndpoint sockets = (LibfabricEndpoint) endpoint;
      long handle = endpoint.insertPeer(endpoint.localAddress());
      assertEquals(0, endpoint.removePeer(handle));
      assertEquals(
          quirkApplies() ? 1 : 0,
          sockets.quirkRemovals(),
          "libfabric "
              + Libfabric.versionText(Libfabric.version())
              + ": sockets' answer to removing a never-connected peer");
      assertEquals(-Abi.FI_ENOENT, endpoint.removePeer(handle), "a second removal");
      endpoint.openSlots(1);
      assertEquals(-Abi.FI_EINVAL, endpoint.postWrite(0, handle, 0, 1, 0, 0, 0));
      // The same address again is a fresh, usable entry.
      long again = endpoint.insertPeer(endpoint.localAddress());
      assertEquals(0, endpoint.removePeer(again));
    }
  }

  /**
   * A peer that was written to has a connection, so sockets answers 0 on every version: the quirk
   * path must not run (and so cannot hide a real failure of a used peer).
   */
  @Test
  void removingAUsedPeerNeverTakesTheQuirkPath() {
    Assumptions.assumeTrue(Libfabric.availability().available(), Libfabric.availability().reason());
    LoopbackTest.assumeOffered(SOCKETS);
    try (Loopback loopback = new Loopback(ErrorPathsTest.opener(SOCKETS))) {
      MemorySegment remote = loopback.arena.allocate(4096, 4096);
      MemorySegment local = loopback.arena.allocate(4096, 4096);
      ExposedRegion region = loopback.expose(remote, RemoteAccess.READ_WRITE);
      Advertisement ad = region.advertisement();
      Loopback.fill(local, 7);
      loopback.transfer(true, local.asSlice(0, 64), ad.remoteAddress(), ad.remoteKey());
      assertEquals(0, loopback.initiator.removePeer(loopback.peer));
      assertEquals(0, ((LibfabricEndpoint) loopback.initiator).quirkRemovals());
    }
  }
}
