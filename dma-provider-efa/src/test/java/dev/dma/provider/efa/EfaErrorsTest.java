package dev.dma.provider.efa;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/** EFA.md section 4's provider errno table, turned into advice; the raw text always comes first. */
class EfaErrorsTest {
  @ParameterizedTest(name = "err={0} prov_errno={1} -> {2}")
  @CsvSource({
    // fabric errno, provider status, category: the rows of EFA.md's table
    "125, 1, flushed",
    "22, 4, bad address handle",
    "22, 5, bad local key",
    "22, 7, bad remote address",
    "107, 9, not connected",
    "107, 14, not connected",
    "269, 10, receiver not ready",
    "103, 13, unresponsive peer",
    "113, 15, unreachable peer",
    "22, 18, feature mismatch",
    "103, 4124, unresponsive receiver",
    "103, 4126, unresponsive receiver",
    "12, 4105, out of memory in the provider",
    // Statuses EFA did not report (or another provider under EFA's rules): the errno decides.
    "125, 0, flushed",
    "107, 0, not connected",
    "113, 0, unreachable peer",
    "103, 0, unresponsive peer",
    "13, -13, bad remote address",
    "12, 0, out of memory in the provider",
  })
  void everyRowHasActionableAdvice(int errno, int providerErrno, String category) {
    String raw =
        "completion error: text (err="
            + errno
            + "); provider: text (prov_errno="
            + providerErrno
            + ")";
    String message = EfaErrors.describe(raw, errno, providerErrno);
    assertTrue(message.startsWith(raw + "; " + category + ":"), message);
  }

  @Test
  void theUnknownPeerStatusNamesTheInitiatorFirstRule() {
    String advice = EfaErrors.advice(107, 14);
    assertTrue(advice.contains("PassiveTarget.insertPeer"), advice);
    assertTrue(advice.contains("before it advertises"), advice);
  }

  @Test
  void anUnknownFailureIsLeftAlone() {
    assertNull(EfaErrors.advice(5, 0));
    assertEquals("completion error: x", EfaErrors.describe("completion error: x", 5, 0));
  }
}
