package dev.dma.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** {@code run --virtual-threads}: the async API from virtual threads, on the fake provider. */
@Timeout(120)
class VirtualThreadsCliTest {
  @Test
  void aCountedRunFromVirtualThreadsMeasuresExactlyTheTransfersAskedForWithoutErrors() {
    for (String op : new String[] {"write", "read"}) {
      CliTest.Run r =
          CliTest.run(
              "--provider",
              "fake",
              "--sizes",
              "4k",
              "--op",
              op,
              "--window",
              "4",
              "--virtual-threads",
              "16",
              "--iterations",
              "3000",
              "--warmup",
              "20ms",
              "--json",
              "--no-progress");
      assertEquals(0, r.code(), r.err());
      assertTrue(
          r.out().contains("\"op\":\"" + op + "\",\"size_bytes\":4096,\"window\":4"), r.out());
      assertTrue(r.out().contains("\"transfers\":3000,\"errors\":0"), r.out());
    }
  }

  @Test
  void aTimedRunPrintsTheSameTableAndSaysHowManyThreads() {
    CliTest.Run r =
        CliTest.run(
            "--provider",
            "fake",
            "--sizes",
            "64",
            "--op",
            "both",
            "--virtual-threads",
            "100",
            "--duration",
            "100ms",
            "--warmup",
            "20ms");
    assertEquals(0, r.code(), r.err());
    assertTrue(r.out().startsWith("write, provider fake (fake), window 64, 1 process"), r.out());
    assertTrue(r.out().contains("read, provider fake (fake), window 64"), r.out());
    assertTrue(r.err().contains("note: 100 virtual threads"), r.err());
  }

  @Test
  void aNegativeCountIsRejected() {
    CliTest.Run r = CliTest.run("--provider", "fake", "--virtual-threads", "-1");
    assertEquals(Main.USAGE, r.code());
    assertTrue(r.err().contains("--virtual-threads must not be negative, not -1"), r.err());
  }
}
