package dev.dma.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dma.api.DmaConfiguration;
import dev.dma.api.DmaException;
import dev.dma.api.Errno;
import dev.dma.api.RemoteAccess;
import dev.dma.core.FabricService;
import dev.dma.libfabric.LibfabricProvider;
import dev.dma.libfabric.PassiveEndpoints;
import dev.dma.libfabric.ProviderLimits;
import java.lang.foreign.Arena;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Every limit on how many clients one server can hold fails with {@link DmaException.Reason#LIMIT}
 * and a message naming the limit, its value and what raises it (issue "Thousands of clients").
 */
@Timeout(120)
class ProviderLimitsTest {
  @Test
  void shmsTwoHundredAndFiftySeventhPeerFailsNamingTheLimit() {
    DmaConfiguration configuration = DmaConfiguration.builder().providers("libfabric:shm").build();
    Collector<Buffer> completions = new Collector<>();
    try (Arena arena = Arena.ofShared();
        PassiveEndpoints peers =
            PassiveEndpoints.open(
                LibfabricProvider.policyFor("libfabric:shm"),
                configuration,
                arena.allocate(4096),
                RemoteAccess.READ_WRITE);
        FabricService<Buffer> service =
            FabricService.<Buffer>builder(configuration).completer(completions).start()) {
      // Real endpoints: up to 2.4 dma refuses a name whose shm region does not exist.
      for (int i = 0; i <= ProviderLimits.SHM_MAX_PEERS; i++) {
        peers.add();
      }
      for (int i = 0; i < ProviderLimits.SHM_MAX_PEERS; i++) {
        service.addPeer(i, peers.address(i));
      }
      DmaException error =
          assertThrows(
              DmaException.class,
              () ->
                  service.addPeer(
                      ProviderLimits.SHM_MAX_PEERS, peers.address(ProviderLimits.SHM_MAX_PEERS)));
      assertEquals(DmaException.Reason.LIMIT, error.reason(), error::toString);
      assertTrue(error.getMessage().contains("at most 256 peers per endpoint"), error::getMessage);
      assertTrue(error.getMessage().contains("holds 256"), error::getMessage);
      // Releasing one makes room again: shm cannot reuse the slot, so the endpoint resets first.
      service.removePeer(0);
      long deadline = System.nanoTime() + 10_000_000_000L;
      while (true) {
        try {
          service.addPeer(
              ProviderLimits.SHM_MAX_PEERS, peers.address(ProviderLimits.SHM_MAX_PEERS));
          break;
        } catch (DmaException stillFull) {
          assertTrue(System.nanoTime() < deadline, "no room after removePeer: " + stillFull);
        }
      }
    }
  }

  @Test
  void runningOutOfFileDescriptorsIsALimitThatNamesUlimit() {
    assertEquals(DmaException.Reason.LIMIT, DmaException.Reason.ofErrno(Errno.FI_EMFILE));
    String text = ProviderLimits.descriptorLimit();
    assertTrue(text.matches(".*RLIMIT_NOFILE: soft [0-9]+, hard ([0-9]+|unlimited).*"), text);
    assertTrue(text.contains("ulimit -n"), text);
    assertTrue(
        ProviderLimits.known("tcp;ofi_rxm").stream().anyMatch(l -> l.contains("FI_UNIVERSE_SIZE")));
    assertTrue(ProviderLimits.known("net").stream().anyMatch(l -> l.contains("ulimit -n")));
    assertTrue(
        ProviderLimits.peerLimit("udp;ofi_rxd", 1024).contains("FI_OFI_RXD_MAX_PEERS"),
        "rxd names its setting");
  }
}
