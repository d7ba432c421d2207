package dev.dma.libfabric;

import dev.dma.api.DmaException;
import dev.dma.api.Errno;
import dev.dma.libfabric.internal.Abi;
import dev.dma.libfabric.internal.Native;
import dev.dma.spi.CompletionMessages;
import dev.dma.spi.FabricEndpoint;
import java.util.Objects;
import org.jspecify.annotations.Nullable;

/**
 * shm's workarounds on a {@link LibfabricEndpoint}'s data path, in one place (the endpoint's table
 * "shm and an operation its target refuses" says why each exists, per libfabric version):
 *
 * <ul>
 *   <li>{@link ShmBounce}: writes above 4 KiB posted from a dma-owned buffer, given up for good
 *       when the write fails, so no peer reads a source after its failure was delivered;
 *   <li>{@link ShmWriteCheck} (2.5+, {@link Quirks#shmReportsRefusedRmaAsDone}): a fetching atomic
 *       right behind every write, whose result decides the write's outcome, so a refused write
 *       fails {@code FI_EACCES}; its completions are matched here ({@link #succeeded}, {@link
 *       #errored});
 *   <li>the first page: a remote address below 4096 is refused before posting ({@code -FI_EFAULT}),
 *       since shm would not refuse it;
 *   <li>a read shm could not copy: from 2.5 the error entry naming no operation is read inside the
 *       post ({@link #failedCopy}); 2.0 to 2.4 and 1.x through {@link ShmFailedReads} ({@link
 *       Quirks#shmLeavesFailedReadCopiesUnnamed}, {@link Quirks#shmAcceptsReadsItCannotCopy});
 *   <li>peer endpoints of this process ({@link ShmNames.Local}): a post holds the peer's monitor
 *       and checks it is still open, so the peer's close cannot unmap its region inside the post.
 * </ul>
 *
 * <h2>shm and an operation its target refuses, per libfabric version</h2>
 *
 * A wrong remote key, a range outside the region (by its last byte only, too) or a region without
 * the access. Measured with two shm endpoints in one process (dma-libfabric {@code ShmRefusalTest})
 * and against a target process (dma-it {@code LostCompletionTest}, {@code ShmConformanceTest}), and
 * read in 2.1's and 2.6's source:
 *
 * <table class="striped">
 *   <caption>shm, refused operations</caption>
 *   <thead>
 *     <tr><th>libfabric</th><th>refused write</th><th>refused read</th><th>dma's defence</th></tr>
 *   </thead>
 *   <tbody>
 *     <tr><td>1.17</td><td>never completes: the target drops the command</td><td>not refused:
 *         reads check neither key nor bounds (the target's bytes arrive); at an unmapped address,
 *         an error entry naming no operation, and the read never completes</td><td>the completion
 *         deadline; a remote address in the first page is refused before posting ({@code
 *         -FI_EFAULT})</td></tr>
 *     <tr><td>2.1 (2.0 to 2.4 by the same code, not run)</td><td>never completes</td><td>not
 *         refused, as on 1.17: with CMA the initiator copies ({@code smr_rma_fast}); without CMA
 *         it never completes</td><td>the completion deadline; the first page as above</td></tr>
 *     <tr><td>2.5+ (2.6 run)</td><td>reported done, nothing lands ({@code smr_progress_cmd_rma}
 *         returns the command without {@code SMR_OP_ERROR})</td><td>not refused, as on 1.17 (with
 *         CMA); without CMA reported done, the landing buffer holding stale bytes of an earlier
 *         transfer from shm's bounce buffers</td><td>writes:
 *         {@link ShmWriteCheck}, a fetching atomic on the write's first and last bytes posted
 *         right behind it, whose result decides the write's outcome, so a refused write fails
 *         {@code FI_EACCES} ({@code ACCESS_DENIED}) in the same round trip; reads: none (no key is checked with CMA, and
 *         without it a landing-buffer nonce would be overwritten by the stale bytes); the
 *         first page as above</td></tr>
 *   </tbody>
 * </table>
 *
 * The check costs one more command per shm write on 2.5+ only, handled by the target in the same
 * pass as the write; on other versions its field is null and the data path reads it once per post
 * and completion. Other providers never reach this class ({@link PlainQuirks}).
 *
 * <p>Chosen at open ({@link EndpointQuirks#choose}) when the provider is shm; owned by the endpoint
 * and used by its owner thread only. Every decision on the library's version is a {@link Quirks}
 * predicate asked in the constructor and kept in a final field; this class compares no versions.
 * The post and completion paths allocate nothing (a failure's text is built on the failure path);
 * the locks are the peer records' monitors, taken only for peers in this process.
 */
final class ShmQuirks implements EndpointQuirks {
  /** The first page, which no process maps (Linux's {@code vm.mmap_min_addr} is at least this). */
  private static final long FIRST_PAGE = 4096;

  private final LibfabricEndpoint endpoint;
  private final DataPath data;
  private final AddressVector peers;

  // The decisions on the library's version, asked of Quirks once, at construction.
  /** {@link Quirks#shmReportsRefusedRmaAsDone}: the write check (2.5+). */
  private final boolean reportsRefusedAsDone;

  /** {@link Quirks#shmLeavesFailedReadCopiesUnnamed}: {@link ShmFailedReads} (up to 2.4). */
  private final boolean leavesFailedReadCopiesUnnamed;

  /** {@link Quirks#shmAcceptsReadsItCannotCopy}: every posted read recorded (1.x). */
  private final boolean acceptsReadsItCannotCopy;

  // The buffers the peer sees instead of the caller's operands (see ShmBounce); from openSlots.
  private @Nullable ShmBounce bounce;

  // From libfabric 2.5, the check that a write shm reports done did land (ShmWriteCheck); null
  // before, which costs the data path one field read.
  private @Nullable ShmWriteCheck check;

  // With virtual addresses: a remote address in the first page is refused before posting.
  private boolean refuseFirstPage;

  // Up to 2.4, which read shm failed to copy (ShmFailedReads); null from 2.5.
  private @Nullable ShmFailedReads failedReads;

  // Inside failedCopy: an error entry naming no operation is the post's, not one to warn about.
  private boolean takingFailedCopy;

  /**
   * The quirks of {@code endpoint}, which opened on shm.
   *
   * @param endpoint the endpoint, whose data path, peers and registrations these use
   * @param provider the provider's name ({@code fabric_attr->prov_name}), shm
   * @param libraryVersion the loaded library's packed {@code fi_version()}
   */
  ShmQuirks(LibfabricEndpoint endpoint, String provider, int libraryVersion) {
    this.endpoint = endpoint;
    this.data = endpoint.data;
    this.peers = endpoint.peers;
    this.reportsRefusedAsDone = Quirks.shmReportsRefusedRmaAsDone(provider, libraryVersion);
    this.leavesFailedReadCopiesUnnamed =
        Quirks.shmLeavesFailedReadCopiesUnnamed(provider, libraryVersion);
    this.acceptsReadsItCannotCopy = Quirks.shmAcceptsReadsItCannotCopy(provider, libraryVersion);
  }

  /**
   * {@inheritDoc}
   *
   * <p>On 2.5+ each slot has a second context, for its write's check, right after the slots' own:
   * both operations are in flight at once.
   */
  @Override
  public void openSlots(int count) {
    data.openSlab(count, reportsRefusedAsDone ? 2 : 1, endpoint.arena);
    bounce = new ShmBounce(count);
    refuseFirstPage = endpoint.objects.facts.virtualAddressing();
    if (refuseFirstPage && leavesFailedReadCopiesUnnamed) {
      failedReads = new ShmFailedReads(count, acceptsReadsItCannotCopy);
    }
    if (reportsRefusedAsDone) {
      ShmWriteCheck writeCheck = new ShmWriteCheck(count, endpoint.arena);
      if (endpoint.objects.facts.requiresLocalMr()) {
        long mr =
            endpoint.registrations.register(
                writeCheck.nativeBase,
                writeCheck.nativeBytes,
                Abi.FI_READ | Abi.FI_WRITE,
                "fi_mr_reg(shm write check)");
        writeCheck.descriptor(endpoint.descriptor(mr));
      }
      check = writeCheck;
    }
  }

  /**
   * {@inheritDoc}
   *
   * <p>{@code -FI_EFAULT} for a remote address in the first page; {@code -FI_ENOTCONN} for a peer
   * that is an shm endpoint of this process and closed (shm would write into its unmapped region);
   * {@code -FI_EAGAIN} while a check to the peer is owed.
   */
  @Override
  public int postWrite(
      int slot,
      long peer,
      long localAddress,
      long lengthBytes,
      long descriptor,
      long remoteAddress,
      long remoteKey) {
    if (refuseFirstPage && Long.compareUnsigned(remoteAddress, FIRST_PAGE) < 0) {
      return -Errno.FI_EFAULT;
    }
    ShmWriteCheck writeCheck = check;
    if (writeCheck != null && writeCheck.deferred() > 0) {
      // A check still owed goes first; no later write to its peer may overtake it (ShmWriteCheck).
      postDeferredChecks();
      if (writeCheck.owes(peer)) {
        return -Abi.FI_EAGAIN;
      }
    }
    ShmBounce shm = bounce;
    // The copy into the bounce buffer comes first, outside the peer's lock below.
    long from =
        shm != null && descriptor == 0 ? shm.source(slot, localAddress, lengthBytes) : localAddress;
    ShmNames.Local local = peers.local(peer);
    int code;
    if (local == null) {
      code = data.writemsg(slot, peer, from, lengthBytes, descriptor, remoteAddress, remoteKey);
    } else {
      // A peer endpoint of this process: it must not close (and unmap) inside the post.
      synchronized (local) {
        if (!local.open) {
          return -Abi.FI_ENOTCONN;
        }
        code = data.writemsg(slot, peer, from, lengthBytes, descriptor, remoteAddress, remoteKey);
      }
    }
    if (shm != null && descriptor == 0) {
      shm.posted(slot, from, code == FabricEndpoint.POSTED);
    }
    if (writeCheck != null && code == FabricEndpoint.POSTED) {
      writeCheck.posted(slot, peer, localAddress, lengthBytes, remoteAddress, remoteKey);
      checkBehind(writeCheck, slot);
    }
    return code;
  }

  /**
   * {@inheritDoc}
   *
   * <p>Refuses as {@link #postWrite}, and fails a read shm could not copy with the errno shm gave
   * ({@link #failedCopy}, or {@code -FI_EIO} through {@link ShmFailedReads} up to 2.4).
   */
  @Override
  public int postRead(
      int slot,
      long peer,
      long localAddress,
      long lengthBytes,
      long descriptor,
      long remoteAddress,
      long remoteKey) {
    if (refuseFirstPage && Long.compareUnsigned(remoteAddress, FIRST_PAGE) < 0) {
      return -Errno.FI_EFAULT;
    }
    // No bounce for reads, on shm either: a read's landing buffer was never written after its
    // failure was delivered, on any provider (OperandSafetyTest checks every one, every run).
    ShmNames.Local local = peers.local(peer);
    int rc;
    if (local == null) {
      rc = data.read(slot, peer, localAddress, lengthBytes, descriptor, remoteAddress, remoteKey);
    } else {
      // A peer endpoint of this process: it must not close (and unmap) inside the post.
      synchronized (local) {
        if (!local.open) {
          return -Abi.FI_ENOTCONN;
        }
        rc = data.read(slot, peer, localAddress, lengthBytes, descriptor, remoteAddress, remoteKey);
      }
    }
    ShmFailedReads reads = failedReads;
    if (reads != null) {
      if (rc == FabricEndpoint.POSTED) {
        if (reads.reportsAfterThePost) {
          reads.posted(slot, peers.shmPid(peer), remoteAddress, lengthBytes);
        }
      } else if (rc == -Abi.FI_EAGAIN
          && reads.refusedUnmapped(slot, peers.shmPid(peer), remoteAddress, lengthBytes)) {
        return -Abi.FI_EIO;
      }
      return rc;
    }
    // Reached only where shm names its failed copy inside the post (2.5+: no failedReads).
    return rc == -Abi.FI_EAGAIN && refuseFirstPage ? failedCopy(rc) : rc;
  }

  /**
   * shm copies a read itself with CMA ({@code smr_rma_fast}, {@code process_vm_readv}); when the
   * copy fails (the remote address is not mapped in the target), the post answers {@code
   * -FI_EAGAIN} and shm writes an error entry naming no operation. Retried, the read would fail the
   * same way at every pass until a deadline. So after an {@code -FI_EAGAIN} from a read on shm the
   * queue is read at once: an error entry naming no operation that appeared there is this post's
   * (the worker posts from one thread, and shm writes the entry inside the post), and the post
   * fails with its errno. A genuine {@code -FI_EAGAIN} (a full queue) leaves no such entry. That is
   * 2.5 and later; 2.0 to 2.4 write no entry, and 1.x accepts the post and writes the entry with no
   * operation: there {@link ShmFailedReads} tells which read failed. {@code ShmRefusalTest} pins
   * all three.
   */
  private int failedCopy(int rc) {
    CompletionDecoder decoder = endpoint.decoder;
    long before = decoder.orphanErrors;
    // The entry may sit behind completions not yet reaped: read on until it or the queue's end (a
    // bound as well: the queue holds at most one entry per slot, plus this one).
    takingFailedCopy = true;
    try {
      for (int reads = 0;
          reads <= data.slots / CompletionDecoder.BATCH + 1 && decoder.orphanErrors == before;
          reads++) {
        if (endpoint.progressOnce() == -Abi.FI_EAGAIN) {
          break;
        }
      }
    } finally {
      takingFailedCopy = false;
    }
    return decoder.orphanErrors > before ? -decoder.orphanErrno : rc;
  }

  @Override
  public void catchUp() {
    if (check != null && check.deferred() > 0) {
      postDeferredChecks();
    }
  }

  /**
   * {@inheritDoc}
   *
   * <p>With the write check: the slot whose outcome both its completions decided, once both are in
   * ({@link ShmWriteCheck#failMessage} says which).
   */
  @Override
  public int succeeded(int index, CompletionDecoder outcome) {
    ShmWriteCheck writeCheck = check;
    if (writeCheck == null) {
      return index;
    }
    int slot = checkedSuccess(writeCheck, index);
    if (slot < 0) {
      return CompletionDecoder.NONE; // held: the slot's other operation is still open
    }
    String failure = writeCheck.failMessage[slot];
    if (failure != null) {
      writeCheck.failMessage[slot] = null;
      outcome.errno = writeCheck.failErrno[slot];
      outcome.providerErrno = writeCheck.failProviderErrno[slot];
      outcome.message = failure;
      outcome.settleAsDone = !writeCheck.writeErrored[slot];
    }
    return slot;
  }

  /** {@inheritDoc} */
  @Override
  public int errored(int index, CompletionDecoder outcome) {
    ShmWriteCheck writeCheck = check;
    if (writeCheck == null) {
      return index;
    }
    String entry = Objects.requireNonNullElse(outcome.message, "");
    int slot = checkedError(writeCheck, index, outcome.errno, outcome.providerErrno, entry);
    if (slot < 0) {
      return CompletionDecoder.NONE; // held: the slot's other operation is still open
    }
    outcome.errno = writeCheck.failErrno[slot];
    outcome.providerErrno = writeCheck.failProviderErrno[slot];
    String failure = writeCheck.failMessage[slot];
    writeCheck.failMessage[slot] = null;
    outcome.message = failure != null ? failure : entry;
    return slot;
  }

  /** Settles the slot's bounce buffer and, up to 2.4, ends its read's watch (ShmFailedReads). */
  @Override
  public void settle(int slot, boolean succeeded) {
    ShmFailedReads reads = failedReads;
    if (reads != null) {
      reads.ended(slot);
    }
    ShmBounce shm = bounce;
    if (shm != null) {
      if (succeeded) {
        shm.succeeded(slot);
      } else {
        shm.failed(slot);
      }
    }
  }

  @Override
  public int ownerOfOrphanError() {
    ShmFailedReads reads = failedReads;
    return reads == null ? -1 : reads.ownerOfOrphan();
  }

  @Override
  public String orphanErrorText(int owner, String entryMessage) {
    ShmFailedReads reads = Objects.requireNonNull(failedReads);
    return reads.unmappedText(owner) + " (" + entryMessage + ", an error naming no operation)";
  }

  @Override
  public boolean warnsOfOrphanErrors() {
    return !takingFailedCopy;
  }

  @Override
  public @Nullable String postErrorCause(int code) {
    if (Math.abs(code) == Errno.FI_EFAULT && refuseFirstPage) {
      return ": the remote address is in the first page, which no process maps, so the"
          + " advertisement's address or the offset is wrong (refused before posting)";
    }
    if (Math.abs(code) == Abi.FI_EIO && refuseFirstPage) {
      return ": shm could not copy the read: the remote range is not mapped in the target process,"
          + " so the advertisement's address or the offset is wrong (from 2.5 shm says so with an"
          + " error naming no operation, read at the post; up to 2.4 dma asked the kernel)";
    }
    return null;
  }

  /**
   * {@inheritDoc}
   *
   * <p>A read shm could not copy because the target never mapped the range ({@code -FI_EIO}) is
   * {@link DmaException.Reason#ACCESS_DENIED}, the reason tcp gives a range its target refuses.
   */
  @Override
  public DmaException.@Nullable Reason postFailureReason(int code) {
    // shm's read copy failed (failedCopy, ShmFailedReads): the target's memory there is not
    // accessible, the reason tcp gives a range its target refuses.
    return Math.abs(code) == Abi.FI_EIO && refuseFirstPage
        ? DmaException.Reason.ACCESS_DENIED
        : null;
  }

  @Override
  public void reset() {
    if (bounce != null) {
      bounce.discardPosted("resetting the endpoint");
    }
    if (check != null) {
      check.clear();
    }
  }

  @Override
  public void close() {
    if (bounce != null) {
      bounce.close();
    }
  }

  /** How many write checks met {@code -FI_EAGAIN} and were owed (0 without the check). */
  long checksOwed() {
    ShmWriteCheck writeCheck = check;
    return writeCheck == null ? 0 : writeCheck.owedSoFar;
  }

  /** Whether every write's success waits for its check (2.5+, once slots are open). */
  boolean writeCheckActive() {
    return check != null;
  }

  // ---------------------------------------------------------------------------------------------
  // The write check on 2.5+ (ShmWriteCheck): the owner thread, inside post, reap and progress.

  /**
   * Posts the check of the write just posted on {@code slot}, right behind it (ShmWriteCheck says
   * why the target then handles it after the write's bytes landed). One that meets -FI_EAGAIN is
   * owed: posted by the next reap, progress or write, before any later write to that peer.
   */
  private void checkBehind(ShmWriteCheck writeCheck, int slot) {
    int code = postCheck(writeCheck, slot);
    if (code == FabricEndpoint.POSTED) {
      writeCheck.state[slot] |= ShmWriteCheck.CHECK_OPEN;
    } else if (code == FabricEndpoint.AGAIN) {
      writeCheck.defer(slot);
    } else {
      // The write's own completion delivers this failure.
      writeCheck.fail(slot, Math.abs(code), 0, uncheckedMessage(code));
    }
  }

  /**
   * A success entry of context {@code index} (a slot's own, or at {@code slots} and up its write's
   * check): the slot whose outcome is now due ({@link ShmWriteCheck#failMessage} says which), or -1
   * while the slot's other operation is still open.
   */
  private int checkedSuccess(ShmWriteCheck writeCheck, int index) {
    int slots = data.slots;
    if (index < slots) {
      // A read, or a write whose check is over or still to come.
      writeCheck.state[index] &= (byte) ~ShmWriteCheck.WRITE_OPEN;
      return writeCheck.state[index] == 0 ? index : -1;
    }
    int slot = index - slots;
    byte state = writeCheck.state[slot];
    if ((state & ShmWriteCheck.CHECK_OPEN) == 0) {
      return -1; // no check of this slot is open: nothing to deliver
    }
    writeCheck.state[slot] = (byte) (state & ~ShmWriteCheck.CHECK_OPEN);
    if (!writeCheck.accepted(slot)) {
      writeCheck.fail(slot, Abi.FI_EACCES, 0, refusedMessage());
    }
    return writeCheck.state[slot] == 0 ? slot : -1;
  }

  /**
   * An error entry of context {@code index}: as {@link #checkedSuccess}, with the failure recorded.
   * The write's own error wins over whatever its check found.
   */
  private int checkedError(
      ShmWriteCheck writeCheck, int index, int errno, int providerErrno, String message) {
    int slots = data.slots;
    if (index < slots) {
      writeCheck.state[index] &= (byte) ~ShmWriteCheck.WRITE_OPEN;
      writeCheck.failMessage[index] = null;
      writeCheck.fail(index, errno, providerErrno, message);
      writeCheck.writeErrored[index] = true;
      return writeCheck.state[index] == 0 ? index : -1;
    }
    int slot = index - slots;
    byte state = writeCheck.state[slot];
    if ((state & ShmWriteCheck.CHECK_OPEN) == 0) {
      return -1;
    }
    writeCheck.state[slot] = (byte) (state & ~ShmWriteCheck.CHECK_OPEN);
    writeCheck.fail(
        slot, errno, providerErrno, "the check that shm's write landed failed: " + message);
    return writeCheck.state[slot] == 0 ? slot : -1;
  }

  /** Posts the checks that met -FI_EAGAIN, oldest first, until one meets it again. */
  private void postDeferredChecks() {
    ShmWriteCheck writeCheck = check;
    if (writeCheck == null) {
      return;
    }
    while (writeCheck.deferred() > 0) {
      int slot = writeCheck.takeDeferred();
      int code = postCheck(writeCheck, slot);
      if (code == FabricEndpoint.AGAIN) {
        writeCheck.keepDeferred(slot);
        return;
      }
      byte state = (byte) (writeCheck.state[slot] & ~ShmWriteCheck.CHECK_OWED);
      if (code == FabricEndpoint.POSTED) {
        writeCheck.state[slot] = (byte) (state | ShmWriteCheck.CHECK_OPEN);
      } else {
        writeCheck.state[slot] = state;
        writeCheck.fail(slot, Math.abs(code), 0, uncheckedMessage(code));
        OutcomeQueue queue = endpoint.queue;
        if (state == 0 && queue.room() > 0) {
          // The write completed already; delivered by the next reap, from the queue.
          String failure = writeCheck.failMessage[slot];
          writeCheck.failMessage[slot] = null;
          queue.add(slot, writeCheck.failErrno[slot], writeCheck.failProviderErrno[slot], failure);
        }
      }
    }
  }

  /** Posts the slot's check, under the peer's lock when the peer is an endpoint of this process. */
  private int postCheck(ShmWriteCheck writeCheck, int slot) {
    long peer = writeCheck.peer[slot];
    if (!peers.isLive(peer)) {
      return -Abi.FI_ENOTCONN;
    }
    ShmNames.Local local = peers.local(peer);
    if (local == null) {
      return fetchAtomic(writeCheck, slot);
    }
    synchronized (local) {
      if (!local.open) {
        return -Abi.FI_ENOTCONN;
      }
      return fetchAtomic(writeCheck, slot);
    }
  }

  private int fetchAtomic(ShmWriteCheck writeCheck, int slot) {
    writeCheck.prepare(slot, data.context(data.slots + slot));
    return data.fetchAtomic(writeCheck.message, writeCheck.resultIoc, writeCheck.resultDesc);
  }

  private static String refusedMessage() {
    return CompletionMessages.of(Abi.FI_EACCES, Native.strerror(Abi.FI_EACCES))
        + "; shm reported the write done, but the target refused its remote key, address range"
        + " or access (found by a fetching atomic on the write's first and last bytes: shm on"
        + " libfabric 2.5+ reports refused writes as done)";
  }

  private String uncheckedMessage(int code) {
    return "shm took the write, but the check that it landed could not be posted: "
        + endpoint.errorText(code)
        + " ("
        + code
        + ")";
  }
}
