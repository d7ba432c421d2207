package dev.dma.provider.efa;

import org.jspecify.annotations.Nullable;

/**
 * What an EFA completion error means for the user: the provider status codes of {@code
 * prov/efa/src/efa_errno.h} (EFA.md section 4) turned into a sentence that says what to do. The
 * message of a failed transfer keeps libfabric's text first, {@code completion error: <fi_strerror>
 * (err=N); provider: <fi_cq_strerror> (prov_errno=M)}, so logs stay greppable, and appends {@code ;
 * <category>: <advice>}. The categories are {@value #FLUSHED}, {@value #NOT_CONNECTED}, {@value
 * #UNREACHABLE}, {@value #UNRESPONSIVE}, {@value #UNRESPONSIVE_RECEIVER}, {@value
 * #BAD_REMOTE_ADDRESS} and a few rarer ones.
 *
 * <p>The provider status decides when it is one EFA reports; otherwise the libfabric error number
 * does (for example {@code FI_ECANCELED} alone is a flush).
 *
 * <p>Stateless and thread-safe; {@link #advice} allocates nothing, {@link #describe} allocates the
 * one message, on the failure path only.
 */
public final class EfaErrors {
  /** Category of an operation flushed by a queue-pair teardown. */
  public static final String FLUSHED = "flushed";

  /** Category of a peer that does not know this endpoint, or whose queue pair is gone. */
  public static final String NOT_CONNECTED = "not connected";

  /** Category of a peer that never answered. */
  public static final String UNREACHABLE = "unreachable peer";

  /** Category of a peer that answered before and stopped. */
  public static final String UNRESPONSIVE = "unresponsive peer";

  /** Category of a peer that does not progress its endpoint (the {@code efa} fabric). */
  public static final String UNRESPONSIVE_RECEIVER = "unresponsive receiver";

  /** Category of a remote key or range that is not a live registration at the peer. */
  public static final String BAD_REMOTE_ADDRESS = "bad remote address";

  // efa_io_comp_status (rdma-core) and the EFA provider's own codes, from efa_errno.h.
  static final int FLUSHED_STATUS = 1;
  static final int LOCAL_QP_INTERNAL_ERROR = 2;
  static final int LOCAL_INVALID_AH = 4;
  static final int LOCAL_INVALID_LKEY = 5;
  static final int LOCAL_BAD_LENGTH = 6;
  static final int REMOTE_BAD_ADDRESS = 7;
  static final int REMOTE_ABORT = 8;
  static final int REMOTE_BAD_DEST_QPN = 9;
  static final int REMOTE_RNR = 10;
  static final int REMOTE_BAD_LENGTH = 11;
  static final int LOCAL_UNRESP_REMOTE = 13;
  static final int REMOTE_UNKNOWN_PEER = 14;
  static final int LOCAL_UNREACH_REMOTE = 15;
  static final int FEATURE_MISMATCH = 18;
  static final int OOM = 4105;
  static final int PEER_HANDSHAKE = 4113;
  static final int ESTABLISHED_RECV_UNRESP = 4124;
  static final int UNESTABLISHED_RECV_UNRESP = 4126;

  private static final String INITIATOR_FIRST =
      NOT_CONNECTED
          + ": the target has not inserted this endpoint's address into its address vector, which"
          + " efa-direct requires before the first RMA (initiator first): the client must call"
          + " PassiveTarget.insertPeer with the server's localAddress() (every device's address for"
          + " a FabricServiceGroup) before it advertises its memory";
  private static final String STALE_QPN =
      NOT_CONNECTED
          + ": the peer has no queue pair with this number any more (its endpoint closed or its"
          + " process exited, so the advertised address is stale); ask the client for its current"
          + " address";
  private static final String NOT_CONNECTED_GENERIC =
      NOT_CONNECTED
          + ": the peer does not accept this endpoint (the target has not inserted the initiator's"
          + " address, or the advertised address is stale); insert the server's address at the"
          + " target before advertising, and re-read the client's current address";
  private static final String FLUSHED_ADVICE =
      FLUSHED
          + ": the operation was cancelled because its queue pair or the peer's address-vector"
          + " entry was torn down while it was in flight (a peer removed or an endpoint closed"
          + " early); retry it if the service is still running";
  private static final String UNREACHABLE_ADVICE =
      UNREACHABLE
          + ": the peer never answered; check that its address is current and that both hosts are"
          + " EFA instances in the same subnet whose security group allows all traffic to and from"
          + " itself, and that the peer host is up";
  private static final String UNRESPONSIVE_ADVICE =
      UNRESPONSIVE
          + ": the peer answered before and then stopped (host down, process killed or path lost);"
          + " the transfer is not retried: fail the client over or remove it";
  private static final String RESET_ADVICE =
      UNRESPONSIVE
          + ": the peer reset the connection (its endpoint closed or its process exited); remove"
          + " the client or wait for its new address";
  private static final String RECEIVER_ESTABLISHED_ADVICE =
      UNRESPONSIVE_RECEIVER
          + ": the peer stopped progressing its endpoint after the handshake (the efa fabric needs"
          + " the target to read its completion queue: keep its PassiveTarget running), or it died";
  private static final String RECEIVER_HANDSHAKE_ADVICE =
      UNRESPONSIVE_RECEIVER
          + ": the peer is reachable but never answered the handshake: its endpoint is not being"
          + " progressed (the efa fabric needs a running PassiveTarget) or its libfabric is"
          + " incompatible (libfabric 2.6 talks only to peers on 2.0 or newer)";
  private static final String BAD_REMOTE_ADVICE =
      BAD_REMOTE_ADDRESS
          + ": the remote key is not a live registration at the peer, or [address, address +"
          + " length) lies outside it, or it does not allow this access; check the advertisement"
          + " (key, virtual address, length) and that the peer has not closed or re-registered"
          + " the region";
  private static final String BAD_AH_ADVICE =
      "bad address handle: the peer's address-vector entry is invalid or was removed while in use;"
          + " add the peer again with its current address";
  private static final String BAD_LKEY_ADVICE =
      "bad local key: the local buffer's registration was closed, or does not cover the buffer,"
          + " while the transfer used it; keep a MemoryRegion open (and do not invalidate the"
          + " memory) until its transfers complete";
  private static final String TOO_LONG_ADVICE =
      "message too long: the transfer exceeds the device's largest RDMA operation (about 1 GiB on"
          + " efa-direct); split it";
  private static final String RNR_ADVICE =
      "receiver not ready: the peer had no receive buffer for a message the protocol needed;"
          + " keep the peer's endpoint progressed, or raise FI_EFA_RX_SIZE there";
  private static final String FEATURE_ADVICE =
      "feature mismatch: the peer's libfabric or device lacks a feature this side uses (RDMA write,"
          + " unsolicited write receive); run the same libfabric version on both sides or set"
          + " FI_EFA_USE_UNSOLICITED_WRITE_RECV=0";
  private static final String OOM_ADVICE =
      "out of memory in the provider: raise the locked-memory limit (ulimit -l unlimited), use huge"
          + " pages, or lower max_in_flight";
  private static final String HANDSHAKE_POST_ADVICE =
      UNRESPONSIVE_RECEIVER
          + ": the handshake to the peer could not be sent; check that the peer is up and its"
          + " address current";
  private static final String QP_ADVICE =
      "local queue pair error: this endpoint's queue pair failed; restart the service";
  private static final String INVALID_ADVICE =
      "invalid request: a bad address handle, local key or remote key ("
          + BAD_REMOTE_ADDRESS
          + " when the advertisement is wrong); check the advertisement and that local memory stays"
          + " registered until its transfers complete";

  private EfaErrors() {}

  /**
   * The advice for a completion error, or null when there is none to give.
   *
   * @param errno libfabric's error number, positive
   * @param providerErrno the provider's status code
   * @return the category and advice, for example {@code "not connected: ..."}, or null
   */
  public static @Nullable String advice(int errno, int providerErrno) {
    switch (providerErrno) {
      case FLUSHED_STATUS:
        return FLUSHED_ADVICE;
      case LOCAL_QP_INTERNAL_ERROR:
        return QP_ADVICE;
      case LOCAL_INVALID_AH:
        return BAD_AH_ADVICE;
      case LOCAL_INVALID_LKEY:
        return BAD_LKEY_ADVICE;
      case LOCAL_BAD_LENGTH:
      case REMOTE_BAD_LENGTH:
        return TOO_LONG_ADVICE;
      case REMOTE_BAD_ADDRESS:
        return BAD_REMOTE_ADVICE;
      case REMOTE_ABORT:
        return RESET_ADVICE;
      case REMOTE_BAD_DEST_QPN:
        return STALE_QPN;
      case REMOTE_RNR:
        return RNR_ADVICE;
      case LOCAL_UNRESP_REMOTE:
        return UNRESPONSIVE_ADVICE;
      case REMOTE_UNKNOWN_PEER:
        return INITIATOR_FIRST;
      case LOCAL_UNREACH_REMOTE:
        return UNREACHABLE_ADVICE;
      case FEATURE_MISMATCH:
        return FEATURE_ADVICE;
      case OOM:
        return OOM_ADVICE;
      case PEER_HANDSHAKE:
        return HANDSHAKE_POST_ADVICE;
      case ESTABLISHED_RECV_UNRESP:
        return RECEIVER_ESTABLISHED_ADVICE;
      case UNESTABLISHED_RECV_UNRESP:
        return RECEIVER_HANDSHAKE_ADVICE;
      default:
        break;
    }
    // Not an EFA status we know (or another provider under the same rules, like the fake): the
    // fabric errno still says which kind of failure it was.
    return switch (errno) {
      case EfaAbi.FI_ECANCELED -> FLUSHED_ADVICE;
      case EfaAbi.FI_ENOTCONN -> NOT_CONNECTED_GENERIC;
      case EfaAbi.FI_EHOSTUNREACH -> UNREACHABLE_ADVICE;
      case EfaAbi.FI_ECONNABORTED -> UNRESPONSIVE_ADVICE;
      case EfaAbi.FI_ECONNRESET -> RESET_ADVICE;
      case EfaAbi.FI_EACCES -> BAD_REMOTE_ADVICE;
      case EfaAbi.FI_EINVAL -> INVALID_ADVICE;
      case EfaAbi.FI_ENOMEM -> OOM_ADVICE;
      case EfaAbi.FI_EMSGSIZE -> TOO_LONG_ADVICE;
      case EfaAbi.FI_ENORX -> RNR_ADVICE;
      default -> null;
    };
  }

  /**
   * The full message of a failed transfer: libfabric's text, then the advice when there is some.
   *
   * @param message the endpoint's message, {@code completion error: ... (err=N); provider: ...
   *     (prov_errno=M)}
   * @param errno libfabric's error number, positive
   * @param providerErrno the provider's status code
   * @return {@code message + "; " + advice}, or {@code message} unchanged
   */
  public static String describe(String message, int errno, int providerErrno) {
    String advice = advice(errno, providerErrno);
    return advice == null ? message : message + "; " + advice;
  }
}
