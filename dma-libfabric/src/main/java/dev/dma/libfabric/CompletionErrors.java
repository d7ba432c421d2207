package dev.dma.libfabric;

import dev.dma.api.DmaException;
import dev.dma.libfabric.internal.Abi;
import dev.dma.libfabric.internal.Native;
import dev.dma.spi.CompletionMessages;

/**
 * What a libfabric completion error entry says, in the format of {@link CompletionMessages}: the
 * choice of which half of the entry to trust, per provider. Stateless; {@link LibfabricEndpoint}'s
 * owner thread calls it for each error entry it reads (an error path, so it may allocate).
 */
final class CompletionErrors {
  private CompletionErrors() {}

  /**
   * The text of a completion error: {@code completion error: <fi_strerror(err)> (err=N); provider:
   * <fi_cq_strerror> (prov_errno=M)}, except where the provider half would mislead:
   *
   * <ul>
   *   <li>{@code prov_errno} 0, or an empty provider text: the provider half is left out.
   *   <li>{@code FI_ECANCELED} on net, tcp and their rxm variants: xnet cancels every queued
   *       operation when the connection closes and stores whatever {@code errno} happened to hold
   *       ({@code ofi_sockerr()} in {@code xnet_report_error}), so its text ("No such file or
   *       directory", "Operation now in progress") is stale. The cause is named instead: the
   *       connection closed, which the target does on an invalid key, range or access.
   *   <li>A provider text equal to {@code fi_strerror(err)} (sockets: "Permission denied" twice):
   *       for {@code FI_EACCES} the cause is named (the target refused the key, range or access),
   *       otherwise the repetition is dropped.
   * </ul>
   *
   * @param provider the provider name, for example {@code net}
   * @param err the positive {@code err}
   * @param providerErrno {@code prov_errno}
   * @param providerText {@code fi_cq_strerror(prov_errno)}, or empty
   * @return the message
   */
  static String message(String provider, int err, int providerErrno, String providerText) {
    String errorText = Native.strerror(err);
    if (err == Abi.FI_ECANCELED && Quirks.cancelsOnConnectionLoss(provider)) {
      return CompletionMessages.ofStaleProviderErrno(
          err,
          errorText,
          providerErrno,
          "the connection to the peer closed with this operation outstanding, which the target"
              + " does when it refuses a remote key, address range or access, and which a peer"
              + " that closed or died causes too");
    }
    if (providerErrno == 0 || providerText == null || providerText.isBlank()) {
      return CompletionMessages.of(err, errorText);
    }
    if (providerText.equals(errorText)) {
      return err == Abi.FI_EACCES
          ? CompletionMessages.of(
              err,
              errorText,
              providerErrno,
              "the target refused the remote key, address range or access")
          : CompletionMessages.ofProviderErrno(err, errorText, providerErrno);
    }
    return CompletionMessages.of(err, errorText, providerErrno, providerText);
  }

  /**
   * What a completion error means for the caller on {@code provider}, where its error number alone
   * would mislead:
   *
   * <ul>
   *   <li>{@code FI_ECANCELED} on net, tcp and their rxm variants is {@link
   *       DmaException.Reason#ACCESS_DENIED}: the target closed the connection, which it does when
   *       it refuses a key, range or access (the same mistake gives {@code EACCES} on sockets and
   *       the fake). A peer that closed or died with the operation outstanding looks the same on
   *       these providers; the fabric worker tells them apart by asking {@link
   *       LibfabricEndpoint#peerGone} (a connection attempt to the address), and reports a gone
   *       peer as {@link DmaException.Reason#PEER_UNREACHABLE}.
   *   <li>Everything else: {@link DmaException.Reason#ofErrno}.
   * </ul>
   *
   * @param provider the provider name, for example {@code net}
   * @param err the positive {@code err}
   * @return the reason
   */
  static DmaException.Reason reason(String provider, int err) {
    if (err == Abi.FI_ECANCELED && Quirks.cancelsOnConnectionLoss(provider)) {
      return DmaException.Reason.ACCESS_DENIED;
    }
    return DmaException.Reason.ofErrno(err);
  }
}
