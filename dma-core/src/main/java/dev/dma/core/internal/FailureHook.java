package dev.dma.core.internal;

import dev.dma.api.DmaException;
import dev.dma.api.Operands;
import dev.dma.api.TransferRequest;
import java.lang.foreign.MemorySegment;
import org.jspecify.annotations.Nullable;

/**
 * Told, on a worker thread, of every transfer that worker is about to complete failed, before its
 * completion is built (one refused at intake included, for example because its client is marked
 * unreachable: then with no operand and no post): a {@code FabricServiceGroup} judges its devices'
 * health from these and may take the transfer over to post it on another device. A worker of a
 * plain {@code FabricService} has none. Never called for a success, so the healthy path does not
 * pay for it.
 *
 * <p>Threads: the worker thread of the device whose transfer failed; an implementation must not
 * block, and anything it shares with other devices' workers must be thread-safe.
 *
 * @param <T> the caller context type
 */
public interface FailureHook<T extends Operands> {
  /**
   * A transfer failed on this worker's device.
   *
   * @param request the transfer as accepted (its context is still the caller's or the group's)
   * @param operand the local operand the worker resolved for it (null when it never resolved), so a
   *     transfer posted again elsewhere does not ask its context a second time
   * @param error its failure, with what it left at the target ({@link DmaException#targetMemory()})
   * @param posts how many times this device posted it
   * @param succeeded transfers this worker completed successfully so far (a monotonic count: the
   *     hook compares readings to learn whether the device succeeded since its last failure)
   * @return true when the hook took the transfer over: the worker then delivers no completion for
   *     it and the hook owes exactly one; false to complete it failed as usual
   */
  boolean failed(
      TransferRequest<T> request,
      @Nullable MemorySegment operand,
      DmaException error,
      int posts,
      long succeeded);

  /**
   * Asks {@code hook}, when there is one, whether it takes a failed transfer over ({@link
   * #failed}). False without a hook, and when the hook throws: that is logged, and the transfer
   * then completes failed as usual.
   *
   * @param hook the worker's hook, or null for a plain service
   * @param request the transfer
   * @param operand its resolved operand, or null
   * @param error its failure
   * @param posts how many times this device posted it
   * @param succeeded the worker's count of successes so far
   * @param <T> the caller context type
   * @return whether the hook took it over (the worker then delivers no completion for it)
   */
  static <T extends Operands> boolean takesOver(
      @Nullable FailureHook<T> hook,
      TransferRequest<T> request,
      @Nullable MemorySegment operand,
      DmaException error,
      int posts,
      long succeeded) {
    if (hook == null) {
      return false;
    }
    try {
      return hook.failed(request, operand, error, posts, succeeded);
    } catch (RuntimeException hookFailure) {
      System.getLogger(FailureHook.class.getName())
          .log(
              System.Logger.Level.ERROR,
              "the failure hook threw; the transfer completes failed",
              hookFailure);
      return false;
    }
  }
}
