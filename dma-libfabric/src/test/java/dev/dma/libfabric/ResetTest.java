package dev.dma.libfabric;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dma.api.Advertisement;
import dev.dma.api.RemoteAccess;
import dev.dma.spi.ExposedRegion;
import dev.dma.spi.FabricEndpoint;
import java.lang.foreign.MemorySegment;
import java.util.stream.Stream;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * {@link LibfabricEndpoint#reset()} on real providers, and the finding behind {@link
 * dev.dma.spi.FabricEndpoint.Capability#REMOVAL_FLUSHES}: operations posted to a target that never
 * progresses (so delivery-complete writes and reads cannot complete) are not flushed by {@code
 * fi_av_remove}, and are gone, without a completion and without touching the local operand, after a
 * reset.
 */
class ResetTest {
  private static final int OPS = 8;
  private static final long SIZE = 64 << 10;
  private static final long QUIET_NS = 300_000_000L;

  @BeforeAll
  static void libfabric() {
    LoopbackTest.libfabric();
  }

  static Stream<String> providers() {
    return Stream.of(
        "libfabric:tcp;ofi_rxm",
        "libfabric:sockets",
        "libfabric:shm",
        "libfabric:net",
        "libfabric:udp;ofi_rxd");
  }

  /** Reaps the initiator alone (the target is never progressed) for {@code nanos}. */
  private static void reapOnly(Loopback loopback, long nanos) {
    long until = System.nanoTime() + nanos;
    while (System.nanoTime() < until) {
      loopback.initiator.reap(loopback.sink, Loopback.SLOTS);
      Thread.onSpinWait();
    }
  }

  /**
   * One transfer that completes, so the connection is up and later posts are accepted rather than
   * refused with {@code -FI_EAGAIN} while it is set up (which only the target's progress does).
   */
  private static void connect(Loopback loopback, Advertisement ad) {
    MemorySegment one = loopback.arena.allocate(64, 64);
    loopback.transfer(true, one, Loopback.remote(ad, 0), ad.remoteKey());
    loopback.sink.completed = 0;
    loopback.sink.failed = 0;
    loopback.sink.state[0] = 0;
  }

  @ParameterizedTest
  @MethodSource("providers")
  void removingAPeerDoesNotFlushItsPostedOperations(String name) {
    try (Loopback loopback = LoopbackTest.loopback(name)) {
      assertFalse(
          loopback.initiator.capabilities().contains(FabricEndpoint.Capability.REMOVAL_FLUSHES));
      MemorySegment remote = loopback.arena.allocate(SIZE * OPS, 4096);
      MemorySegment local = loopback.arena.allocate(SIZE, 4096);
      try (ExposedRegion region = loopback.expose(remote, RemoteAccess.READ_WRITE)) {
        Advertisement ad = region.advertisement();
        connect(loopback, ad);
        int posted = 0;
        for (int slot = 0; slot < OPS; slot++) {
          long rc =
              loopback.initiator.postWrite(
                  slot,
                  loopback.peer,
                  local.address(),
                  SIZE,
                  0,
                  Loopback.remote(ad, slot * SIZE),
                  ad.remoteKey());
          if (rc == FabricEndpoint.POSTED) {
            posted++;
          }
        }
        assertTrue(posted > 0, name + ": nothing was posted");
        reapOnly(loopback, QUIET_NS);
        int beforeRemoval = loopback.sink.completed + loopback.sink.failed;
        assertEquals(0, loopback.initiator.removePeer(loopback.peer));
        reapOnly(loopback, QUIET_NS);
        int flushed = loopback.sink.failed;
        int after = loopback.sink.completed + loopback.sink.failed - beforeRemoval;
        System.out.printf(
            "ResetTest %s: %d posted, %d completed before removal, %d after it (%d failed)%n",
            name, posted, beforeRemoval, after, flushed);
        // The finding: whatever was still posted is not flushed back by the removal, so only a
        // reset can end it. (sockets progresses by itself and completes everything first.)
        assertTrue(
            beforeRemoval == posted || after < posted - beforeRemoval,
            name + ": fi_av_remove flushed every posted operation; removalFlushes() could be true");
        loopback.initiator.reset();
      }
    }
  }

  @ParameterizedTest
  @MethodSource("providers")
  void aResetDiscardsPostedReadsWithoutTouchingTheirBuffersAndTheEndpointServesAgain(String name) {
    try (Loopback loopback = LoopbackTest.loopback(name)) {
      MemorySegment remote = loopback.arena.allocate(SIZE * OPS, 4096);
      remote.fill((byte) 0x5a);
      MemorySegment landing = loopback.arena.allocate(SIZE * OPS, 4096);
      landing.fill((byte) 0x11);
      try (ExposedRegion region = loopback.expose(remote, RemoteAccess.READ_WRITE)) {
        Advertisement ad = region.advertisement();
        connect(loopback, ad);
        remote.fill((byte) 0x5a);
        int posted = 0;
        for (int slot = 0; slot < OPS; slot++) {
          long rc =
              loopback.initiator.postRead(
                  slot,
                  loopback.peer,
                  landing.address() + slot * SIZE,
                  SIZE,
                  0,
                  Loopback.remote(ad, slot * SIZE),
                  ad.remoteKey());
          if (rc == FabricEndpoint.POSTED) {
            posted++;
          }
        }
        assertTrue(posted > 0, name + ": nothing was posted");
        // Whatever landed or completed before the reset is the provider's business (sockets
        // progresses by itself, shm answers reads without the target); after reset() returns,
        // nothing may: the landing buffer stays as it was then, and no discarded slot completes.
        loopback.initiator.reap(loopback.sink, Loopback.SLOTS);
        loopback.initiator.reset();
        int settled = loopback.sink.completed + loopback.sink.failed;
        MemorySegment atReset = loopback.arena.allocate(landing.byteSize(), 4096);
        atReset.copyFrom(landing);
        long until = System.nanoTime() + QUIET_NS;
        while (System.nanoTime() < until) {
          loopback.initiator.reap(loopback.sink, Loopback.SLOTS);
          loopback.target.progress();
        }
        assertEquals(
            settled,
            loopback.sink.completed + loopback.sink.failed,
            name + ": a discarded operation completed after the reset");
        assertEquals(
            -1L,
            landing.mismatch(atReset),
            name + ": a read discarded by the reset wrote its landing buffer after the reset");
        System.out.printf(
            "ResetTest %s: %d reads posted, %d settled before the reset, the rest discarded%n",
            name, posted, settled);

        // The same slots serve again after the peer is inserted anew.
        long peer = loopback.initiator.insertPeer(loopback.target.localAddress());
        MemorySegment source = loopback.arena.allocate(SIZE, 4096);
        Loopback.fill(source, 42);
        for (int slot = 0; slot < 2; slot++) {
          loopback.sink.state[slot] = 0;
          assertEquals(
              FabricEndpoint.POSTED,
              loopback.post(
                  true, slot, peer, source, Loopback.remote(ad, slot * SIZE), ad.remoteKey()));
          assertEquals(1, loopback.await(slot), () -> name + ": " + loopback.sink.message[0]);
          assertEquals(
              -1L,
              source.mismatch(remote.asSlice(slot * SIZE, SIZE)),
              name + ": bytes after reset");
        }
      }
    }
  }
}
