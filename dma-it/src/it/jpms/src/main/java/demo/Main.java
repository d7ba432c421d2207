package demo;

import dev.dma.api.Advertisement;
import dev.dma.api.Checksum;
import dev.dma.api.Checksums;
import dev.dma.api.Completion;
import dev.dma.api.DmaConfiguration;
import dev.dma.api.DmaException;
import dev.dma.api.Operands;
import dev.dma.api.RemoteAccess;
import dev.dma.api.TransferRequest;
import dev.dma.core.FabricProviders;
import dev.dma.core.FabricService;
import dev.dma.core.PassiveTarget;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

/**
 * Asks for efa-direct (which must fail with its reason here), then writes 64 KiB over tcp and reads
 * it back; exits non-zero unless the checksums match.
 */
public final class Main {
  private Main() {}

  public static void main(String[] args) throws Exception {
    System.out.println(
        "providers on the module path: "
            + FabricProviders.installed().stream().map(p -> p.name()).toList());
    try {
      FabricService.start(DmaConfiguration.builder().providers("efa-direct").build(), batch -> {});
      System.out.println("JPMS FAILED: efa-direct started on a host without EFA");
      System.exit(1);
    } catch (DmaException expected) {
      System.out.println("efa-direct: " + expected.getMessage());
    }
    DmaConfiguration configuration =
        DmaConfiguration.builder().providers("tcp").bind("127.0.0.1").build();
    LinkedBlockingQueue<Completion<Operands>> done = new LinkedBlockingQueue<>();
    try (Arena arena = Arena.ofShared();
        PassiveTarget client = PassiveTarget.start(configuration);
        FabricService<Operands> server = FabricService.start(configuration, done::addAll)) {
      MemorySegment clientBuffer = arena.allocate(65536);
      Advertisement ad = client.expose(clientBuffer, RemoteAccess.READ_WRITE).advertisement();
      MemorySegment value = arena.allocate(65536);
      value.fill((byte) 0x3c);
      server.submit(TransferRequest.write(1, ad, Operands.of(value)).withChecksum(Checksum.CRC32C));
      Completion<Operands> written = done.poll(30, TimeUnit.SECONDS);
      MemorySegment back = arena.allocate(65536);
      server.submit(
          TransferRequest.read(1, ad, 65536, Operands.of(back)).withChecksum(Checksum.CRC32C));
      Completion<Operands> read = done.poll(30, TimeUnit.SECONDS);
      int expected = Checksums.crc32c(value);
      if (written == null
          || read == null
          || written.outcome().done().checksum().orElseThrow() != expected
          || Checksums.crc32c(clientBuffer) != expected
          || Checksums.crc32c(back) != expected) {
        System.out.println("JPMS FAILED");
        System.exit(1);
      }
      System.out.println("JPMS OK " + Integer.toHexString(expected));
    }
  }
}
