package dev.dma.core.internal.regions;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

class PinnedMemoryLimitTest {
  private static final String LIMITED =
      """
      Limit                     Soft Limit           Hard Limit           Units
      Max open files            1048576              1048576              files
      Max locked memory         8388608              16777216             bytes
      Max address space         unlimited            unlimited            bytes
      """;
  private static final String UNLIMITED =
      "Max locked memory         unlimited            unlimited            bytes\n";
  private static final String NO_IPC_LOCK = "Name:\tjava\nCapEff:\t0000000000000000\n";
  private static final String IPC_LOCK = "Name:\tjava\nCapEff:\t0000000000004000\n";

  @Test
  void theDefaultIsTheSoftMemlockLimit() {
    assertEquals(8388608L, PinnedMemoryLimit.bound(0, LIMITED, NO_IPC_LOCK));
    assertEquals(4096L, PinnedMemoryLimit.bound(4096, LIMITED, NO_IPC_LOCK));
    assertEquals(8388608L, PinnedMemoryLimit.bound(1L << 40, LIMITED, NO_IPC_LOCK));
  }

  @Test
  void unlimitedOrCapIpcLockLeavesOnlyTheConfiguredBound() {
    assertEquals(Long.MAX_VALUE, PinnedMemoryLimit.bound(0, UNLIMITED, NO_IPC_LOCK));
    assertEquals(Long.MAX_VALUE, PinnedMemoryLimit.bound(0, LIMITED, IPC_LOCK));
    assertEquals(1L << 40, PinnedMemoryLimit.bound(1L << 40, LIMITED, IPC_LOCK));
    assertEquals(Long.MAX_VALUE, PinnedMemoryLimit.bound(0, null, null));
    assertEquals(Long.MAX_VALUE, PinnedMemoryLimit.bound(0, "garbage", "garbage"));
  }

  @Test
  void thisProcessGetsAPositiveBound() {
    assertTrue(PinnedMemoryLimit.bound(0) > 0);
    assertThrows(IllegalArgumentException.class, () -> PinnedMemoryLimit.bound(-1));
  }
}
