package dev.dma.libfabric;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dma.libfabric.internal.Abi;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The version gates of shm's failed read copies ({@link Quirks#shmLeavesFailedReadCopiesUnnamed},
 * {@link Quirks#shmAcceptsReadsItCannotCopy}), pinned at their boundaries and to shm: {@link
 * ShmQuirks} builds {@link ShmFailedReads} from these two alone, so a gate moved by one minor
 * version would match reads on a library that names them itself (or stop matching where it does
 * not). {@code ShmRefusalTest} checks the behaviour on the installed library; this checks the
 * versions it cannot load. Pure functions, no libfabric needed.
 */
@Timeout(value = 10, unit = TimeUnit.SECONDS)
class QuirksTest {
  private static final int V1_17 = (1 << 16) | 17;
  private static final int V2_1 = (2 << 16) | 1;
  private static final int V2_4 = (2 << 16) | 4;

  @Test
  void shmLeavesFailedReadCopiesUnnamedUpToTwoFour() {
    assertTrue(Quirks.shmLeavesFailedReadCopiesUnnamed("shm", V1_17));
    assertTrue(Quirks.shmLeavesFailedReadCopiesUnnamed("shm", V2_1));
    assertTrue(Quirks.shmLeavesFailedReadCopiesUnnamed("shm", V2_4));
    assertFalse(Quirks.shmLeavesFailedReadCopiesUnnamed("shm", Abi.FI_VERSION_2_5));
    assertFalse(Quirks.shmLeavesFailedReadCopiesUnnamed("shm", Abi.FI_VERSION_2_6));
    assertFalse(Quirks.shmLeavesFailedReadCopiesUnnamed("tcp", V1_17));
    assertFalse(Quirks.shmLeavesFailedReadCopiesUnnamed("sockets", V2_1));
  }

  @Test
  void shmAcceptsReadsItCannotCopyOnOneXOnly() {
    assertTrue(Quirks.shmAcceptsReadsItCannotCopy("shm", V1_17));
    assertTrue(Quirks.shmAcceptsReadsItCannotCopy("shm", Abi.FI_VERSION_2_0 - 1));
    assertFalse(Quirks.shmAcceptsReadsItCannotCopy("shm", Abi.FI_VERSION_2_0));
    assertFalse(Quirks.shmAcceptsReadsItCannotCopy("shm", V2_1));
    assertFalse(Quirks.shmAcceptsReadsItCannotCopy("shm", Abi.FI_VERSION_2_6));
    assertFalse(Quirks.shmAcceptsReadsItCannotCopy("tcp;ofi_rxm", V1_17));
    assertFalse(Quirks.shmAcceptsReadsItCannotCopy("efa", V1_17));
  }
}
