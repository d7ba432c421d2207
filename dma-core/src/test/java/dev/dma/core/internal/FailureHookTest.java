package dev.dma.core.internal;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertSame;

import dev.dma.api.Advertisement;
import dev.dma.api.DmaException;
import dev.dma.api.Operands;
import dev.dma.api.TransferRequest;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * {@link FailureHook#takesOver}: the worker's one way to ask a group's hook about a failed
 * transfer. Without a hook, or when the hook throws, the transfer completes failed as usual
 * (false); otherwise the hook's answer stands, and it is told exactly what the worker knows.
 */
@Timeout(value = 10, unit = TimeUnit.SECONDS)
class FailureHookTest {
  private record Source(MemorySegment segment) implements Operands {
    @Override
    public MemorySegment source() {
      return segment;
    }
  }

  private static final MemorySegment OPERAND = MemorySegment.ofArray(new byte[8]);
  private static final TransferRequest<Source> REQUEST =
      TransferRequest.write(
          3, new Advertisement(new byte[] {1}, 9, 4096, 1 << 16), new Source(OPERAND));
  private static final DmaException ERROR =
      DmaException.fabric(DmaException.Reason.PEER_UNREACHABLE, "gone");

  @Test
  void withoutAHookNothingTakesTheTransferOver() {
    assertFalse(FailureHook.takesOver(null, REQUEST, OPERAND, ERROR, 1, 5));
  }

  @Test
  void theHooksAnswerStandsAndItIsToldWhatTheWorkerKnows() {
    List<Object> told = new ArrayList<>();
    for (boolean answer : new boolean[] {true, false}) {
      told.clear();
      FailureHook<Source> hook =
          (request, operand, error, posts, succeeded) -> {
            told.addAll(List.of(request, operand, error, posts, succeeded));
            return answer;
          };
      assertEquals(answer, FailureHook.takesOver(hook, REQUEST, OPERAND, ERROR, 2, 17));
      assertSame(REQUEST, told.get(0));
      assertSame(OPERAND, told.get(1));
      assertSame(ERROR, told.get(2));
      assertEquals(2, told.get(3));
      assertEquals(17L, told.get(4));
    }
  }

  @Test
  void aHookThatThrowsTakesNothingOver() {
    FailureHook<Source> hook =
        (request, operand, error, posts, succeeded) -> {
          throw new IllegalStateException("a broken hook (by the test)");
        };
    assertFalse(FailureHook.takesOver(hook, REQUEST, null, ERROR, 0, 0));
  }
}
