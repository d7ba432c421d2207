package dev.dma.libfabric;

import dev.dma.api.DmaException;
import org.jspecify.annotations.Nullable;

/**
 * What a {@link LibfabricEndpoint}'s data path does differently on its provider: the seam between
 * the generic path and one provider's workarounds. One implementation is chosen when the endpoint
 * opens, from what libfabric returned ({@link #choose}), and held in a final field, so every call
 * site sees at most two receiver types: {@link PlainQuirks} (every provider but shm: post straight
 * through, nothing to settle) and {@link ShmQuirks} (shm's bounce buffers, its write check on 2.5+,
 * its failed-read matching up to 2.4, the first-page refusal and the locks around posts to peer
 * endpoints of this process). Every decision either takes on the provider's name or the library's
 * version is a {@link Quirks} predicate, asked once by the implementation's constructor and kept in
 * a final field: a new data-path quirk of a provider is its predicate there and its use in the one
 * implementation that acts on it. A quirk that needs a new hook on the data path is one more method
 * here and in both implementations.
 *
 * <p>Only the endpoint's owner thread calls it. The per-transfer methods ({@link #postWrite},
 * {@link #postRead}, {@link #catchUp}, {@link #succeeded}, {@link #errored}, {@link #settle})
 * allocate nothing; the rest run at open, on failure paths or at close.
 */
sealed interface EndpointQuirks permits PlainQuirks, ShmQuirks {

  /**
   * The quirks of an endpoint that opened on {@code facts}' provider, with the loaded library's
   * version. This only picks the class; each implementation's constructor asks {@link Quirks} for
   * the decisions it acts on, from the same provider name and version, so a decision added there
   * reaches the class that acts on it without passing through here.
   *
   * @param endpoint the endpoint, whose data path the quirks use
   * @param facts what libfabric returned
   * @param libraryVersion the loaded library's packed {@code fi_version()}
   * @return the quirks, owned by the endpoint
   */
  static EndpointQuirks choose(LibfabricEndpoint endpoint, InfoFacts facts, int libraryVersion) {
    String provider = facts.providerName();
    return Quirks.needsShmWorkarounds(provider)
        ? new ShmQuirks(endpoint, provider, libraryVersion)
        : new PlainQuirks(endpoint, provider, libraryVersion);
  }

  /**
   * Opens the endpoint's op-slot slab ({@link DataPath#openSlab}) and whatever per-slot state the
   * quirks keep.
   *
   * @param count the slots, at least 1
   */
  void openSlots(int count);

  /**
   * Posts a write whose slot and peer the endpoint checked; as {@link LibfabricEndpoint#postWrite}.
   *
   * @return {@code POSTED}, {@code AGAIN} or a negative code
   */
  int postWrite(
      int slot,
      long peer,
      long localAddress,
      long lengthBytes,
      long descriptor,
      long remoteAddress,
      long remoteKey);

  /**
   * Posts a read whose slot and peer the endpoint checked; as {@link LibfabricEndpoint#postRead}.
   *
   * @return {@code POSTED}, {@code AGAIN} or a negative code
   */
  int postRead(
      int slot,
      long peer,
      long localAddress,
      long lengthBytes,
      long descriptor,
      long remoteAddress,
      long remoteKey);

  /** At the start of a reap or progress: posts what the quirks still owe (shm's write checks). */
  void catchUp();

  /**
   * A success entry of context {@code index}.
   *
   * @param index the context's index in the slab
   * @param outcome where a due slot's outcome goes (preset to a success)
   * @return the slot whose outcome is due now, or {@link CompletionDecoder#NONE}
   */
  int succeeded(int index, CompletionDecoder outcome);

  /**
   * An error entry of context {@code index}.
   *
   * @param index the context's index in the slab
   * @param outcome the entry's errno, provider errno and message, which a due slot's outcome may
   *     replace
   * @return the slot whose outcome is due now, or {@link CompletionDecoder#NONE}
   */
  int errored(int index, CompletionDecoder outcome);

  /**
   * Right before a slot's outcome is delivered: releases what its operation held.
   *
   * @param slot the slot
   * @param succeeded whether its operands are released as after a success
   */
  void settle(int slot, boolean succeeded);

  /**
   * The slot an error entry naming no operation belongs to, or -1 (then it is dropped).
   *
   * @return the slot, or -1
   */
  int ownerOfOrphanError();

  /**
   * The failure text of {@link #ownerOfOrphanError()}'s slot.
   *
   * @param owner the slot
   * @param entryMessage the entry's own message
   * @return the text
   */
  String orphanErrorText(int owner, String entryMessage);

  /**
   * Whether an error entry naming no operation is logged as dropped now (not while a post reads its
   * own such entry).
   *
   * @return whether to warn
   */
  boolean warnsOfOrphanErrors();

  /**
   * What this provider means by a post's code, appended to {@code fi_strerror}'s text.
   *
   * @param code the code
   * @return the cause, starting {@code ": "}, or null
   */
  @Nullable String postErrorCause(int code);

  /**
   * What a post failing outright with {@code code} means, where its errno alone would mislead.
   *
   * @param code the code
   * @return the reason, or null for {@link DmaException.Reason#ofErrno}
   */
  DmaException.@Nullable Reason postFailureReason(int code);

  /** The endpoint was reset: nothing posted before is owed or held. */
  void reset();

  /** The endpoint closed its transport: frees what the quirks hold. */
  void close();
}
