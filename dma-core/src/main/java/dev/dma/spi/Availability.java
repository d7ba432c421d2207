package dev.dma.spi;

/**
 * Whether a provider can open endpoints on this host, and if not, why: a sentence a user can act on
 * (for example "libfabric is not installed: apt-get install libfabric1"). Immutable.
 *
 * @param available whether {@link FabricProvider#open} can be expected to work
 * @param reason why not, or the empty string when available
 */
public record Availability(boolean available, String reason) {

  /** The available value. */
  public static final Availability AVAILABLE = new Availability(true, "");

  /**
   * Checks that an unavailable value says why.
   *
   * @throws IllegalArgumentException when unavailable without a reason
   */
  public Availability {
    if (reason == null) {
      throw new NullPointerException("reason");
    }
    if (!available && reason.isBlank()) {
      throw new IllegalArgumentException("an unavailable provider must say why");
    }
  }

  /**
   * An unavailable value.
   *
   * @param reason why, in a sentence a user can act on
   * @return the value
   */
  public static Availability unavailable(String reason) {
    return new Availability(false, reason);
  }
}
