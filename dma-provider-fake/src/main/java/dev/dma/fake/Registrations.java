package dev.dma.fake;

import dev.dma.api.DmaException;
import java.util.Objects;
import org.jspecify.annotations.Nullable;

/**
 * One {@link FakeEndpoint}'s side of local registration: registering under the script's failures
 * and the fabric's pinnable bytes, the handles and descriptors it hands out, and why a value passed
 * back is not a live one of this endpoint. The live registrations themselves are the fabric's
 * ({@link FakeFabric#registration(long)}), since ids are unique on it.
 *
 * <p>Handles and descriptors carry different tags in their top 16 bits, so one passed for the other
 * is recognised; the low 48 bits are the registration's id. Both are non-zero.
 *
 * <p>Threads: guarded by the fabric's lock; only the owning endpoint calls it, with the lock held
 * (its owner registering, asking for descriptors or posting; any thread deregistering; closing). It
 * reports problems as text and leaves counting and throwing a violation to the endpoint.
 */
final class Registrations {
  private static final long ID_MASK = (1L << 48) - 1;
  private static final long TAG_MASK = ~ID_MASK;
  private static final long HANDLE_TAG = 0x7265L << 48; // "re"
  private static final long DESCRIPTOR_TAG = 0x6465L << 48; // "de"

  private final FakeEndpoint owner;
  private final FakeFabric fabric;
  private final FakeScript script;
  private final Counts counts;

  Registrations(FakeEndpoint owner, FakeFabric fabric, FakeScript script, Counts counts) {
    this.owner = owner;
    this.fabric = fabric;
    this.script = script;
    this.counts = counts;
  }

  /** The registration id in a handle or descriptor. */
  static long id(long handleOrDescriptor) {
    return handleOrDescriptor & ID_MASK;
  }

  /**
   * Registers {@code [localAddress, +lengthBytes)}, or throws as {@code fi_mr_reg} fails; the
   * endpoint has checked that it is open.
   *
   * @return the registration's handle
   * @throws DmaException as {@link FakeEndpoint#register} documents
   */
  long register(long localAddress, long lengthBytes) {
    if (localAddress == 0 || lengthBytes <= 0 || localAddress + lengthBytes < localAddress) {
      return fail(FiErrno.EINVAL);
    }
    if (script.registrationFailures > 0) {
      script.registrationFailures--;
      return fail(script.registrationErrno);
    }
    Registration registration = fabric.addRegistration(owner, localAddress, lengthBytes);
    if (registration == null) {
      return fail(FiErrno.ENOMEM);
    }
    counts.increment(Counts.REGISTRATIONS);
    counts.increment(Counts.LIVE_REGISTRATIONS);
    return HANDLE_TAG | registration.id;
  }

  private long fail(int errno) {
    counts.increment(Counts.REGISTRATION_FAILURES);
    throw new DmaException(
        DmaException.Kind.FABRIC,
        FiErrno.callMessage("fi_mr_reg", errno),
        errno,
        DmaException.UNKNOWN_ERRNO,
        null);
  }

  /**
   * Why {@code handle}, passed to {@code call}, is not a live registration handle of this endpoint,
   * or null; then {@link #live} returns its registration.
   */
  @Nullable String handleProblem(long handle, String call) {
    String what = call + "(0x" + Long.toHexString(handle) + ")";
    if ((handle & TAG_MASK) != HANDLE_TAG) {
      return what
          + ": not a registration handle from register()"
          + ((handle & TAG_MASK) == DESCRIPTOR_TAG ? " (it is a descriptor)" : "");
    }
    long id = handle & ID_MASK;
    Registration registration = fabric.registration(id);
    if (registration == null) {
      return what
          + (fabric.registrationWasIssued(id)
              ? ": registration " + id + " was already deregistered"
              : ": no such registration");
    }
    if (registration.owner != owner) {
      return what + ": registration " + id + " belongs to another endpoint";
    }
    return null;
  }

  /** The live registration of a handle without a {@link #handleProblem}; only for such a handle. */
  Registration live(long handle) {
    return Objects.requireNonNull(
        fabric.registration(handle & ID_MASK), "live() of a handle with a problem");
  }

  /** The descriptor of a live registration. */
  static long descriptor(Registration registration) {
    return DESCRIPTOR_TAG | registration.id;
  }

  /** Why a post's descriptor does not cover its local bytes, or null. */
  @Nullable String descriptorProblem(long descriptor, long localAddress, long lengthBytes) {
    if (descriptor == 0) {
      return "descriptor 0, but local registration is required (FI_MR_LOCAL)";
    }
    if ((descriptor & TAG_MASK) != DESCRIPTOR_TAG) {
      return "0x"
          + Long.toHexString(descriptor)
          + " is not a descriptor from descriptor()"
          + ((descriptor & TAG_MASK) == HANDLE_TAG ? " (it is a registration handle)" : "");
    }
    long id = descriptor & ID_MASK;
    Registration registration = fabric.registration(id);
    if (registration == null) {
      return fabric.registrationWasIssued(id)
          ? "the descriptor's registration " + id + " was deregistered"
          : "descriptor 0x" + Long.toHexString(descriptor) + " was never issued";
    }
    if (registration.owner != owner) {
      return "the descriptor's registration " + id + " belongs to another endpoint";
    }
    if (localAddress < registration.address
        || localAddress + lengthBytes > registration.address + registration.lengthBytes) {
      return "registration "
          + id
          + " covers [0x"
          + Long.toHexString(registration.address)
          + ", +"
          + registration.lengthBytes
          + "), not the operand [0x"
          + Long.toHexString(localAddress)
          + ", +"
          + lengthBytes
          + ")";
    }
    return null;
  }

  /** Closes a live registration at the caller's request. */
  void deregister(Registration registration) {
    fabric.removeRegistration(registration);
    counts.increment(Counts.DEREGISTRATIONS);
    counts.add(Counts.LIVE_REGISTRATIONS, -1);
  }

  /** Closes the registrations still open as the endpoint closes, counting each. */
  void closeAll() {
    for (Registration registration : fabric.registrationsOf(owner)) {
      fabric.removeRegistration(registration);
      counts.increment(Counts.REGISTRATIONS_OPEN_AT_CLOSE);
      counts.add(Counts.LIVE_REGISTRATIONS, -1);
    }
  }
}
