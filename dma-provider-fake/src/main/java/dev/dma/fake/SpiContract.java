package dev.dma.fake;

import org.jspecify.annotations.Nullable;

/**
 * The SPI contract of one {@link FakeEndpoint}: which calls <em>violate</em> it, the text that says
 * why, and what a violation does: it is counted with its text ({@link FakeCounters#violations()},
 * {@link FakeCounters#lastViolation()}), thrown as {@code IllegalStateException("fake fabric
 * violation: ...")} when {@linkplain FakeScript#throwOnViolation scripted}, and otherwise answered
 * {@code -FI_EINVAL} (-22). A post is checked in this order: the endpoint is closed; {@code
 * openSlots} was not called; the slot is out of range or still posted; the local operand is bad
 * (negative length, a null address, an overflowing range); the peer handle is not live; and, when
 * the script requires local registration, the descriptor does not cover the local bytes. A change
 * to what the SPI allows a caller changes this file only.
 *
 * <p>Threads: one per endpoint, called only by it with the fabric's lock held, on whichever thread
 * made the call (the owner for most; any thread for {@code deregister}). A valid call builds no
 * text and allocates nothing.
 */
final class SpiContract {
  private static final int VIOLATION = -FiErrno.EINVAL;

  private final Counts counts;
  private final OpSlots slots;
  private final AddressVector peers;
  private final Registrations registrations;
  private final FakeScript script;

  SpiContract(
      Counts counts,
      OpSlots slots,
      AddressVector peers,
      Registrations registrations,
      FakeScript script) {
    this.counts = counts;
    this.slots = slots;
    this.peers = peers;
    this.registrations = registrations;
    this.script = script;
  }

  /**
   * Records a violation found before any state changed, and throws if the script says so. Found
   * later (while bytes move or a completion is reaped), a violation is only counted: throwing there
   * would strand the op.
   *
   * @return {@code -FI_EINVAL}, the answer of a call that returns a code
   */
  int violation(String description) {
    counts.violation(description);
    if (script.throwOnViolation) {
      throw new IllegalStateException("fake fabric violation: " + description);
    }
    return VIOLATION;
  }

  /** A {@link #violation} of a post, which also counts as a post error. */
  int postViolation(String description) {
    counts.increment(Counts.POST_ERRORS);
    return violation(description);
  }

  /**
   * Why this post violates the SPI, or null when it does not.
   *
   * @param closed whether the endpoint is closed
   * @param call {@code postWrite} or {@code postRead}, which starts the text
   * @return the violation's description, for example {@code postWrite: slot 9 is outside [0, 4)}
   */
  @Nullable String postProblem(
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

  /** Why {@code openSlots(count)} violates the SPI, or null. */
  @Nullable String openSlotsProblem(boolean closed, int count) {
    if (closed) {
      return "openSlots(" + count + ") on a closed endpoint";
    }
    if (count < 1) {
      return "openSlots(" + count + "): at least 1 slot is needed";
    }
    if (slots.count != 0) {
      return "openSlots(" + count + ") called again; slots were opened with " + slots.count;
    }
    return null;
  }

  /** Why {@code descriptor(registration)} violates the SPI, or null. */
  @Nullable String descriptorProblem(boolean closed, long registration) {
    if (closed) {
      return "descriptor(0x" + Long.toHexString(registration) + ") after the endpoint closed";
    }
    return registrations.handleProblem(registration, "descriptor");
  }

  /** Why {@code deregister(registration)} violates the SPI, or null; see {@link #inUse} too. */
  @Nullable String deregisterProblem(boolean closed, long registration) {
    if (closed) {
      // Closing the endpoint closed its registrations; libfabric would now free an MR twice.
      return "deregister(0x"
          + Long.toHexString(registration)
          + ") after the endpoint closed, which had closed the registration already";
    }
    return registrations.handleProblem(registration, "deregister");
  }

  /**
   * The violation of deregistering a live registration that the op in slot {@code user} uses: the
   * provider may still be reading it.
   */
  String inUse(Registration live, int user) {
    return "registration "
        + live.id
        + " was deregistered while op #"
        + slots.index[user]
        + " in slot "
        + user
        + " that uses it was not yet reaped";
  }

  /** Why {@code removePeer(handle)} violates the SPI, or null. */
  @Nullable String removePeerProblem(boolean closed, long handle) {
    if (closed) {
      return "removePeer(" + handle + ") on a closed endpoint";
    }
    String problem = peers.problem(handle);
    return problem == null ? null : "removePeer(" + handle + "): " + problem;
  }
}
