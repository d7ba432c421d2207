package dev.dma.api;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;
import java.util.OptionalInt;
import org.junit.jupiter.api.Test;

class OutcomeTest {
  @Test
  void doneCarriesBytesAndAnOptionalChecksum() {
    TransferDone plain = TransferDone.of(64);
    assertTrue(plain.isDone());
    assertEquals(64, plain.bytes());
    assertEquals(OptionalInt.empty(), plain.checksum());
    assertEquals(OptionalInt.of(7), TransferDone.withChecksum(64, 7).checksum());
    assertThrows(IllegalStateException.class, plain::error);
    assertEquals(TransferDone.withChecksum(64, 7), TransferDone.withChecksum(64, 7));
    assertEquals(
        TransferDone.withChecksum(64, 7).hashCode(), TransferDone.withChecksum(64, 7).hashCode());
    assertFalse(TransferDone.withChecksum(64, 0).equals(TransferDone.of(64)));
    assertEquals("TransferDone[bytes=64, checksum=OptionalInt.empty]", plain.toString());
  }

  @Test
  void failedCarriesTheErrorAndRethrowsIt() {
    DmaException error = new DmaException(DmaException.Kind.TRANSFER, "boom", -125, 107, null);
    Outcome failed = Outcome.failed(error);
    assertFalse(failed.isDone());
    assertSame(error, failed.error());
    assertSame(error, assertThrows(DmaException.class, failed::done));
    assertEquals(125, error.fabricErrno());
    assertEquals(107, error.providerErrno());
    assertEquals("transfer failed: boom", error.toString());
    assertEquals("fabric error: gone", DmaException.fabric("gone").toString());
  }

  @Test
  void completionsRequireAnOutcome() {
    assertThrows(NullPointerException.class, () -> new Completion<>("x", null));
  }

  @Test
  void requestsCheckTheirFieldsAndCompareByContent() {
    Operands context = Operands.of(MemorySegment.NULL);
    assertThrows(NullPointerException.class, () -> TransferRequest.builder(context).build());
    assertThrows(
        IllegalArgumentException.class,
        () -> TransferRequest.builder(context).peerAddress(new byte[0]).build());
    TransferRequest<Operands> a =
        TransferRequest.builder(context)
            .clientId(3)
            .advertisement(new Advertisement(new byte[] {1, 2}, 5, 6))
            .direction(Direction.fromPeer(10))
            .checksum(Checksum.CRC32C)
            .build();
    TransferRequest<Operands> b =
        TransferRequest.read(3, new Advertisement(new byte[] {1, 2}, 5, 6), 10, context)
            .withChecksum(Checksum.CRC32C);
    assertEquals(a, b);
    assertEquals(a.hashCode(), b.hashCode());
    assertTrue(a.toString().contains("peerAddress=0102"));
  }
}
