package dev.dma.api;

/**
 * Whether a transfer's completion carries a checksum of its local operand, chosen per request
 * ({@link TransferRequest#withChecksum(Checksum)}); {@link Checksums} computes the same CRC-32C
 * over any segment, for the peer's side of a comparison.
 *
 * <p>{@link #CRC32C} hashes the operand after the transfer completed (for a write the bytes sent,
 * for a read the bytes that landed), on the checksum pool. The operand must then be readable from
 * any thread (a shared, global or automatic arena's segment); a transfer over a confined arena's
 * segment is refused before the RMA, its completion failing with {@link
 * DmaException.Reason#BAD_REQUEST}.
 */
public enum Checksum {
  /** No checksum: {@link TransferDone#checksum()} is empty. */
  NONE,
  /** A CRC-32C (Castagnoli) over the local operand, in {@link TransferDone#checksum()}. */
  CRC32C
}
