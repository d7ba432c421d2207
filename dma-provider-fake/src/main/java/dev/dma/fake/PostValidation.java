package dev.dma.fake;

import org.jspecify.annotations.Nullable;

/**
 * The SPI contract of one post on one {@link FakeEndpoint}: which arguments make {@code postWrite}
 * or {@code postRead} a <em>violation</em>, and the text that says why. Checked in this order: the
 * endpoint is closed; {@code openSlots} was not called; the slot is out of range or still posted;
 * the local operand is bad (negative length, a null address, an overflowing range); the peer handle
 * is not live; and, when the script requires local registration, the descriptor does not cover the
 * local bytes. A change to what the SPI allows a caller changes this file only; the endpoint counts
 * the violation and answers it.
 *
 * <p>Threads: one per endpoint, called only by its post, on the owner's thread, with the fabric's
 * lock held. A valid post builds no text and allocates nothing.
 */
final class PostValidation {
  private final OpSlots slots;
  private final AddressVector peers;
  private final Registrations registrations;
  private final FakeScript script;

  PostValidation(
      OpSlots slots, AddressVector peers, Registrations registrations, FakeScript script) {
    this.slots = slots;
    this.peers = peers;
    this.registrations = registrations;
    this.script = script;
  }

  /**
   * Why this post violates the SPI, or null when it does not.
   *
   * @param closed whether the endpoint is closed
   * @param call {@code postWrite} or {@code postRead}, which starts the text
   * @return the violation's description, for example {@code postWrite: slot 9 is outside [0, 4)}
   */
  @Nullable String problem(
      boolean closed,
      String call,
      int slot,
      long peer,
      long localAddress,
      long lengthBytes,
      long descriptor) {
    if (closed) {
      return call + " on a closed endpoint";
    }
    if (slots.count == 0) {
      return call + " before openSlots";
    }
    if (slot < 0 || slot >= slots.count) {
      return call + ": slot " + slot + " is outside [0, " + slots.count + ")";
    }
    if (slots.state[slot] != OpSlots.FREE) {
      return call
          + ": slot "
          + slot
          + " is still owned by op #"
          + slots.index[slot]
          + ", which was not reaped";
    }
    if (lengthBytes < 0
        || (lengthBytes > 0 && localAddress == 0)
        || localAddress + lengthBytes < localAddress) {
      return call + ": bad local operand [" + localAddress + ", +" + lengthBytes + ")";
    }
    String peerProblem = peers.problem(peer);
    if (peerProblem != null) {
      return call + ": " + peerProblem;
    }
    if (script.requireLocalRegistration) {
      String problem = registrations.descriptorProblem(descriptor, localAddress, lengthBytes);
      if (problem != null) {
        return call + ": " + problem;
      }
    }
    return null;
  }
}
