package dev.dma.libfabric;

import dev.dma.libfabric.internal.Native;

/**
 * On shm up to libfabric 2.4: which read shm failed to copy, where shm does not say.
 *
 * <p>shm copies a read itself, inside the post, with CMA ({@code smr_rma_fast}, {@code
 * process_vm_readv} from the target process). When the copy fails (the remote range is not mapped
 * in the target: a wrong advertisement or offset), shm does not name the read:
 *
 * <ul>
 *   <li>1.x accepts the post and writes an error entry with a NULL context, so the read would stay
 *       in flight until the completion deadline. The entry is written inside the post, as is every
 *       success of a read copied this way, so in the completion queue it follows the entries of
 *       every read posted before it: the read it belongs to is the oldest read still in flight
 *       (post order) whose range the target has not mapped, which {@link #ownerOfOrphan} asks the
 *       kernel;
 *   <li>2.0 to 2.4 answer {@code -FI_EAGAIN} and write nothing, so the read would be refused at
 *       every pass until a deadline. {@link #refusedUnmapped} tells that refusal from a full queue
 *       by asking the kernel whether the target mapped the range.
 * </ul>
 *
 * From 2.5 shm writes the entry inside a post that answers {@code -FI_EAGAIN}, and the endpoint
 * reads it there; this class is not used. The kernel is asked with the same call shm's copy uses,
 * about the range's first and last byte, only on these failure paths; what it cannot answer (no
 * permission, an exited process, a name without a pid) leaves the read to the deadlines as before.
 *
 * <p>Owned by one {@link LibfabricEndpoint} and used by its owner thread only (posts, reaps).
 */
final class ShmFailedReads {
  /**
   * Whether shm accepts a read whose copy fails and reports it later with no operation (1.x): only
   * then are posted reads recorded, so 2.0 to 2.4 pay nothing per read for {@link #ownerOfOrphan}.
   */
  final boolean reportsAfterThePost;

  // Per slot: whether the slot's read is posted and not yet delivered, and what it reads.
  private final boolean[] open;
  private final long[] postSeq;
  private final long[] pid;
  private final long[] remoteAddress;
  private final long[] lengthBytes;
  private long nextSeq;

  // Per slot: the last refused read found mapped, so a read refused at every pass for a full queue
  // asks the kernel once, not at every pass.
  private final long[] mappedPid;
  private final long[] mappedAddress;
  private final long[] mappedLength;

  ShmFailedReads(int slots, boolean reportsAfterThePost) {
    this.reportsAfterThePost = reportsAfterThePost;
    open = new boolean[slots];
    postSeq = new long[slots];
    pid = new long[slots];
    remoteAddress = new long[slots];
    lengthBytes = new long[slots];
    mappedPid = new long[slots];
    mappedAddress = new long[slots];
    mappedLength = new long[slots];
  }

  /**
   * A read was accepted on {@code slot}: it is in flight until {@link #ended}. Called only where
   * {@link #reportsAfterThePost}.
   */
  void posted(int slot, long peerPid, long address, long length) {
    open[slot] = true;
    postSeq[slot] = nextSeq++;
    pid[slot] = peerPid;
    remoteAddress[slot] = address;
    lengthBytes[slot] = length;
  }

  /** The slot's outcome was delivered (any operation: a write's too, which clears nothing). */
  void ended(int slot) {
    open[slot] = false;
  }

  /**
   * Whether a read refused with {@code -FI_EAGAIN} reads a range the target has not mapped (2.0 to
   * 2.4: shm's failed copy), rather than meeting a full queue.
   */
  boolean refusedUnmapped(int slot, long peerPid, long address, long length) {
    if (peerPid <= 0 || length <= 0) {
      return false;
    }
    if (mappedPid[slot] == peerPid
        && mappedAddress[slot] == address
        && mappedLength[slot] == length) {
      return false;
    }
    int mapped = Native.processMapped(peerPid, address, length);
    if (mapped == 1) {
      mappedPid[slot] = peerPid;
      mappedAddress[slot] = address;
      mappedLength[slot] = length;
    }
    return mapped == 0;
  }

  /**
   * The slot of the read an error entry naming no operation belongs to (1.x): the oldest read in
   * flight whose range the target has not mapped; -1 when none is found (the entry is then dropped
   * as before, and the deadlines end that read).
   */
  int ownerOfOrphan() {
    int owner = -1;
    for (int slot = 0; slot < open.length; slot++) {
      if (open[slot]
          && (owner < 0 || postSeq[slot] - postSeq[owner] < 0)
          && pid[slot] > 0
          && lengthBytes[slot] > 0
          && Native.processMapped(pid[slot], remoteAddress[slot], lengthBytes[slot]) == 0) {
        owner = slot;
      }
    }
    return owner;
  }

  /** The failure text of the read on {@code slot} that shm could not copy. */
  String unmappedText(int slot) {
    return rangeText(pid[slot], remoteAddress[slot], lengthBytes[slot]);
  }

  /**
   * "the remote range [0x..., +n) is not mapped in process p, ...": what went wrong and what to do.
   */
  static String rangeText(long peerPid, long address, long length) {
    return "shm could not copy the read: the remote range [0x"
        + Long.toHexString(address)
        + ", +"
        + length
        + ") is not mapped in the target's process "
        + peerPid
        + ", so the advertisement's address or the offset is wrong";
  }
}
