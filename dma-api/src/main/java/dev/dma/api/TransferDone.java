package dev.dma.api;

import java.util.OptionalInt;

/**
 * A transfer that completed.
 *
 * @param bytes the operand length posted (not a count the provider reported)
 * @param checksummed whether the request asked for a checksum
 * @param crc32c the CRC-32C over the local operand after completion, when {@code checksummed}; for
 *     a write it covers the bytes sent, for a read the bytes that landed; 0 otherwise
 */
public record TransferDone(long bytes, boolean checksummed, int crc32c) implements Outcome {

  /**
   * A completion without a checksum.
   *
   * @param bytes the operand length
   * @return the outcome
   */
  public static TransferDone of(long bytes) {
    return new TransferDone(bytes, false, 0);
  }

  /**
   * A completion with a checksum.
   *
   * @param bytes the operand length
   * @param crc32c the CRC-32C over the operand
   * @return the outcome
   */
  public static TransferDone withChecksum(long bytes, int crc32c) {
    return new TransferDone(bytes, true, crc32c);
  }

  /**
   * The checksum, when one was asked for.
   *
   * @return the CRC-32C, or empty
   */
  public OptionalInt checksum() {
    return checksummed ? OptionalInt.of(crc32c) : OptionalInt.empty();
  }

  @Override
  public boolean isDone() {
    return true;
  }

  @Override
  public TransferDone done() {
    return this;
  }

  @Override
  public DmaException error() {
    throw new IllegalStateException("the transfer completed; there is no error");
  }
}
