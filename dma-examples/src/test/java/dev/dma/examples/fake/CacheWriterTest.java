package dev.dma.examples.fake;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dma.api.Advertisement;
import dev.dma.api.Checksum;
import dev.dma.api.Checksums;
import dev.dma.api.Completion;
import dev.dma.api.DmaConfiguration;
import dev.dma.api.DmaException;
import dev.dma.api.Operands;
import dev.dma.api.RemoteAccess;
import dev.dma.api.TransferRequest;
import dev.dma.core.FabricService;
import dev.dma.fake.FakeEndpoint;
import dev.dma.fake.FakeFabric;
import dev.dma.fake.OpMatcher;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * How a service unit-tests its dma code without hardware: the fake provider's in-JVM fabric, whose
 * endpoints copy real bytes, and its script, which makes the edge cases happen on demand.
 *
 * <p>The pieces, in the order they appear: a fake fabric named for the test (so tests running in
 * parallel never share one); a passive client endpoint on it exposing memory; a script that answers
 * the first posts with {@code -FI_EAGAIN} and fails the second operation with {@code EACCES}; a
 * {@link FabricService} on provider {@code fake} whose {@code interfaces[0]} names the fabric; one
 * arena per operand, watched by the fabric and closed in the completer, the moment the operand is
 * the caller's again, so the fabric reports any access to it after its completion; and assertions
 * on bytes, checksums, reasons, the post count and the fabric's counters. Run with {@code
 * --enable-native-access=ALL-UNNAMED}: the fake copies bytes by raw address.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class CacheWriterTest {
  private static final int VALUE_BYTES = 4096;

  /** One value to write: its id, where it goes in the client's memory, and its own arena. */
  record Value(int id, long offset, Arena arena, MemorySegment bytes) implements Operands {
    @Override
    public MemorySegment source() {
      return bytes;
    }

    @Override
    public MemorySegment allocate(long lengthBytes) {
      throw new UnsupportedOperationException("a write has no landing buffer");
    }
  }

  /** What the completer saw of one completion, copied before it closed the operand's arena. */
  record Seen(int id, int sourceCrc, Completion<Value> completion) {}

  @Test
  void aScriptedFailureFailsOneTransferWithItsReasonAndTheOthersLand() throws Exception {
    try (FakeFabric fabric = FakeFabric.create("cache-writer-" + System.nanoTime());
        Arena clientArena = Arena.ofShared()) {
      // The passive side: in production another process (a PassiveTarget); here an endpoint.
      FakeEndpoint client = fabric.openEndpoint();
      MemorySegment clientMemory = clientArena.allocate(3 * VALUE_BYTES);
      Advertisement ad = client.expose(clientMemory, RemoteAccess.READ_WRITE).advertisement();

      // The first three posts are refused with -FI_EAGAIN (the worker posts again); the second
      // operation the fabric accepts fails at the target with EACCES and this provider text.
      fabric.script().againTimes(3).failOp(OpMatcher.nth(2), 13, -13, "denied by the test");

      LinkedBlockingQueue<Seen> seen = new LinkedBlockingQueue<>();
      DmaConfiguration configuration =
          DmaConfiguration.builder().providers("fake").interfaces(List.of(fabric.name())).build();
      try (FabricService<Value> service =
          FabricService.start(
              configuration,
              batch -> {
                for (Completion<Value> completion : batch) {
                  Value value = completion.context();
                  // The operand is ours again: check it, then free it. The fabric reports any
                  // later access to it in operandViolations().
                  seen.add(new Seen(value.id(), Checksums.crc32c(value.bytes()), completion));
                  value.arena().close();
                }
              })) {
        for (int id = 1; id <= 3; id++) {
          Arena arena = Arena.ofShared();
          MemorySegment bytes = arena.allocate(VALUE_BYTES);
          for (int i = 0; i < VALUE_BYTES; i++) {
            bytes.set(ValueLayout.JAVA_BYTE, i, (byte) (id * 41 + i));
          }
          fabric.watchOperand(bytes);
          long offset = (long) (id - 1) * VALUE_BYTES;
          Advertisement slot =
              new Advertisement(ad.address(), ad.remoteKey(), ad.remoteAddress() + offset);
          assertTrue(
              service.submit(
                  TransferRequest.write(7, slot, new Value(id, offset, arena, bytes))
                      .withChecksum(Checksum.CRC32C)),
              "accepted");
        }

        Map<Integer, Seen> byId = new HashMap<>();
        for (int i = 0; i < 3; i++) {
          Seen one = seen.poll(10, TimeUnit.SECONDS);
          assertNotNull(one, "every accepted transfer completes, within 10 s here");
          byId.put(one.id(), one);
        }
        // Exactly one completion per transfer: nothing more comes.
        assertEquals(null, seen.poll(100, TimeUnit.MILLISECONDS));

        // The second one failed, with the reason a caller acts on and the provider's text.
        Completion<Value> failed = byId.get(2).completion();
        DmaException error = failed.outcome().error();
        assertEquals(DmaException.Reason.ACCESS_DENIED, error.reason(), error.getMessage());
        assertTrue(error.getMessage().contains("denied by the test"), error.getMessage());
        assertEquals(1, failed.posts(), "it was posted once, and refused at the target");
        assertEquals(1, failed.chunks(), "a FabricService never stripes");

        // The others landed, and their checksums are those of the bytes the client now holds.
        for (int id : new int[] {1, 3}) {
          Seen one = byId.get(id);
          int landed =
              Checksums.crc32c(clientMemory.asSlice((long) (id - 1) * VALUE_BYTES, VALUE_BYTES));
          assertEquals(one.sourceCrc(), landed, "value " + id + " landed");
          assertEquals(landed, one.completion().outcome().done().checksum().orElseThrow());
        }
      }
      assertTrue(fabric.counters().againAnswers() >= 3, "the script's -FI_EAGAIN answers");
      assertEquals(List.of(), fabric.operandViolations(), "no access after a completion");
      assertEquals(0, fabric.counters().violations(), fabric.counters().lastViolation());
      client.close();
    }
  }
}
