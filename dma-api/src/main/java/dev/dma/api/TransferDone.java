package dev.dma.api;

import java.util.OptionalInt;

/**
 * A transfer that completed: the operand length posted and, when the request asked for one, the
 * CRC-32C over the local operand after completion (for a write it covers the bytes sent, for a read
 * the bytes that landed). Immutable; equal when both facts are.
 */
public final class TransferDone implements Outcome {

  private final long bytes;
  private final boolean checksummed;
  private final int crc32c;

  private TransferDone(long bytes, boolean checksummed, int crc32c) {
    this.bytes = bytes;
    this.checksummed = checksummed;
    this.crc32c = crc32c;
  }

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
   * The operand length posted (not a count the provider reported).
   *
   * @return the length in bytes
   */
  public long bytes() {
    return bytes;
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

  @Override
  public boolean equals(Object other) {
    return other instanceof TransferDone that
        && bytes == that.bytes
        && checksummed == that.checksummed
        && crc32c == that.crc32c;
  }

  @Override
  public int hashCode() {
    return 31 * Long.hashCode(bytes) + (checksummed ? 1 + crc32c : 0);
  }

  @Override
  public String toString() {
    return "TransferDone[bytes=" + bytes + ", checksum=" + checksum() + "]";
  }
}
