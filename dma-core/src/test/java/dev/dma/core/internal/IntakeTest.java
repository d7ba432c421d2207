package dev.dma.core.internal;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dma.api.Advertisement;
import dev.dma.api.Checksum;
import dev.dma.api.DmaException;
import dev.dma.api.MemoryKind;
import dev.dma.api.Operands;
import dev.dma.api.TransferRequest;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.HexFormat;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The whole-request checks on their own: each refusal only when its condition holds (a checksum
 * asked for), and a request that passes gets its operand back untouched.
 */
@Timeout(value = 10, unit = TimeUnit.SECONDS)
class IntakeTest {
  private static final Advertisement AD = new Advertisement(new byte[] {1, 2, 3}, 9, 4096, 1 << 16);
  private static final Function<byte[], String> TEXT = bytes -> HexFormat.of().formatHex(bytes);

  /** A write source of {@code kind}. */
  private record Source(MemorySegment segment, MemoryKind kind) implements Operands {
    @Override
    public MemorySegment source() {
      return segment;
    }

    @Override
    public MemoryKind memoryKind() {
      return kind;
    }
  }

  @Test
  void aConfinedOperandIsRefusedOnlyWithAChecksum() {
    try (Arena confined = Arena.ofConfined()) {
      assertRefusedOnlyWithAChecksum(
          new Source(confined.allocate(64), MemoryKind.HOST), Intake.CONFINED_CHECKSUM);
    }
  }

  @Test
  void memoryTheCpuCannotReadIsRefusedOnlyWithAChecksum() {
    try (Arena shared = Arena.ofShared()) {
      String text = Intake.unreadableChecksum(InertWorkers.DEVICE);
      assertTrue(text.contains("DEVICE memory"), text);
      assertRefusedOnlyWithAChecksum(new Source(shared.allocate(64), InertWorkers.DEVICE), text);
    }
  }

  /** Without a checksum the operand passes untouched; with one, BAD_REQUEST with {@code text}. */
  private static void assertRefusedOnlyWithAChecksum(Source source, String text) {
    TransferRequest<Source> plain = TransferRequest.write(7, AD, source);
    assertSame(source.segment(), Intake.checkedOperand(plain, null, TEXT), "no checksum: accepted");
    DmaException refused =
        assertThrows(
            DmaException.class,
            () -> Intake.checkedOperand(plain.withChecksum(Checksum.CRC32C), null, TEXT));
    assertEquals(DmaException.Reason.BAD_REQUEST, refused.reason());
    assertEquals(text, refused.getMessage());
  }

  @Test
  void aSharedHostOperandWithAChecksumPasses() {
    try (Arena shared = Arena.ofShared()) {
      MemorySegment segment = shared.allocate(64);
      TransferRequest<Source> request =
          TransferRequest.write(7, AD, new Source(segment, MemoryKind.HOST))
              .withChecksum(Checksum.CRC32C);
      assertSame(segment, Intake.checkedOperand(request, null, TEXT));
    }
  }

  @Test
  void aTransferOutsideTheAdvertisementNamesItsClient() {
    try (Arena shared = Arena.ofShared()) {
      MemorySegment tooLong = shared.allocate((1 << 16) + 1);
      TransferRequest<Source> request =
          TransferRequest.write(7, AD, new Source(tooLong, MemoryKind.HOST));
      DmaException refused =
          assertThrows(DmaException.class, () -> Intake.checkedOperand(request, null, TEXT));
      assertEquals(DmaException.Reason.BAD_REQUEST, refused.reason());
      assertTrue(refused.getMessage().startsWith("client 7 at 010203: "), refused.getMessage());
    }
  }
}
