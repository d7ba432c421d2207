package dev.dma.libfabric;

import static java.lang.foreign.ValueLayout.JAVA_LONG;

import dev.dma.api.DmaException;
import dev.dma.libfabric.internal.Abi;
import dev.dma.libfabric.internal.Native;
import java.lang.foreign.Arena;
import org.jspecify.annotations.Nullable;

/**
 * The one reading of a {@link LibfabricEndpoint}'s completion queue, for {@link
 * LibfabricEndpoint#reap} and {@link LibfabricEndpoint#progress} alike: {@code fi_cq_read} into a
 * preallocated batch, each entry's {@code op_context} back to its op slot, {@code fi_cq_readerr}
 * with its message, and the provider's quirks ({@link EndpointQuirks#succeeded}, {@link
 * EndpointQuirks#errored}) deciding which slot's outcome is due. Reap delivers what it decodes to
 * the worker's sink; progress queues it for the next reap ({@link OutcomeQueue}).
 *
 * <p>After {@link #success} or {@link #error} returns a slot, {@link #message} (null for a
 * success), {@link #errno}, {@link #providerErrno} and {@link #settleAsDone} describe its outcome
 * until the next call.
 *
 * <p>Only the endpoint's owner thread calls it. The success path allocates nothing; an error
 * entry's message is built on the error path.
 */
final class CompletionDecoder {
  /** Under the endpoint's name, as before decoding had a class of its own. */
  private static final System.Logger LOG = System.getLogger(LibfabricEndpoint.class.getName());

  /** Completions read per {@code fi_cq_read}. */
  static final int BATCH = 16;

  /** No outcome is due: the slot's other operation is still open, or the entry was dropped. */
  static final int NONE = -1;

  /** A success entry whose {@code op_context} names no slot of this endpoint. */
  static final int ORPHAN = -2;

  /** {@code fi_cq_readerr} found the queue empty. */
  static final int EMPTY = -3;

  private final DataPath data;
  private final FabricObjects objects;
  private final EndpointQuirks quirks;
  private final long entries;
  private final long errorEntry;
  private final long errorEntryBytes;
  private final long strerrorBuffer;

  // The outcome of the slot the last success() or error() returned.
  int errno;
  int providerErrno;
  @Nullable String message;

  /**
   * Whether the slot's operands are released as after a success ({@link EndpointQuirks#settle}):
   * false for a failure, except a write shm completed whose check then refused it.
   */
  boolean settleAsDone;

  /** Entries whose op_context named no slot (shm reports some errors with a NULL context). */
  long orphanCompletions;

  /** Error entries naming no operation, and the errno of the latest (shm's failed read copy). */
  long orphanErrors;

  int orphanErrno;

  CompletionDecoder(DataPath data, FabricObjects objects, EndpointQuirks quirks, Arena arena) {
    this.data = data;
    this.objects = objects;
    this.quirks = quirks;
    this.entries = arena.allocate(BATCH * Abi.CQ_ENTRY_SIZE, 64).address();
    this.errorEntryBytes =
        Native.API_VERSION >= Abi.FI_VERSION_1_20
            ? Abi.ERR_ENTRY_SIZE_1_20
            : Abi.ERR_ENTRY_SIZE_1_0;
    // Twice the size the provider copies, so a provider newer than these headers cannot overrun.
    this.errorEntry = arena.allocate(2 * Abi.ERR_ENTRY_SIZE_1_20, 64).address();
    this.strerrorBuffer = arena.allocate(256, 8).address();
  }

  /**
   * Reads up to {@code count} entries ({@code fi_cq_read}).
   *
   * @return how many (then {@link #success} each), {@code -FI_EAGAIN}, {@code -FI_EAVAIL} (then
   *     {@link #error}), or another negative code ({@link #readFailed})
   */
  long read(int count) {
    return data.cqRead(entries, count);
  }

  /**
   * Entry {@code i} of the last {@link #read}, a success.
   *
   * @return the slot whose outcome is due now; {@link #NONE} while the slot's other operation is
   *     open; {@link #ORPHAN} when the entry names no slot (counted by the caller)
   */
  int success(int i) {
    int index = data.slotOf(Native.word(entries + i * Abi.CQ_ENTRY_SIZE + Abi.CQ_ENTRY_OP_CONTEXT));
    if (index < 0) {
      return ORPHAN;
    }
    message = null;
    settleAsDone = true;
    return quirks.succeeded(index, this);
  }

  /**
   * Reads one error entry ({@code fi_cq_readerr}, after {@code -FI_EAVAIL}).
   *
   * @return the slot whose outcome is due now; {@link #NONE} while the slot's other operation is
   *     open or when the entry named no operation (dropped and counted); {@link #EMPTY} when the
   *     queue turned out empty
   */
  int error() {
    int index = readError();
    if (index == EMPTY || index < 0) {
      return index == EMPTY ? EMPTY : NONE;
    }
    settleAsDone = false;
    return quirks.errored(index, this);
  }

  /** The failure of a {@code fi_cq_read} that returned neither entries nor a retry. */
  static DmaException readFailed(long n) {
    return new DmaException(
        DmaException.Kind.FABRIC, Native.failure("fi_cq_read", n), (int) -n, 0, null);
  }

  /**
   * Reads one error entry into the outcome fields.
   *
   * @return its context's index, -1 when it names none (unless shm's quirks match it to a slot), or
   *     {@link #EMPTY}
   */
  private int readError() {
    // A zeroed entry: with err_data_size 0 the provider hands back its own buffer instead of
    // memcpy'ing into a stale err_data pointer from the previous call.
    Native.MEMORY.asSlice(errorEntry, errorEntryBytes).fill((byte) 0);
    if (errorEntryBytes > Abi.ERR_SRC_ADDR_1_20) {
      // What the 2.x inline fi_cq_readerr does before the call.
      Native.MEMORY.set(JAVA_LONG, errorEntry + Abi.ERR_SRC_ADDR_1_20, Abi.FI_ADDR_NOTAVAIL);
    }
    long rc;
    try {
      rc =
          (long) Native.L_LLL_CRITICAL.invokeExact(objects.fnCqReaderr, objects.cq, errorEntry, 0L);
    } catch (Throwable impossible) {
      throw new AssertionError(impossible);
    }
    if (rc == -Abi.FI_EAGAIN) {
      return EMPTY;
    }
    if (rc <= 0) {
      throw new DmaException(
          DmaException.Kind.FABRIC, Native.failure("fi_cq_readerr", rc), (int) -rc, 0, null);
    }
    long context = Native.word(errorEntry + Abi.ERR_OP_CONTEXT);
    int err = Math.abs(Native.int32(errorEntry + Abi.ERR_ERR));
    int providerError = Native.int32(errorEntry + Abi.ERR_PROV_ERRNO);
    long errData = Native.word(errorEntry + Abi.ERR_ERR_DATA);
    Native.MEMORY.set(java.lang.foreign.ValueLayout.JAVA_BYTE, strerrorBuffer, (byte) 0);
    String providerText;
    try {
      long text =
          (long)
              Native.L_LILLL.invokeExact(
                  objects.fnCqStrerror, objects.cq, providerError, errData, strerrorBuffer, 256L);
      providerText = text == 0 ? "" : Native.string(text);
    } catch (Throwable impossible) {
      throw new AssertionError(impossible);
    }
    int index = data.slotOf(context);
    errno = err;
    providerErrno = providerError;
    message =
        CompletionErrors.message(objects.facts.providerName(), err, providerError, providerText);
    if (index < 0) {
      orphanCompletions++;
      orphanErrors++;
      orphanErrno = err == 0 ? Abi.FI_EIO : err;
      int owner = quirks.ownerOfOrphanError();
      if (owner >= 0) {
        // 1.x: the read shm could not copy, matched (ShmFailedReads); its failure is delivered.
        // The reason tcp gives a range its target refuses; shm's own errno is in the text.
        errno = Abi.FI_EACCES;
        message = quirks.orphanErrorText(owner, message);
        return owner;
      }
      if (quirks.warnsOfOrphanErrors()) {
        LOG.log(
            System.Logger.Level.WARNING,
            "dropped a completion error naming no operation: " + message);
      }
    }
    return index;
  }
}
