package dev.dma.libfabric;

import dev.dma.libfabric.internal.Abi;

/**
 * Every decision dma-libfabric takes on a provider's name or the loaded library's version, in one
 * place: provider behaviour that differs from what libfabric's man pages promise, each pinned to
 * the library versions where it was read in the source and seen in a test, and the provider
 * families the rest of the package asks about ({@link #shm}, {@link #overTcp}, {@link #rxm}, {@link
 * #rxd}, {@link #sockets}). No other class of the package compares a provider's name
 * (LibfabricProvider parses the {@code libfabric:} prefix of a configured name, and FabricQuery
 * matches a returned entry's name to the one asked for; neither decides anything about a provider).
 *
 * <p>Each version-gated predicate takes the loaded library's {@code fi_version()} ({@link
 * Libfabric#version()}), never the API version dma asks for: these are properties of the code that
 * runs, not of the API contract requested. The data path never calls here: {@link EndpointQuirks}'
 * implementations ask at construction (the endpoint's open) and keep each answer in a final field.
 * Stateless; any thread.
 */
final class Quirks {
  private Quirks() {}

  /**
   * sockets answers {@code fi_av_remove} of a peer it never connected to with {@code -FI_EINVAL},
   * and removes it anyway: from libfabric 2.5 on ("Enforce AV Removal Behavior" in 2.5.0's NEWS).
   *
   * <p>2.6.0's {@code sock_av_remove} ({@code prov/sockets/src/sock_av.c}) has two halves. The
   * first walks the endpoints bound to the AV and looks the handle up in each one's connection map:
   * no connection (the peer was inserted but nothing was ever posted to it, nor did it connect)
   * sets {@code ret = -FI_EINVAL} and skips that endpoint. The second marks the table entry invalid
   * whatever the first found, and also answers {@code -FI_EINVAL} when the entry was already
   * invalid or out of range. So after a removal of a handle dma knows to be live (its table checks
   * that), {@code -FI_EINVAL} means only "never connected", and {@code fi_av_lookup}, which refuses
   * an invalid entry with {@code -FI_EINVAL}, confirms the entry is gone. 2.1.0's version returns 0
   * in both cases, and 1.17 answers 0 for the never-connected peer too (SocketsRemovalQuirkTest).
   * No upper bound: 2.6 is the newest library checked, and the lookup keeps a later fix (or a real
   * failure) from being taken for a removal.
   *
   * @param provider the provider's name ({@code fabric_attr->prov_name})
   * @param libraryVersion the loaded library's packed {@code fi_version()}
   * @return whether an {@code -FI_EINVAL} from {@code fi_av_remove} may be this quirk
   */
  static boolean socketsRemovalAnswersEinval(String provider, int libraryVersion) {
    return sockets(provider) && libraryVersion >= Abi.FI_VERSION_2_5;
  }

  /**
   * shm reports a write, read or atomic whose remote key, range or access the target refuses as
   * done: from libfabric 2.5 on (the "new shm architecture" of 2.5.0's NEWS).
   *
   * <p>2.6.0's {@code smr_progress_cmd_rma} and {@code smr_progress_cmd_atomic} ({@code
   * prov/shm/src/smr_progress.c}) answer a failed {@code ofi_mr_map_verify} with {@code goto out},
   * which returns the command to the initiator without {@code SMR_OP_ERROR}; the initiator's {@code
   * smr_progress_return} then writes a success completion. Measured on 2.6 (ShmRefusalTest): a
   * delivery-complete write with a wrong key, a range past the region's end or remote address 0
   * completes with success and nothing lands; a read the target would refuse (when it goes through
   * the target at all: without CMA) completes with success and its landing buffer holds stale bytes
   * of an earlier transfer (shm's bounce buffers); a refused fetching atomic completes with success
   * and its result holds the operand it sent. On 1.17 and 2.1 the target drops the refused command
   * without an answer, so the operation never completes (the completion deadline ends it). No upper
   * bound: 2.6 is the newest library checked.
   *
   * @param provider the provider's name ({@code fabric_attr->prov_name})
   * @param libraryVersion the loaded library's packed {@code fi_version()}
   * @return whether a refused operation is reported done
   */
  static boolean shmReportsRefusedRmaAsDone(String provider, int libraryVersion) {
    return shm(provider) && libraryVersion >= Abi.FI_VERSION_2_5;
  }

  /**
   * shm completes operations in post order across peers, so one that never completes stalls every
   * later completion until the endpoint is closed: up to libfabric 2.4.
   *
   * <p>1.x and 2.1.0's {@code smr_progress_resp} ({@code prov/shm/src/smr_progress.c}) walks the
   * initiator's own response queue from its head and stops at the first entry still {@code
   * SMR_STATUS_BUSY}; an entry is queued for every command that needs an answer (anything past the
   * inline size, so dma's writes and reads) in post order, whatever its peer. A target that closed
   * or died with the command unread (or, on these versions, dropped it for a bad key) never writes
   * the status, so that entry blocks every later completion, every peer's, for ever. The commands
   * themselves sit in each target's one command queue and are consumed in order, so an operation
   * posted again after a reset lands after its earlier post. 2.5's new architecture returns each
   * command through a return queue the target pushes when done, with no head-of-line wait. Measured
   * on 1.17 with {@code dma-bench scale --churn}: a client closing its endpoint with a write in
   * flight stopped every completion until the endpoint was reset.
   *
   * @param provider the provider's name ({@code fabric_attr->prov_name})
   * @param libraryVersion the loaded library's packed {@code fi_version()}
   * @return whether one stuck operation stalls every completion
   */
  static boolean shmCompletesInPostOrder(String provider, int libraryVersion) {
    return shm(provider) && libraryVersion < Abi.FI_VERSION_2_5;
  }

  /**
   * shm hands a removed peer's map slot to a later insert while this endpoint still holds the peer
   * id the removed peer gave it (its record of how the peer knows us): {@code fi_av_remove}'s
   * {@code smr_unmap_from_endpoint} clears the peer's record of us, not ours of the peer ({@code
   * smr_peer_data(region)[id]}; read in 2.1.0's {@code smr_util.c} and 2.6.0's {@code smr_av.c}).
   * The new peer in that slot then looks connected ({@code smr_verify_peer} sees the stale id): its
   * commands carry the old peer's id, and on 2.6 its region is never mapped. Seen: on 2.6 a SIGSEGV
   * in {@code smr_generic_rma} once 256 peers were added since the address vector opened ({@code
   * dma-bench scale --churn}); on 2.1 a SIGSEGV at about the same point ({@code ShmPeerSlotsTest});
   * on 1.17 the target of the second peer to join after one left died at its first transfer (a 1.x
   * source read elsewhere takes the freed slot at once; 1.17's own source is not at hand).
   *
   * <p>dma never removes an shm peer ({@link AddressVector#remove} retires its handle) and, past
   * {@link AddressVector#RECYCLE_GUARD} adds with a peer retired, the endpoint asks for a reset,
   * which the worker makes once its current clients' transfers completed: a fresh address vector
   * and region, every slot free and every id unset.
   *
   * @param provider the provider's name ({@code fabric_attr->prov_name})
   * @param libraryVersion the loaded library's packed {@code fi_version()}
   * @return whether shm may reuse a removed peer's slot with a stale peer id
   */
  static boolean shmReusesSlotsWithStalePeerIds(String provider, int libraryVersion) {
    return shm(provider);
  }

  /**
   * shm maps a peer endpoint of the same process without checking for CMA, so every write and read
   * between two endpoints of one process goes through its bounce buffers: from libfabric 2.0 on
   * (read in 2.1.0 and 2.6.0; 1.17 uses CMA in one process, seen with strace).
   *
   * <p>shm copies a write or read above its inject size in one of two ways: CMA ({@code
   * process_vm_readv/writev}, one command per transfer, the target copies it in one call), or SAR
   * (the data goes through the target region's bounce buffers one segment at a time, each segment
   * waiting for the other side's progress). {@code smr_select_proto} takes CMA only when the
   * initiator's region says CMA was checked and works ({@code smr_vma_enabled}: {@code
   * peer_vma_caps} in 2.6, {@code cma_cap_peer} in 2.1), and that check runs only in {@code
   * smr_map_to_endpoint}. 2.6.0's {@code smr_map_to_region} ({@code prov/shm/src/smr_av.c}; 2.1.0's
   * is in {@code smr_util.c}) returns early for a name on the process's own endpoint list, pointing
   * at that endpoint's region, and never calls {@code smr_map_to_endpoint}; {@code fi_enable} calls
   * it only for peers already mapped. So an endpoint whose peers are all in its own process never
   * checks, and every transfer above the inject size takes SAR. With two threads (dma's worker and
   * a passive target) each segment is a hand-off between them, which collapses under CPU contention
   * (64 KiB writes: tens of MB/s on 2.x against hundreds on 1.17 with two busy loops).
   *
   * <p>dma's answer ({@link AddressVector}): such a peer is inserted under an alias of its name
   * ({@link ShmNames#aliasOf}) that shm does not find on its list but {@code shm_open} resolves to
   * the same file, so shm maps it as it maps another process's endpoint and runs its CMA check. No
   * upper bound: 2.6 is the newest library checked, and the alias is harmless if a later version
   * checks local peers itself.
   *
   * @param provider the provider's name ({@code fabric_attr->prov_name})
   * @param libraryVersion the loaded library's packed {@code fi_version()}
   * @return whether a peer endpoint of this process must be inserted under an alias of its name
   */
  static boolean shmSkipsCmaCheckForLocalPeers(String provider, int libraryVersion) {
    return shm(provider) && libraryVersion >= Abi.FI_VERSION_2_0;
  }

  /**
   * shm does not say which read it could not copy: up to libfabric 2.4. shm copies a read itself
   * inside the post (CMA, {@code smr_rma_fast}); when the target has not mapped the range, 2.0 to
   * 2.4 answer {@code -FI_EAGAIN} and write nothing, and 1.x accepts the post and writes an error
   * entry naming no operation ({@link #shmAcceptsReadsItCannotCopy}). From 2.5 the post answers
   * {@code -FI_EAGAIN} and writes that entry inside the post, where the endpoint reads it. So up to
   * 2.4 dma asks the kernel which read it was ({@link ShmFailedReads}); ShmRefusalTest pins all
   * three.
   *
   * @param provider the provider's name ({@code fabric_attr->prov_name})
   * @param libraryVersion the loaded library's packed {@code fi_version()}
   * @return whether a failed read copy must be matched to its read by dma
   */
  static boolean shmLeavesFailedReadCopiesUnnamed(String provider, int libraryVersion) {
    return shm(provider) && libraryVersion < Abi.FI_VERSION_2_5;
  }

  /**
   * shm accepts a read whose copy fails and reports the failure afterwards, with an error entry
   * naming no operation: libfabric 1.x (from 2.0 the post answers {@code -FI_EAGAIN}). Only then
   * does dma record every posted read ({@link ShmFailedReads#reportsAfterThePost}), so that the
   * entry can be matched to the oldest read in flight whose range the target has not mapped.
   *
   * @param provider the provider's name ({@code fabric_attr->prov_name})
   * @param libraryVersion the loaded library's packed {@code fi_version()}
   * @return whether a read shm cannot copy is accepted and failed later, unnamed
   */
  static boolean shmAcceptsReadsItCannotCopy(String provider, int libraryVersion) {
    return shm(provider) && libraryVersion < Abi.FI_VERSION_2_0;
  }

  /**
   * Whether an endpoint on {@code provider} takes shm's data-path workarounds ({@link ShmQuirks}):
   * bounce buffers for writes above 4 KiB ({@link ShmBounce}), the first-page refusal, failed-read
   * matching and the locks around posts to peer endpoints of this process. Every version: each
   * workaround's own gate (for example {@link #shmReportsRefusedRmaAsDone}) narrows it further.
   *
   * @param provider the provider's name ({@code fabric_attr->prov_name})
   * @return whether the provider is shm
   */
  static boolean needsShmWorkarounds(String provider) {
    return shm(provider);
  }

  /**
   * sockets answers a post with {@code -FI_ENOENT} when its connection attempt finds nothing
   * listening at the peer's address ({@code sock_ep_get_conn}): the peer is gone, as tcp says by
   * never connecting. Every version checked (1.17 to 2.6).
   *
   * @param provider the provider's name ({@code fabric_attr->prov_name})
   * @return whether a post's {@code -FI_ENOENT} means the peer is unreachable
   */
  static boolean socketsEnoentMeansPeerGone(String provider) {
    return sockets(provider);
  }

  /**
   * Whether an operation posted to a peer whose endpoint then went away may stay posted for ever,
   * neither completing nor failing: shm, every version (its command waits in the gone peer's
   * queue). Declared as {@link
   * dev.dma.spi.FabricEndpoint.Capability#STRANDS_OPERATIONS_OF_GONE_PEERS}.
   *
   * @param provider the provider's name ({@code fabric_attr->prov_name})
   * @return whether a gone peer's operations may be stranded
   */
  static boolean strandsOperationsOfGonePeers(String provider) {
    return shm(provider);
  }

  // ---------------------------------------------------------------------------------------------
  // Families: the only comparisons of provider names in the package.

  /**
   * Whether {@code provider} is shm.
   *
   * @param provider the provider's name ({@code fabric_attr->prov_name})
   * @return whether it is {@code shm}
   */
  static boolean shm(String provider) {
    return "shm".equals(provider);
  }

  /**
   * Whether {@code provider} is sockets.
   *
   * @param provider the provider's name
   * @return whether it is {@code sockets}
   */
  static boolean sockets(String provider) {
    return "sockets".equals(provider);
  }

  /**
   * Whether {@code provider} is xnet (named {@code net} on 1.x, {@code tcp} from 1.18) or a utility
   * provider layered over it or over tcpx ({@code tcp;ofi_rxm}, {@code net;ofi_rxm}).
   *
   * @param provider the provider's name
   * @return whether its transport is a tcp socket of xnet or tcpx
   */
  static boolean overTcp(String provider) {
    return provider.equals("net")
        || provider.equals("tcp")
        || provider.startsWith("tcp;")
        || provider.startsWith("net;");
  }

  /**
   * Whether {@code provider} is layered under rxm ({@code tcp;ofi_rxm}, {@code verbs;ofi_rxm}).
   *
   * @param provider the provider's name
   * @return whether rxm runs on top
   */
  static boolean rxm(String provider) {
    return provider.contains("ofi_rxm");
  }

  /**
   * Whether {@code provider} is layered under rxd ({@code udp;ofi_rxd}).
   *
   * @param provider the provider's name
   * @return whether rxd runs on top
   */
  static boolean rxd(String provider) {
    return provider.endsWith("ofi_rxd");
  }

  // ---------------------------------------------------------------------------------------------
  // Decisions the rest of the package takes, by name.

  /**
   * shm names an endpoint after a source node instead of the pid ({@code fi_shm://127.0.0.1:0:0}),
   * so two processes binding the same address collide with {@code EBUSY}; its names are local to
   * this host's {@code /dev/shm} anyway. So an shm endpoint's query passes no source node, and gets
   * {@code fi_shm://<pid>:<uid>:<index>}.
   *
   * @param provider the provider's name
   * @return whether to leave the source node out
   */
  static boolean takesNoSourceNode(String provider) {
    return shm(provider);
  }

  /**
   * Whether a completion queue's wait fd on this provider becomes readable when a peer's RMA needs
   * the endpoint's progress: tcp (named net on 1.x) adds its sockets' epoll fd to the queue's wait
   * set ({@code prov/tcp/src/xnet_cq.c}, {@code xnet_cq_open}). Other providers' wait objects
   * signal completions only, and a target gets none for the RMA it serves.
   *
   * @param provider the provider's name
   * @return whether a passive target's queue gets a wait fd
   */
  static boolean wakesOnIncoming(String provider) {
    return provider.equals("tcp") || provider.equals("net");
  }

  /**
   * Whether a counter bound to a passive target's endpoint for {@code FI_REMOTE_WRITE |
   * FI_REMOTE_READ} counts the peers' RMA it serves: shm counts them as its progress handles each
   * command ({@code prov/shm/src/smr_comp.c}, {@code smr_complete_rx}; seen on 1.17, 2.1 and 2.6).
   * shm only: a counter a provider accepts but never moves (efa's RDMA writes need no progress at
   * the target) would make a busy target nap between transfers.
   *
   * @param provider the provider's name
   * @return whether a target without a wait fd binds the counter
   */
  static boolean countsServedRma(String provider) {
    return shm(provider);
  }

  /**
   * Whether an shm address names a peer whose region dma checks at insert: a peer that is gone is
   * refused on every version, so a stale advertisement fails the same way everywhere; up to 2.4 shm
   * answers the insert of a peer whose region is gone with success and hands the next insert the
   * same {@code fi_addr} ({@link AddressVector#insert} says how).
   *
   * @param provider the provider's name
   * @return whether inserts check that the peer's region still exists
   */
  static boolean shmInsertsGonePeers(String provider) {
    return shm(provider);
  }

  /**
   * xnet (net on 1.x, tcp from 1.18) and rxm over it or over tcpx cancel every queued operation
   * with {@code FI_ECANCELED} when the connection closes, which the target does when it refuses a
   * key, range or access, and store a stale {@code errno} as the provider errno ({@link
   * CompletionErrors}).
   *
   * @param provider the provider's name
   * @return whether {@code FI_ECANCELED} means the connection closed
   */
  static boolean cancelsOnConnectionLoss(String provider) {
    return overTcp(provider);
  }

  /**
   * Whether a refused connection attempt to a peer's address shows the peer is gone ({@link
   * PeerLiveness}): every endpoint of net, tcp, their rxm variants and sockets listens at the
   * address it advertises.
   *
   * @param provider the provider's name
   * @return whether liveness is probed by connecting
   */
  static boolean listensAtItsAddress(String provider) {
    return overTcp(provider) || sockets(provider);
  }
}
