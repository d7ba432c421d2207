package dev.dma.spi;

/**
 * The one format of the {@code message} a provider passes to {@link CompletionSink#failed(int, int,
 * int, String)}: {@code completion error: <fi_strerror(err)> (err=N); provider: <fi_cq_strerror>
 * (prov_errno=M)}. Logs and tests match on this text, so every provider builds it here rather than
 * concatenating its own; which variant fits an error entry (whether the provider's half says
 * anything) is the provider's decision.
 *
 * <p>The texts themselves ({@code fi_strerror}, {@code fi_cq_strerror}) come from the provider;
 * this class only arranges them. Stateless and thread-safe; providers call it on the thread that
 * reaps.
 */
public final class CompletionMessages {
  private CompletionMessages() {}

  /**
   * The message without a provider half, for an entry whose provider said nothing: {@code
   * completion error: <errorText> (err=N)}.
   *
   * @param err libfabric's error number, positive
   * @param errorText {@code fi_strerror(err)}
   * @return the message
   */
  public static String of(int err, String errorText) {
    return "completion error: " + errorText + " (err=" + err + ")";
  }

  /**
   * The full message: {@code completion error: <errorText> (err=N); provider: <providerText>
   * (prov_errno=M)}.
   *
   * @param err libfabric's error number, positive
   * @param errorText {@code fi_strerror(err)}
   * @param providerErrno the provider's error number, printed as is
   * @param providerText {@code fi_cq_strerror(prov_errno)}, or what the provider names instead
   * @return the message
   */
  public static String of(int err, String errorText, int providerErrno, String providerText) {
    return of(err, errorText)
        + "; provider: "
        + providerText
        + " (prov_errno="
        + providerErrno
        + ")";
  }

  /**
   * The message when the provider's text only repeats {@code errorText}: the repetition is left out
   * and only its number kept, {@code completion error: <errorText> (err=N) (prov_errno=M)}.
   *
   * @param err libfabric's error number, positive
   * @param errorText {@code fi_strerror(err)}
   * @param providerErrno the provider's error number, printed as is
   * @return the message
   */
  public static String ofProviderErrno(int err, String errorText, int providerErrno) {
    return of(err, errorText) + " (prov_errno=" + providerErrno + ")";
  }

  /**
   * The message when the provider's errno is known to be stale for this error: its text is left
   * out, the cause is named instead and the number is marked as not the cause, {@code completion
   * error: <errorText> (err=N); provider: <cause> (prov_errno=M, a stale errno, not the cause)}.
   *
   * @param err libfabric's error number, positive
   * @param errorText {@code fi_strerror(err)}
   * @param providerErrno the provider's (stale) error number, printed as is
   * @param cause what actually happened, in the provider's words
   * @return the message
   */
  public static String ofStaleProviderErrno(
      int err, String errorText, int providerErrno, String cause) {
    return of(err, errorText)
        + "; provider: "
        + cause
        + " (prov_errno="
        + providerErrno
        + ", a stale errno, not the cause)";
  }
}
