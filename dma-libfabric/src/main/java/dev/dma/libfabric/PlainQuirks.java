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
 * <p>Only the endpoint's owner thread calls it; nothing here allocates.
 */
final class PlainQuirks implements EndpointQuirks {
  private final DataPath data;
  private final Arena arena;
  private final boolean enoentMeansPeerGone;

  PlainQuirks(DataPath data, Arena arena, boolean enoentMeansPeerGone) {
    this.data = data;
    this.arena = arena;
    this.enoentMeansPeerGone = enoentMeansPeerGone;
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
