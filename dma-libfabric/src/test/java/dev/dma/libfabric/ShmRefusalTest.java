package dev.dma.libfabric;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dma.api.Advertisement;
import dev.dma.api.Errno;
import dev.dma.api.RemoteAccess;
import dev.dma.libfabric.internal.Abi;
import dev.dma.spi.ExposedRegion;
import dev.dma.spi.FabricEndpoint;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * What shm does with an RMA operation its target refuses, pinned per libfabric version, and dma's
 * defence ({@link ShmWriteCheck}, {@link Quirks#shmReportsRefusedRmaAsDone}): from 2.5 a refused
 * write is reported done by shm and must reach the caller as {@code FI_EACCES} with the target
 * unchanged; on 1.17 and 2.1 it never completes (the completion deadline, above this layer, ends
 * it). Two shm endpoints in this JVM ({@link Loopback}); every wait is bounded.
 */
class ShmRefusalTest {
  private static final int REGION = 1 << 16;
  private static final byte TARGET_FILL = 0x11;

  /** How long a write that never completes (1.17, 2.1) is watched. */
  private static final long NEVER_MS = 300;

  @BeforeAll
  static void libfabric() {
    LoopbackTest.libfabric();
  }

  private static boolean reportsRefusedAsDone() {
    return Quirks.shmReportsRefusedRmaAsDone("shm", Libfabric.version());
  }

  @Test
  void theCheckIsPinnedToShmFromTwoFive() {
    assertFalse(Quirks.shmReportsRefusedRmaAsDone("shm", Abi.FI_VERSION_2_5 - 1));
    assertTrue(Quirks.shmReportsRefusedRmaAsDone("shm", Abi.FI_VERSION_2_5));
    assertFalse(Quirks.shmReportsRefusedRmaAsDone("tcp", Abi.FI_VERSION_2_5 + 1));
    assertFalse(Quirks.shmReportsRefusedRmaAsDone("efa", Abi.FI_VERSION_2_5 + 1));
    try (Loopback loopback = LoopbackTest.loopback("libfabric:shm")) {
      assertEquals(
          reportsRefusedAsDone(), ((LibfabricEndpoint) loopback.initiator).writeCheckActive());
    }
  }

  /**
   * A refused write, small (inject) and large (bounce buffer, cross-memory attach or shm's own
   * buffers): a wrong key, a range past the region's end by its last byte only, a region exposed
   * read-only.
   */
  @ParameterizedTest(name = "{0} {1} B")
  @CsvSource({
    "wrong-key, 1",
    "wrong-key, 64",
    "wrong-key, 65536",
    "last-byte-past-the-end, 1",
    "last-byte-past-the-end, 64",
    "last-byte-past-the-end, 65536",
    "read-only-region, 64",
    "read-only-region, 65536"
  })
  @Timeout(value = 60, unit = TimeUnit.SECONDS)
  void aRefusedWriteNeverReachesTheCallerAsDone(String fault, int size) {
    try (Loopback loopback = LoopbackTest.loopback("libfabric:shm")) {
      MemorySegment remote = loopback.arena.allocate(REGION, 4096);
      remote.fill(TARGET_FILL);
      MemorySegment local = loopback.arena.allocate(size, 4096);
      Loopback.fill(local, 7);
      RemoteAccess access =
          fault.equals("read-only-region") ? RemoteAccess.READ : RemoteAccess.READ_WRITE;
      try (ExposedRegion region = loopback.expose(remote, access)) {
        Advertisement ad = region.advertisement();
        long address = ad.remoteAddress();
        long key = ad.remoteKey();
        if (fault.equals("wrong-key")) {
          key += 12345;
        } else if (fault.equals("last-byte-past-the-end")) {
          // Every byte inside but the last: only the check's last range sees it.
          address += REGION - size + 1;
        }
        int rc = loopback.post(true, 0, loopback.peer, local, address, key);
        assertEquals(FabricEndpoint.POSTED, rc, () -> loopback.initiator.errorText(rc));
        if (reportsRefusedAsDone()) {
          assertEquals(2, loopback.await(0), "the refused write was reported done");
          assertEquals(Errno.FI_EACCES, loopback.sink.errno[0]);
          assertTrue(
              loopback.sink.message[0].contains("refused its remote key, address range or access"),
              loopback.sink.message[0]);
        } else {
          // 1.17 and 2.1: the target drops the command; nothing ever completes.
          long until = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(NEVER_MS);
          while (System.nanoTime() < until) {
            loopback.pump();
          }
          assertEquals(0, loopback.sink.state[0], "a refused write completed on a version < 2.5");
        }
        assertUnchanged(remote);
      }
    }
  }

  /**
   * Writes that land pass the check, whatever their bytes: the sampled ends all zero (the check
   * then uses FI_BAND with ones), zero ends around other bytes, and ordinary bytes; every length
   * around the sample's 8; into a region exposed for writing only (registered readable on 2.5+ for
   * the check).
   */
  @ParameterizedTest
  @ValueSource(ints = {1, 7, 8, 9, 16, 17, 64, 4096, 4097, 65536})
  @Timeout(value = 60, unit = TimeUnit.SECONDS)
  void writesThatLandAreReportedDoneWhateverTheirBytes(int size) {
    try (Loopback loopback = LoopbackTest.loopback("libfabric:shm")) {
      MemorySegment remote = loopback.arena.allocate(REGION, 4096);
      MemorySegment local = loopback.arena.allocate(size, 4096);
      for (RemoteAccess access : new RemoteAccess[] {RemoteAccess.READ_WRITE, RemoteAccess.WRITE}) {
        try (ExposedRegion region = loopback.expose(remote, access)) {
          Advertisement ad = region.advertisement();
          for (int pattern = 0; pattern < 3; pattern++) {
            remote.fill(TARGET_FILL);
            switch (pattern) {
              case 0 -> local.fill((byte) 0);
              case 1 -> {
                Loopback.fill(local, 3);
                local.asSlice(0, Math.min(8, size)).fill((byte) 0);
                local.asSlice(size - Math.min(8, size)).fill((byte) 0);
              }
              default -> Loopback.fill(local, 5);
            }
            long address = ad.remoteAddress() + REGION - size; // up to the region's last byte
            loopback.transfer(true, local, address, ad.remoteKey());
            assertEquals(
                -1,
                local.mismatch(remote.asSlice(REGION - size, size)),
                access + " pattern " + pattern);
          }
        }
      }
    }
  }

  /**
   * A burst of writes posted back to back, each check right behind its write ({@link
   * ShmWriteCheck}): inject (64 B, 4 KiB) and cross-memory attach (64 KiB) writes into a region of
   * zeros, with sources whose ends are not zero, so the check's operand is zeros. A check the
   * target handled before its write's bytes landed would read the zeros there, the operand, and
   * fail a write that landed; a check that misjudged the refused write would let it through. On
   * 2.5+ the refused write sits in the middle of the burst, and exactly it fails ({@code
   * FI_EACCES}), the target untouched in its range, while every other write succeeds with its bytes
   * there; before 2.5 it goes last (shm completes in post order there, and a refused write never
   * completes), and the others succeed.
   */
  @Test
  @Timeout(value = 60, unit = TimeUnit.SECONDS)
  void onlyTheRefusedWriteOfAPipelinedBurstFails() {
    pipelinedBurstWithOneRefusedWrite();
  }

  /**
   * The burst above with shm's cross-memory attach off ({@code FI_SHM_DISABLE_CMA=1}, read when
   * libfabric loads, so in a child JVM): writes above 4 KiB then go through shm's segmented path,
   * during which shm refuses the check behind such a write ({@code sar_status}), so the check is
   * owed ({@link ShmWriteCheck#defer}) and posted later, with no later write to that peer before
   * it. The child runs the same assertions and reports how many checks were owed; 2.5+ only, where
   * the check exists.
   */
  @Test
  @Timeout(value = 120, unit = TimeUnit.SECONDS)
  void aCheckOwedBehindASegmentedWriteStillJudgesItsWrite() throws Exception {
    org.junit.jupiter.api.Assumptions.assumeTrue(
        reportsRefusedAsDone(), "the write check exists on shm 2.5+ only");
    ProcessBuilder builder = ShmCloseOrderTest.childOf(WithoutCma.class);
    builder.environment().put("FI_SHM_DISABLE_CMA", "1");
    String text = ShmCloseOrderTest.run(builder, "the burst with CMA off");
    java.util.regex.Matcher owed =
        java.util.regex.Pattern.compile("checks owed: (\\d+)").matcher(text);
    assertTrue(owed.find(), text);
    assertTrue(Long.parseLong(owed.group(1)) > 0, "no check was ever owed:\n" + text);
  }

  /** The child of {@link #aCheckOwedBehindASegmentedWriteStillJudgesItsWrite}. */
  public static final class WithoutCma {
    private WithoutCma() {}

    public static void main(String[] args) {
      System.out.println("checks owed: " + pipelinedBurstWithOneRefusedWrite());
    }
  }

  /** Runs the burst and asserts its outcomes; returns how many write checks were owed. */
  static long pipelinedBurstWithOneRefusedWrite() {
    int writes = 13;
    int refused = reportsRefusedAsDone() ? 6 : writes - 1;
    long[] sizes = {64, 4096, 65536};
    try (Loopback loopback = LoopbackTest.loopback("libfabric:shm")) {
      long stride = 65536 + 4096;
      MemorySegment remote = loopback.arena.allocate(writes * stride, 4096);
      remote.fill((byte) 0);
      MemorySegment[] sources = new MemorySegment[writes];
      try (ExposedRegion region = loopback.expose(remote, RemoteAccess.READ_WRITE)) {
        Advertisement ad = region.advertisement();
        for (int i = 0; i < writes; i++) {
          sources[i] = loopback.arena.allocate(sizes[i % sizes.length], 4096);
          Loopback.fill(sources[i], 11 + i);
          sources[i].set(java.lang.foreign.ValueLayout.JAVA_BYTE, 0, (byte) 0x5c);
          sources[i].set(
              java.lang.foreign.ValueLayout.JAVA_BYTE, sources[i].byteSize() - 1, (byte) 0x5c);
          long key = i == refused ? ad.remoteKey() + 12345 : ad.remoteKey();
          int rc =
              loopback.post(
                  true, i, loopback.peer, sources[i], ad.remoteAddress() + i * stride, key);
          assertEquals(FabricEndpoint.POSTED, rc, () -> loopback.initiator.errorText(rc));
        }
        for (int i = 0; i < writes; i++) {
          if (i == refused && !reportsRefusedAsDone()) {
            long until = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(NEVER_MS);
            while (System.nanoTime() < until) {
              loopback.pump();
            }
            assertEquals(0, loopback.sink.state[i], "a refused write completed before 2.5");
            continue;
          }
          int state = loopback.await(i);
          MemorySegment landed = remote.asSlice(i * stride, sources[i].byteSize());
          if (i == refused) {
            assertEquals(2, state, "the refused write was reported done");
            assertEquals(Errno.FI_EACCES, loopback.sink.errno[i]);
            MemorySegment zeros = Arena.ofAuto().allocate(landed.byteSize());
            assertEquals(-1, landed.mismatch(zeros), "the refused write landed");
          } else {
            int at = i;
            assertEquals(1, state, () -> "write " + at + " failed: " + loopback.sink.message[at]);
            assertEquals(-1, sources[i].mismatch(landed), "write " + i + "'s bytes");
          }
        }
        assertEquals(reportsRefusedAsDone() ? 1 : 0, loopback.sink.failed);
        return ((LibfabricEndpoint) loopback.initiator).shmChecksOwed();
      }
    }
  }

  /**
   * The check's scratch: it starts as the operand, so a check whose result was never written is a
   * refusal; the operand is ones exactly when the source's sampled bytes are all zero; any byte
   * other than the operand's is an acceptance.
   */
  @Test
  void theChecksScratchTakesOnlyAWrittenResultForAnAcceptance() {
    try (Arena arena = Arena.ofConfined()) {
      ShmWriteCheck check = new ShmWriteCheck(2, arena);
      MemorySegment source = arena.allocate(64);
      check.posted(0, 9, source.address(), 64, 4096, 1);
      assertTrue(check.ones[0], "all-zero ends: the operand is ones");
      check.prepare(0, 0);
      assertFalse(check.accepted(0), "an unwritten result is a refusal");
      source.set(java.lang.foreign.ValueLayout.JAVA_BYTE, 63, (byte) 1);
      check.posted(1, 9, source.address(), 64, 4096, 1);
      assertFalse(check.ones[1], "a non-zero end: the operand is zeros");
      check.prepare(1, 0);
      assertFalse(check.accepted(1));
      long result =
          java.lang.foreign.MemorySegment.ofAddress(
                  dev.dma.libfabric.internal.Native.word(check.resultIoc + Abi.IOC_ADDR))
              .address();
      dev.dma.libfabric.internal.Native.MEMORY.set(
          java.lang.foreign.ValueLayout.JAVA_BYTE, result + 15, (byte) 1);
      assertTrue(check.accepted(1), "the last sampled byte alone came back: accepted");
      // A 3-byte write samples 3 bytes at each end (overlapping), never beyond the write.
      check.posted(1, 9, source.address(), 3, 4096, 1);
      check.prepare(1, 0);
      assertEquals(3, dev.dma.libfabric.internal.Native.word(check.rmaIoc + Abi.RMA_IOC_COUNT));
      assertEquals(
          4096,
          dev.dma.libfabric.internal.Native.word(
              check.rmaIoc + Abi.RMA_IOC_SIZE + Abi.RMA_IOC_ADDR));
    }
  }

  /**
   * A remote address in the first page is refused before posting, on every version: shm would
   * answer a read there with an error entry naming no operation (1.17), with nothing (2.1), or with
   * a success that moved nothing (2.6); a write with nothing (1.17, 2.1) or a success (2.6).
   */
  @Test
  @Timeout(value = 60, unit = TimeUnit.SECONDS)
  void aRemoteAddressInTheFirstPageIsRefusedBeforePosting() {
    try (Loopback loopback = LoopbackTest.loopback("libfabric:shm")) {
      MemorySegment remote = loopback.arena.allocate(REGION, 4096);
      MemorySegment local = loopback.arena.allocate(64, 4096);
      try (ExposedRegion region = loopback.expose(remote, RemoteAccess.READ_WRITE)) {
        long key = region.advertisement().remoteKey();
        for (boolean write : new boolean[] {true, false}) {
          for (long address : new long[] {0, 4095}) {
            int rc = loopback.post(write, 0, loopback.peer, local, address, key);
            assertEquals(-Errno.FI_EFAULT, rc, (write ? "write" : "read") + " to " + address);
            assertTrue(loopback.initiator.errorText(rc).contains("first page"));
          }
        }
        // Nothing was posted, so nothing completes, and the endpoint still serves.
        loopback.transfer(false, local, region.advertisement().remoteAddress(), key);
        assertEquals(0, ((LibfabricEndpoint) loopback.initiator).orphanCompletions());
      }
    }
  }

  /**
   * A read from an address the target has not mapped, past the first page (below {@code
   * vm.mmap_min_addr}, so never mapped), fails promptly on every version, though shm says so three
   * ways. shm copies it itself with CMA, and the copy fails:
   *
   * <ul>
   *   <li>2.5 and later: the post answers {@code -FI_EAGAIN} and leaves an error entry naming no
   *       operation ({@code smr_rma_fast}); the post reads that entry at once and fails with its
   *       errno;
   *   <li>2.0 to 2.4: the post answers {@code -FI_EAGAIN} and leaves nothing; the post asks the
   *       kernel whether the target mapped the range ({@link ShmFailedReads}) and fails;
   *   <li>1.x: the post succeeds and an error entry naming no operation follows; it is matched to
   *       the read ({@link ShmFailedReads#ownerOfOrphan}), whose failure is delivered.
   * </ul>
   *
   * Reads on either side of it, in flight with it, succeed.
   */
  @Test
  @Timeout(value = 60, unit = TimeUnit.SECONDS)
  void aReadFromAnUnmappedAddressFailsAloneAndPromptlyOnEveryVersion() {
    try (Loopback loopback = LoopbackTest.loopback("libfabric:shm")) {
      MemorySegment remote = loopback.arena.allocate(REGION, 4096);
      remote.fill((byte) 7);
      MemorySegment local = loopback.arena.allocate(64, 4096);
      MemorySegment before = loopback.arena.allocate(64, 4096);
      MemorySegment after = loopback.arena.allocate(64, 4096);
      try (ExposedRegion region = loopback.expose(remote, RemoteAccess.READ_WRITE)) {
        long key = region.advertisement().remoteKey();
        long good = region.advertisement().remoteAddress();
        LibfabricEndpoint initiator = (LibfabricEndpoint) loopback.initiator;
        // Names exchanged first, so that the reads below are copied at their post (1.x accepts
        // the bad one then instead of refusing it while the peer is not yet known).
        loopback.transfer(false, local, good, key);
        long start = System.nanoTime();
        assertEquals(0, loopback.post(false, 1, loopback.peer, before, good, key));
        int rc = loopback.post(false, 2, loopback.peer, local, 0x8000, key);
        assertEquals(0, loopback.post(false, 3, loopback.peer, after, good, key));
        int version = Libfabric.version();
        if (version >= Abi.FI_VERSION_2_0) {
          assertEquals(-Abi.FI_EIO, rc, "2.x: the post fails");
          assertTrue(
              initiator.errorText(rc).contains("remote range is not mapped in the target process"),
              initiator.errorText(rc));
          assertEquals(version >= Abi.FI_VERSION_2_5 ? 1 : 0, initiator.orphanCompletions());
        } else {
          assertEquals(0, rc, "1.x: accepted");
          assertEquals(2, loopback.await(2), "1.x: the read fails");
          assertTrue(
              loopback.sink.message[2].contains("[0x8000, +64) is not mapped in the target's"),
              loopback.sink.message[2]);
          assertEquals(1, initiator.orphanCompletions());
        }
        assertEquals(1, loopback.await(1), () -> "read before: " + loopback.sink.message[1]);
        assertEquals(1, loopback.await(3), () -> "read after: " + loopback.sink.message[3]);
        assertTrue(System.nanoTime() - start < 5_000_000_000L, "the failure took over 5 s to come");
        for (MemorySegment read : new MemorySegment[] {before, after}) {
          assertEquals(-1, read.mismatch(remote.asSlice(0, 64)), "a read beside it lost bytes");
        }
        // The endpoint still serves.
        loopback.transfer(false, local, good, key);
      }
    }
  }

  /**
   * What shm does with a read whose key the target would refuse: on every version it is not refused
   * at all. With CMA (which this process has: {@link ShmLocalPeerCmaTest}) and dma's hints (virtual
   * addresses, no RMA ordering) shm reads through its "fast RMA" path: the initiator copies with
   * {@code process_vm_readv} and no key is checked ({@code smr_rma_fast}), so the target's bytes
   * arrive. The same holds between processes (C anchor, 2.1 and 2.6). Before dma let shm 2.x check
   * CMA for peers of its own process, such a read went through bounce buffers instead: never
   * completed on 2.1, reported done with stale bytes on 2.6.
   */
  @Test
  @Timeout(value = 60, unit = TimeUnit.SECONDS)
  void aRefusedReadIsPinnedPerVersion() {
    try (Loopback loopback = LoopbackTest.loopback("libfabric:shm")) {
      MemorySegment remote = loopback.arena.allocate(REGION, 4096);
      MemorySegment earlier = loopback.arena.allocate(64, 4096);
      MemorySegment landing = loopback.arena.allocate(64, 4096);
      try (ExposedRegion first = loopback.expose(remote, RemoteAccess.READ)) {
        remote.fill((byte) 0x22);
        loopback.transfer(
            false,
            earlier,
            first.advertisement().remoteAddress(),
            first.advertisement().remoteKey());
      }
      remote.fill(TARGET_FILL);
      landing.fill((byte) 0x5a);
      try (ExposedRegion region = loopback.expose(remote, RemoteAccess.READ)) {
        Advertisement ad = region.advertisement();
        int rc =
            loopback.post(false, 0, loopback.peer, landing, ad.remoteAddress(), ad.remoteKey() + 7);
        assertEquals(FabricEndpoint.POSTED, rc);
        long until = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(NEVER_MS);
        while (loopback.sink.state[0] == 0 && System.nanoTime() < until) {
          loopback.pump();
        }
        String version = Libfabric.versionText(Libfabric.version());
        assertEquals(1, loopback.sink.state[0], version);
        MemorySegment targetBytes = Arena.ofAuto().allocate(landing.byteSize()).fill(TARGET_FILL);
        assertEquals(-1, landing.mismatch(targetBytes), "the target's bytes did not arrive");
        assertNotNull(version);
      }
    }
  }

  private static void assertUnchanged(MemorySegment remote) {
    MemorySegment expected = Arena.ofAuto().allocate(remote.byteSize()).fill(TARGET_FILL);
    assertEquals(-1, remote.mismatch(expected), "the refused write landed");
  }
}
