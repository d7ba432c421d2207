package dev.dma.libfabric;

import dev.dma.api.DmaException;
import dev.dma.libfabric.internal.Abi;
import java.lang.foreign.Arena;
import org.jspecify.annotations.Nullable;

/**
 * The data path of every provider but shm: posts go straight to libfabric, every completion is due
 * as it comes, and nothing is held per slot. The one provider difference left here is a text:
 * sockets answers a post with {@code -FI_ENOENT} when nothing accepts at the peer's address ({@code
 * sock_ep_get_conn}; the endpoint refuses unknown handles before libfabric sees them), which means
 * the peer is gone.
 *
 * <p>Each decision on the provider's name or the library's version is asked of {@link Quirks} here,
 * in the constructor, and kept in a final field: the data path reads a boolean, never a name.
 *
 * <p>Chosen at open ({@link EndpointQuirks#choose}) for every provider but shm; owned by the
 * endpoint. Only the endpoint's owner thread calls it; nothing here allocates.
 */
final class PlainQuirks implements EndpointQuirks {
  private final DataPath data;
  private final Arena arena;

  /** {@link Quirks#socketsEnoentMeansPeerGone}. */
  private final boolean enoentMeansPeerGone;

  /**
   * The quirks of {@code endpoint}, which opened on {@code provider}.
   *
   * @param endpoint the endpoint, whose data path and arena these use
   * @param provider the provider's name ({@code fabric_attr->prov_name})
   * @param libraryVersion the loaded library's packed {@code fi_version()}, for the decisions that
   *     are version-gated (none yet on this path)
   */
  PlainQuirks(LibfabricEndpoint endpoint, String provider, int libraryVersion) {
    this.data = endpoint.data;
    this.arena = endpoint.arena;
    this.enoentMeansPeerGone = Quirks.socketsEnoentMeansPeerGone(provider);
  }

  @Override
  public void openSlots(int count) {
    data.openSlab(count, 1, arena);
  }

  @Override
  public int postWrite(
      int slot,
      long peer,
      long localAddress,
      long lengthBytes,
      long descriptor,
      long remoteAddress,
      long remoteKey) {
    return data.writemsg(
        slot, peer, localAddress, lengthBytes, descriptor, remoteAddress, remoteKey);
  }

  @Override
  public int postRead(
      int slot,
      long peer,
      long localAddress,
      long lengthBytes,
      long descriptor,
      long remoteAddress,
      long remoteKey) {
    return data.read(slot, peer, localAddress, lengthBytes, descriptor, remoteAddress, remoteKey);
  }

  @Override
  public void catchUp() {}

  @Override
  public int succeeded(int index, CompletionDecoder outcome) {
    return index;
  }

  @Override
  public int errored(int index, CompletionDecoder outcome) {
    return index;
  }

  @Override
  public void settle(int slot, boolean succeeded) {}

  @Override
  public int ownerOfOrphanError() {
    return -1;
  }

  @Override
  public String orphanErrorText(int owner, String entryMessage) {
    return entryMessage;
  }

  @Override
  public boolean warnsOfOrphanErrors() {
    return true;
  }

  @Override
  public @Nullable String postErrorCause(int code) {
    if (Math.abs(code) == Abi.FI_ENOENT && enoentMeansPeerGone) {
      return ": sockets could not connect to the peer (nothing accepts at its address: the peer"
          + " never started, exited, or closed its endpoint)";
    }
    return null;
  }

  @Override
  public DmaException.@Nullable Reason postFailureReason(int code) {
    return Math.abs(code) == Abi.FI_ENOENT && enoentMeansPeerGone
        ? DmaException.Reason.PEER_UNREACHABLE
        : null;
  }

  @Override
  public void reset() {}

  @Override
  public void close() {}
}
