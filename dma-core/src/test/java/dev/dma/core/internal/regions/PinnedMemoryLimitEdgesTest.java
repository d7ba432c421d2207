package dev.dma.core.internal.regions;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;

import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The inputs PIT's survivors showed untested (docs/mutation.md): every way /proc can fail to give a
 * memlock limit or a capability set means "no bound from there", never a bound of 0.
 */
@Timeout(value = 10, unit = TimeUnit.SECONDS)
class PinnedMemoryLimitEdgesTest {

  @Test
  void noReadableMemlockLimitMeansUnbounded() {
    assertEquals(Long.MAX_VALUE, PinnedMemoryLimit.memlockSoftLimit(null));
    assertEquals(Long.MAX_VALUE, PinnedMemoryLimit.memlockSoftLimit("Max open files 1024 1024\n"));
    assertEquals(
        Long.MAX_VALUE,
        PinnedMemoryLimit.memlockSoftLimit("Max locked memory unlimited unlimited bytes\n"));
    assertEquals(
        Long.MAX_VALUE, PinnedMemoryLimit.memlockSoftLimit("Max locked memory lots lots bytes\n"));
    assertEquals(
        8_388_608, PinnedMemoryLimit.memlockSoftLimit("Max locked memory 8388608 8388608 bytes\n"));
  }

  @Test
  void noReadableCapabilitySetMeansNoCapability() {
    assertFalse(PinnedMemoryLimit.hasCapability("Name: java\n", 14));
    assertFalse(PinnedMemoryLimit.hasCapability("CapEff: zz\n", 14));
  }

  @Test
  void zeroConfiguredIsUnboundedNotRefused() {
    // 0 is "no configured bound": only a negative value is refused.
    assertEquals(Long.MAX_VALUE, PinnedMemoryLimit.bound(0, null, null));
    assertEquals(4096, PinnedMemoryLimit.bound(4096, null, null));
  }

  @Test
  void aMemlockLimitOfZeroIsNoBoundNotABoundOfZero() {
    String zero = "Max locked memory 0 0 bytes\n";
    assertEquals(0, PinnedMemoryLimit.memlockSoftLimit(zero));
    assertEquals(Long.MAX_VALUE, PinnedMemoryLimit.bound(0, zero, null));
    assertEquals(4096, PinnedMemoryLimit.bound(4096, zero, null));
    assertEquals(1, PinnedMemoryLimit.bound(0, "Max locked memory 1 1 bytes\n", null));
  }
}
