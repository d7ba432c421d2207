package dev.dma.core.internal;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dma.api.Errno;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Pins the edges PIT showed no test looked at (docs/mutation.md): each unit's threshold on both
 * sides, so a {@code >=} turned {@code >} (or the reverse) fails here.
 */
@Timeout(value = 10, unit = TimeUnit.SECONDS)
class MutationBoundaryTest {

  @Test
  void aDurationChangesUnitExactlyAtItsThreshold() {
    assertEquals("1ms", DurationFormat.format(Duration.ofNanos(1_000_000)));
    assertEquals("999.999µs", DurationFormat.format(Duration.ofNanos(999_999)));
    assertEquals("1µs", DurationFormat.format(Duration.ofNanos(1_000)));
    assertEquals("999ns", DurationFormat.format(Duration.ofNanos(999)));
    assertEquals("1.000000001s", DurationFormat.format(Duration.ofSeconds(1, 1)));
    assertEquals("999.999999ms", DurationFormat.format(Duration.ofNanos(999_999_999)));
  }

  @Test
  void onlyTheConnectionLevelErrnosArePostedAgain() {
    assertTrue(CompletionErrors.isConnectionLevel(Errno.EPIPE));
    assertTrue(CompletionErrors.isConnectionLevel(Errno.FI_ECONNABORTED));
    assertTrue(CompletionErrors.isConnectionLevel(Errno.FI_ECONNRESET));
    assertTrue(CompletionErrors.isConnectionLevel(Errno.FI_ENOTCONN));
    assertFalse(CompletionErrors.isConnectionLevel(Errno.FI_EACCES));
    assertFalse(CompletionErrors.isConnectionLevel(Errno.FI_EIO));
    assertFalse(CompletionErrors.isConnectionLevel(Errno.FI_ECANCELED));
    assertFalse(CompletionErrors.isConnectionLevel(0));
  }
}
