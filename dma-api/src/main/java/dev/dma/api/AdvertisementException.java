package dev.dma.api;

import java.io.Serial;

/**
 * A malformed or impossible advertisement. {@link Reason#message()} of the {@link #reason()} is the
 * exact text the original protocol uses (send that back to a peer); {@link #getMessage()} starts
 * with it and, when the check knew more, goes on after {@code ": "} to name the field and what is
 * wrong with it.
 *
 * <p>Thrown on the thread that builds or parses the advertisement; it holds no resources.
 */
public final class AdvertisementException extends IllegalArgumentException {
  @Serial private static final long serialVersionUID = 1L;

  /** What was wrong with the fields. */
  public enum Reason {
    /** Not three or four fields. */
    ARITY("expected: address rkey remote-address"),
    /** The address is not an even number of hex digits. */
    HEX("invalid hex in address"),
    /** The key or remote address is not an unsigned 64-bit decimal number. */
    INTEGER("invalid integer in advertisement"),
    /** The address is empty: no fabric has a zero-length address. */
    ADDRESS("empty address in advertisement"),
    /**
     * The optional length field is not a positive decimal number below 2^63, or the region it
     * describes runs past the top of the address space.
     */
    LENGTH("invalid length in advertisement");

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
   * An exception for a reason, with a detail naming the field.
   *
   * @param reason what was wrong
   * @param detail which field and why, appended to the protocol's text after {@code ": "}
   */
  public AdvertisementException(Reason reason, String detail) {
    super(reason.message() + ": " + detail);
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
