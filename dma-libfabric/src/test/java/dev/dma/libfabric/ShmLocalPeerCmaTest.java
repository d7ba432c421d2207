package dev.dma.libfabric;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import dev.dma.api.Advertisement;
import dev.dma.api.RemoteAccess;
import dev.dma.libfabric.internal.Abi;
import dev.dma.spi.ExposedRegion;
import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Two shm endpoints of one process use CMA for transfers above the inject size, on every libfabric
 * version ({@link Quirks#shmSkipsCmaCheckForLocalPeers}): on 2.x shm never checks CMA for a peer of
 * its own process unless dma inserts it under an alias, and then every such transfer goes through
 * shm's bounce buffers, one hand-off between the two endpoints' threads per segment.
 *
 * <p>The evidence is the initiator's own region header in {@code /dev/shm}, where shm records the
 * outcome of its CMA check; its layout is read from each version's {@code prov/shm/src/smr_util.h}
 * and told apart by the region's version byte. A layout this test does not know fails it on a
 * version where the quirk applies (read the new header and add it), and is not read on the others
 * (1.17: CMA in one process was seen with strace instead).
 */
class ShmLocalPeerCmaTest {
  private static final int SIZE = 1 << 16;

  /** {@code SMR_VERSION} of libfabric 2.1.0: {@code cma_cap_peer} is the byte at 8. */
  private static final int LAYOUT_2_1 = 8;

  /** 2.1.0's {@code SMR_VMA_CAP_ON} (NA is 0, OFF is 2). */
  private static final int CAP_ON_2_1 = 1;

  /**
   * {@code SMR_VERSION} of libfabric 2.6.0: {@code flags} is the 16-bit word at 2 ({@code
   * SMR_FLAG_CMA_INIT} is bit 1), {@code peer_vma_caps} the byte at 5 ({@code FI_SHM_P2P_CMA} is
   * bit 1).
   */
  private static final int LAYOUT_2_6 = 10;

  @BeforeAll
  static void libfabric() {
    LoopbackTest.libfabric();
  }

  @Test
  void theAliasIsPinnedToShmFromTwoZero() {
    assertFalse(Quirks.shmSkipsCmaCheckForLocalPeers("shm", Abi.FI_VERSION_1_20));
    assertTrue(Quirks.shmSkipsCmaCheckForLocalPeers("shm", Abi.FI_VERSION_2_0));
    assertTrue(Quirks.shmSkipsCmaCheckForLocalPeers("shm", Abi.FI_VERSION_2_6));
    assertFalse(Quirks.shmSkipsCmaCheckForLocalPeers("tcp", Abi.FI_VERSION_2_6));
    assertFalse(Quirks.shmSkipsCmaCheckForLocalPeers("sockets", Abi.FI_VERSION_2_6));
  }

  @Test
  void theAliasNamesTheSameFileUnderAnotherString() {
    assertArrayEquals(
        "fi_shm:///4242:0:17\0".getBytes(StandardCharsets.US_ASCII),
        ShmNames.aliasOf("fi_shm://4242:0:17"));
  }

  /**
   * A 64 KiB write and read between two endpoints of this JVM land, and afterwards the initiator's
   * region says CMA was checked and works, so shm chose it for them ({@code smr_select_proto}).
   */
  @Test
  @Timeout(value = 60, unit = TimeUnit.SECONDS)
  void peersInOneProcessUseCrossMemoryAttach() throws IOException {
    try (Loopback loopback = LoopbackTest.loopback("libfabric:shm")) {
      MemorySegment remote = loopback.arena.allocate(SIZE, 4096);
      MemorySegment local = loopback.arena.allocate(SIZE, 4096);
      MemorySegment back = loopback.arena.allocate(SIZE, 4096);
      try (ExposedRegion region = loopback.expose(remote, RemoteAccess.READ_WRITE)) {
        Advertisement ad = region.advertisement();
        Loopback.fill(local, 11);
        loopback.transfer(true, local, ad.remoteAddress(), ad.remoteKey());
        assertEquals(-1L, local.mismatch(remote), "the write's bytes did not land");
        loopback.transfer(false, back, ad.remoteAddress(), ad.remoteKey());
        assertEquals(-1L, back.mismatch(remote), "the read brought other bytes");
      }
      String name = ShmNames.nameOf(loopback.initiator.localAddress());
      assertNotNull(name);
      ByteBuffer header = header(name.substring(ShmNames.SCHEME.length()));
      int layout = Byte.toUnsignedInt(header.get(0));
      boolean aliased = Quirks.shmSkipsCmaCheckForLocalPeers("shm", Libfabric.version());
      switch (layout) {
        case LAYOUT_2_1 ->
            assertEquals(
                CAP_ON_2_1,
                Byte.toUnsignedInt(header.get(8)),
                "cma_cap_peer of the initiator's region (0: never checked, 2: off)");
        case LAYOUT_2_6 -> {
          int flags = Short.toUnsignedInt(header.getShort(2));
          assertTrue((flags & 0b10) != 0, "SMR_FLAG_CMA_INIT not set: CMA was never checked");
          assertTrue((header.get(5) & 0b10) != 0, "peer_vma_caps says CMA is off after the check");
        }
        default -> {
          if (aliased) {
            fail(
                "shm region layout "
                    + layout
                    + " is not known to this test: read this libfabric's prov/shm/src/smr_util.h");
          }
        }
      }
    }
  }

  /**
   * The first 16 bytes of this process's shm region {@code file} in /dev/shm, in native byte order.
   */
  private static ByteBuffer header(String file) throws IOException {
    ByteBuffer header = ByteBuffer.allocate(16).order(ByteOrder.nativeOrder());
    try (FileChannel channel =
        FileChannel.open(ShmNames.DEV_SHM.resolve(Path.of(file)), StandardOpenOption.READ)) {
      while (header.hasRemaining() && channel.read(header) >= 0) {
        // read until full or end of file
      }
    }
    header.flip();
    assertEquals(16, header.remaining(), "the region file is shorter than its header");
    return header;
  }
}
