package dev.dma.spi;

import dev.dma.api.DmaException;
import dev.dma.api.MemoryKind;
import dev.dma.api.RemoteAccess;
import java.lang.foreign.MemorySegment;
import java.util.Set;
import org.jspecify.annotations.Nullable;

/**
 * One open fabric endpoint on one device: the primitives the fabric worker drives. Opened by {@link
 * FabricProvider#open}.
 *
 * <h2>Threads and ownership</h2>
 *
 * The endpoint is owned and used by one thread (the fabric worker, or a test driving it), except
 * {@link #deregister(long)}, which any thread may call because a registration's last lease may drop
 * on a checksum-pool thread or in a user's {@code invalidate}. The owner closes it once, after
 * every posted operation was reaped.
 *
 * <h2>Data path</h2>
 *
 * Posting and reaping return raw codes rather than throwing: {@link #POSTED}, {@link #AGAIN} (the
 * provider's {@code -FI_EAGAIN}: transmit queue full or peer still connecting; retry after
 * reaping), or another negative {@code -FI_E*} error. Operations are identified by an <em>op
 * slot</em> index in {@code [0, slots)} chosen by the caller; the endpoint keeps whatever native
 * per-operation context it needs for the slot (for libfabric a 64-byte {@code fi_context2} in one
 * native slab) and hands the slot back on reap. Nothing on this path allocates.
 *
 * <h2>Peers</h2>
 *
 * A peer handle ({@code fi_addr_t}) comes only from {@link #insertPeer(byte[])}; libfabric does not
 * validate handles, so the caller must never post against a handle it has removed.
 */
public interface FabricEndpoint extends AutoCloseable {

  /** A post that was accepted. */
  int POSTED = 0;

  /** {@code -FI_EAGAIN}: not accepted now; reap, then post again. */
  int AGAIN = -11;

  /**
   * Optional behaviour an endpoint declares in {@link #capabilities()}. What is not declared is
   * false: the worker then assumes the safe default each entry names.
   */
  enum Capability {
    /**
     * {@link #removePeer(long)} fails that peer's posted operations with error completions (flushes
     * them), so a dead peer's operations can be recovered without {@link #reset()}. Only a provider
     * that guarantees it, and guarantees it touches no operand after the flushed completion, may
     * declare it. Without it the worker resets the endpoint to recover them.
     */
    REMOVAL_FLUSHES,

    /**
     * The endpoint completes posted operations in the order they were posted, across all peers, so
     * that one operation that never completes (its peer closed or died with it posted, or dropped
     * it) holds back the completions of every later one, to every peer, until {@link #reset()}: shm
     * up to libfabric 2.4, whose initiator reads its responses from one in-order queue. Declaring
     * it also promises that each peer consumes the operations posted to it in order across a reset:
     * an operation posted again after the reset lands after whatever its earlier post still moves,
     * so a write may be posted again then (same bytes, and none land later than the repost's
     * completion).
     *
     * <p>The worker then judges only the incarnation whose operation is the oldest one stuck (or
     * one that left with operations posted), and posts every other stuck operation again after the
     * reset instead of failing it.
     */
    COMPLETES_IN_POST_ORDER,

    /**
     * An operation posted to a peer whose endpoint then went away may stay posted for ever, neither
     * completing nor failing (shm: its command waits in the gone peer's queue), so the worker asks
     * {@link #peerGone} about the peers of operations long in flight as well. Providers that fail
     * such operations by themselves (tcp: the connection closes) do not declare it, and are asked
     * only about refused posts and failed completions.
     */
    STRANDS_OPERATIONS_OF_GONE_PEERS,

    /**
     * {@link #awaitIncoming} can sleep until a peer's RMA needs this endpoint's progress, and
     * {@link #incomingPending} answers: the provider has a wait object that wakes on incoming RMA.
     * A {@code PassiveTarget} backs off to sleeping between progress calls only on an endpoint that
     * declares it; on others it spins and yields, since a blind sleep would delay every incoming
     * transfer by it.
     */
    AWAITS_INCOMING
  }

  /**
   * This endpoint's fabric address, to send to clients (a 16-byte {@code sockaddr_in} on tcp, 32
   * bytes on EFA).
   *
   * @return a fresh copy of the address bytes
   */
  byte[] localAddress();

  /**
   * The identity of a peer address: two addresses with equal identity name the same endpoint slot
   * and share one address-vector entry. By default every byte; EFA's is its GID and QPN. Also
   * validates the address, so a malformed one never reaches the address vector.
   *
   * @param address a peer's address bytes
   * @return the identity bytes (a new array)
   * @throws DmaException of kind {@link DmaException.Kind#FABRIC} for an address this fabric cannot
   *     hold, naming what is wrong
   */
  default byte[] peerIdentity(byte[] address) {
    return address.clone();
  }

  /**
   * A peer address as a person reads it in a failure message ({@code 10.0.0.2:4711} on tcp). By
   * default the bytes in hex. Called on failure paths only.
   *
   * @param address a peer's address bytes, possibly malformed
   * @return the text
   */
  default String peerText(byte[] address) {
    return java.util.HexFormat.of().formatHex(address);
  }

  /**
   * Inserts one peer address into the address vector.
   *
   * @param address a peer's address, already checked by {@link #peerIdentity(byte[])}
   * @return the handle to post against
   * @throws DmaException of kind {@link DmaException.Kind#FABRIC} when the insert fails
   */
  long insertPeer(byte[] address);

  /**
   * Removes a peer from the address vector. Its handle must not be posted against again. A provider
   * that tears down the peer's connection fails that peer's in-flight operations (EFA does), which
   * is why the worker removes a peer only when none are outstanding.
   *
   * @param handle a handle from {@link #insertPeer(byte[])}
   * @return 0, or the negative {@code fi_av_remove} code (logged by the caller, never fatal)
   */
  int removePeer(long handle);

  /**
   * The provider's transmit depth: operations it accepts before {@link #AGAIN}.
   *
   * @return the depth, or 0 when the provider reports no fixed depth
   */
  int maxTx();

  /**
   * Whether local operands need a registration and its descriptor ({@code FI_MR_LOCAL}). When
   * false, posts take descriptor 0 and nothing is registered.
   *
   * @return whether local registration is required
   */
  boolean requiresLocalRegistration();

  /**
   * Registers {@code [address, address + lengthBytes)} of memory of the given kind for local access
   * by posts.
   *
   * <p>The kind comes from the transfer's context ({@code Operands.memoryKind()}), or from the
   * service's {@code register}. Memory that is not {@linkplain MemoryKind#systemMemory() system
   * memory} is registered even when {@link #requiresLocalRegistration()} is false. An endpoint that
   * cannot register a kind throws, failing that transfer (or that {@code register}) only.
   *
   * @param address the first byte
   * @param lengthBytes the length, positive
   * @param kind the memory's kind
   * @return a non-zero registration handle, to pass to {@link #descriptor(long)} and {@link
   *     #deregister(long)}
   * @throws DmaException of kind {@link DmaException.Kind#FABRIC} carrying libfabric's error number
   *     as {@link DmaException#fabricErrno()}, for example {@code fi_mr_reg(operand): Cannot
   *     allocate memory (-12)} with {@link dev.dma.api.Errno#FI_ENOMEM}, which the registration
   *     cache answers by evicting idle spans and retrying (it decides on the number, not the text);
   *     of reason {@link DmaException.Reason#BAD_REQUEST} naming the kind and the provider when the
   *     endpoint cannot register that kind
   */
  long register(long address, long lengthBytes, MemoryKind kind);

  /**
   * Registers host memory: {@link #register(long, long, MemoryKind)} with {@link MemoryKind#HOST}.
   * A shorthand for callers; endpoints implement the three-argument method.
   *
   * @param address the first byte
   * @param lengthBytes the length, positive
   * @return a non-zero registration handle
   * @throws DmaException as {@link #register(long, long, MemoryKind)}
   */
  default long register(long address, long lengthBytes) {
    return register(address, lengthBytes, MemoryKind.HOST);
  }

  /**
   * The descriptor to post with for a registration ({@code fi_mr_desc}).
   *
   * @param registration a live registration handle
   * @return the descriptor
   */
  long descriptor(long registration);

  /**
   * Closes a registration exactly once. Thread-safe: may run on any thread, concurrently with the
   * owner's calls.
   *
   * @param registration a live registration handle
   */
  void deregister(long registration);

  /**
   * Prepares {@code count} op slots. Called once by the owner before the first post.
   *
   * @param count the number of slots, at least 1; slot indexes are {@code [0, count)}
   */
  void openSlots(int count);

  /**
   * Posts a write of local bytes into the peer's memory with delivery-complete semantics: its
   * completion means the peer holds the bytes.
   *
   * @param slot a free op slot, owned by this operation until it is reaped
   * @param peer a live peer handle
   * @param localAddress the first local byte
   * @param lengthBytes how many bytes
   * @param descriptor the local registration's descriptor, or 0 when none is required
   * @param remoteAddress the peer's virtual address or offset
   * @param remoteKey the peer's key
   * @return {@link #POSTED}, {@link #AGAIN}, or a negative error code
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
   * Posts a read of the peer's memory into local bytes.
   *
   * @param slot a free op slot, owned by this operation until it is reaped
   * @param peer a live peer handle
   * @param localAddress the first local byte that receives data
   * @param lengthBytes how many bytes
   * @param descriptor the local registration's descriptor, or 0 when none is required
   * @param remoteAddress the peer's virtual address or offset
   * @param remoteKey the peer's key
   * @return {@link #POSTED}, {@link #AGAIN}, or a negative error code
   */
  int postRead(
      int slot,
      long peer,
      long localAddress,
      long lengthBytes,
      long descriptor,
      long remoteAddress,
      long remoteKey);

  /**
   * libfabric's text for an error code ({@code fi_strerror}).
   *
   * @param code a libfabric code, negative or positive
   * @return the text
   */
  String errorText(int code);

  /**
   * What a post failing outright with {@code code} means for the caller. By default what the error
   * number implies ({@link DmaException.Reason#ofErrno}); an endpoint whose provider reports a peer
   * that is gone as some other error (sockets: {@code -FI_ENOENT} when nothing accepts at the
   * address) says {@link DmaException.Reason#PEER_UNREACHABLE}, and the worker then marks that
   * client incarnation unreachable, as a deadline would. Called on failure paths only.
   *
   * @param code the negative code the post returned
   * @return the reason
   */
  default DmaException.Reason postFailureReason(int code) {
    return DmaException.Reason.ofErrno(code);
  }

  /**
   * Reaps up to {@code max} completions into {@code sink}, without blocking. Also drives the
   * provider's progress.
   *
   * @param sink receives each completion
   * @param max the most to reap, positive
   * @return how many were delivered to the sink
   * @throws DmaException of kind {@link DmaException.Kind#FABRIC} for a queue-level failure that
   *     names no operation ({@code fi_cq_read: ...}); the completions delivered before it stand
   */
  int reap(CompletionSink sink, int max);

  /**
   * Registers memory for remote access, the passive target's side: the returned advertisement lets
   * a server RMA into it. Remote writes land, on providers with manual progress, only while this
   * endpoint is {@linkplain #progress() progressed}.
   *
   * @param segment native memory that outlives the returned region
   * @param access what peers may do to it
   * @return the region, owned by the caller
   * @throws DmaException when the registration fails
   */
  ExposedRegion expose(MemorySegment segment, RemoteAccess access);

  /**
   * Allocates memory this endpoint can {@linkplain #expose expose}, for a provider that can share
   * only memory it made itself ({@code local}: a sealed memfd the server maps). The endpoint owns
   * it: it is freed when the first region exposing it closes, or when the endpoint closes,
   * whichever comes first; the segment is then no longer accessible. Called by the owner thread.
   *
   * @param lengthBytes the length, positive
   * @return the memory, zeroed and page-aligned, or {@code null} when any native memory can be
   *     exposed (the default): the caller then allocates it
   * @throws DmaException when the memory cannot be made
   */
  default @Nullable MemorySegment allocateExposable(long lengthBytes) {
    return null;
  }

  /**
   * Drives the provider's progress for this endpoint (reads its completion queue) so a passive
   * target's incoming RMA lands. A no-op where the provider progresses by itself.
   */
  void progress();

  /**
   * Blocks the owner thread until a peer's RMA may need this endpoint's {@linkplain #progress()
   * progress}, or for at most {@code timeoutNanos}; the caller progresses the endpoint afterwards
   * either way. Only called when {@link #capabilities()} has {@link Capability#AWAITS_INCOMING}.
   *
   * @param timeoutNanos the longest sleep, positive
   * @return true when woken by incoming work, false when the time passed
   */
  default boolean awaitIncoming(long timeoutNanos) {
    return false;
  }

  /**
   * Whether a peer's RMA is waiting for this endpoint's progress right now, without blocking: the
   * activity signal that keeps a busy target spinning rather than backing off to sleep. Cheap (one
   * system call at most), but not free: a caller samples it, not calls it every pass. Only called
   * when {@link #capabilities()} has {@link Capability#AWAITS_INCOMING}.
   *
   * @return whether there is incoming work to progress
   */
  default boolean incomingPending() {
    return false;
  }

  /**
   * How many of the peers' RMA operations this endpoint has served so far, for an endpoint that
   * cannot {@linkplain Capability#AWAITS_INCOMING await} them: the activity signal that keeps a
   * busy {@code PassiveTarget} spinning, and lets an idle one nap in short sleeps instead of
   * yielding a whole core. Only the change between two reads matters. Cheap (about a progress
   * call), called by the owner thread only.
   *
   * @return the count, or -1 when the provider cannot count them (the default)
   */
  default long incomingServed() {
    return -1;
  }

  /**
   * Ends an {@link #awaitIncoming} in progress, or makes the next one return at once. The one
   * method of an endpoint any thread may call, also concurrently with its owner and after {@link
   * #close()} (then it does nothing).
   */
  default void wakeup() {}

  /**
   * What this endpoint does beyond what every endpoint must: the optional behaviour it declares, a
   * fixed property of the open endpoint. The owner reads it once, when it starts using the endpoint
   * (the fabric worker in its constructor, a {@code PassiveTarget} when it starts), so an endpoint
   * answers the same set for its whole life, resets included. A provider that declares nothing
   * returns an empty set.
   *
   * @return an unmodifiable set, the same on every call
   */
  Set<Capability> capabilities();

  /**
   * Whether the endpoint asks to be {@linkplain #reset() reset} once nothing is in flight: its
   * provider's state would go wrong if it served much longer (shm reuses removed peers' slots with
   * stale peer ids). The worker then posts nothing new, and resets as soon as the operations in
   * flight to its current clients complete, or after the progress deadline with what is left. Read
   * by the owner thread every pass, so a field read.
   *
   * @return whether a reset is wanted; false by default
   */
  default boolean wantsQuietReset() {
    return false;
  }

  /**
   * Whether the endpoint that {@code address} names is gone for good: closed, or its process
   * exited, so that nothing will ever answer there again (a client that restarted left its old
   * address behind). The answer lets the worker tell a dead peer from one that is slow, stopped or
   * refusing a key, which the provider's own answers cannot on every provider: tcp refuses a key by
   * closing the connection, as a dying peer does; a post to a tcp peer whose port is closed is
   * refused with {@code -FI_EAGAIN} as while a connection is being set up; an shm write to a closed
   * peer never completes.
   *
   * <p>Only positive evidence counts: a refused connection to the address, an shm region or process
   * that no longer exists. A peer that answers, or does not answer within a moment (partitioned,
   * far away), or a provider that has no way to look, is not gone: {@code null}. Must return within
   * a few milliseconds; an endpoint may start a check and answer from it at a later call. The owner
   * thread calls it off the per-transfer path, at most once per client per probe interval: for an
   * operation whose posts have been refused for a while, for a completion error that may mean the
   * peer went away, and (see {@link Capability#STRANDS_OPERATIONS_OF_GONE_PEERS}) for an operation
   * in flight for a while.
   *
   * @param address the peer's address, as the advertisement carried it
   * @return what shows the endpoint is gone, in words (for example {@code "nothing accepts
   *     connections at 10.0.0.2:4711 any more"}), or {@code null}; by default {@code null}
   */
  default @Nullable String peerGone(byte[] address) {
    return null;
  }

  /**
   * Closes the transport (endpoint, completion queue, address vector) and opens it again on the
   * same domain: the recovery from operations that will never complete. On return no provider can
   * touch any operand posted before, every posted operation is discarded without a completion, op
   * slots are open and free, every peer handle is invalid (insert peers again), and registrations
   * stay valid. The local address may change: read {@link #localAddress()} again.
   *
   * @throws DmaException when closing the transport failed (the provider may still touch what was
   *     posted: the worker then shuts the service down rather than deliver those operations as
   *     discarded) or reopening fails; the endpoint is then unusable and must be closed
   * @throws UnsupportedOperationException when this endpoint cannot be reset (the default)
   */
  default void reset() {
    throw new UnsupportedOperationException(getClass().getSimpleName() + " cannot be reset");
  }

  /**
   * What this endpoint turned out to be.
   *
   * @return its description
   */
  EndpointInfo describe();

  /**
   * Closes the endpoint and everything it opened, in an order that never closes a parent with
   * children open. Idempotent. Registrations still open are closed too.
   *
   * @throws DmaException after closing everything it could, when the provider refused to close the
   *     transport, so that it may still touch the operands of posted operations (the worker then
   *     says so in their failures)
   */
  @Override
  void close();
}
