package dev.dma.api;

import java.io.Serial;

/**
 * A malformed advertisement on the wire. {@link #getMessage()} is the exact text the original
 * protocol uses for the {@link #reason()}.
 */
public final class AdvertisementException extends IllegalArgumentException {
  @Serial private static final long serialVersionUID = 1L;

  /** What was wrong with the fields. */
  public enum Reason {
    /** Not exactly three fields. */
    ARITY("expected: address rkey remote-address"),
    /** The address is not an even number of hex digits. */
    HEX("invalid hex in address"),
    /** The key or remote address is not an unsigned 64-bit decimal number. */
    INTEGER("invalid integer in advertisement");

    private final String message;

    Reason(String message) {
      this.message = message;
    }

    /**
     * The wire protocol's text for this reason.
     *
     * @return the message
     */
    public String message() {
      return message;
    }
  }

  /** What was wrong. */
  private final Reason reason;

  /**
   * An exception for a reason.
   *
   * @param reason what was wrong
   */
  public AdvertisementException(Reason reason) {
    super(reason.message());
    this.reason = reason;
  }

  /**
   * What was wrong.
   *
   * @return the reason
   */
  public Reason reason() {
    return reason;
  }
}
