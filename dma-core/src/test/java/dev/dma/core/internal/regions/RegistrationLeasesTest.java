package dev.dma.core.internal.regions;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dma.api.MemoryKind;
import dev.dma.core.internal.CapturedWarnings;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A registration's own rules, on its own: a misused lease (retained after the last release,
 * released once too often) throws and leaves the count as it was; a descriptor or deregister the
 * endpoint fails neither leaks the pinned pages nor escapes a release; what it says of itself.
 */
@Timeout(10)
class RegistrationLeasesTest {
  private static final long BASE = 0x7f00_0000_1000L;

  private final RecordingEndpoint endpoint = new RecordingEndpoint();
  private final CapturedWarnings warnings = new CapturedWarnings(Registration.class.getName());

  @BeforeEach
  void captureWarnings() {
    warnings.start();
  }

  @AfterEach
  void stopCapturing() {
    warnings.stop();
  }

  @Test
  void aRetainAfterTheLastReleaseThrowsAndLeavesNoLease() {
    Registration registration = Registration.register(endpoint, BASE, 4096, false);
    registration.release();
    assertEquals(0, registration.leases());
    assertFalse(endpoint.isLive(registration.handle()));
    assertThrows(IllegalStateException.class, registration::retain);
    assertEquals(0, registration.leases(), "the failed retain took its lease back");
    assertThrows(IllegalStateException.class, registration::retain);
    assertEquals(0, registration.leases());
    assertEquals(List.of(), endpoint.faults());
  }

  @Test
  void aReleaseWithNoLeaseLeftThrowsAndLeavesTheCountAtZero() {
    Registration registration = Registration.register(endpoint, BASE, 4096, false);
    registration.release();
    assertThrows(IllegalStateException.class, registration::release);
    assertEquals(0, registration.leases(), "the failed release gave its lease back");
    assertThrows(IllegalStateException.class, registration::release);
    assertEquals(0, registration.leases());
    assertEquals(1, endpoint.deregisterCalls(), "deregistered once, by the last real release");
    assertEquals(List.of(), endpoint.faults());
  }

  @Test
  void aRegistrationSaysWhetherItIsEvictable() {
    Registration cached = Registration.register(endpoint, BASE, 4096, true);
    Registration pinned = Registration.register(endpoint, BASE + 8192, 4096, false);
    assertTrue(cached.evictable());
    assertFalse(pinned.evictable());
    cached.release();
    pinned.release();
  }

  @Test
  void aRegistrationSaysWhereItIsHowLongAndItsLeases() {
    Registration registration = Registration.register(endpoint, BASE, 4096, false);
    assertEquals(
        "Registration[base=0x7f0000001000, length=4096, leases=1]", registration.toString());
    registration.release();
    assertEquals(
        "Registration[base=0x7f0000001000, length=4096, leases=0]", registration.toString());
  }

  @Test
  void aFailedDescriptorClosesTheHandleItWasAskedFor() {
    IllegalStateException refused = new IllegalStateException("no descriptor");
    endpoint.descriptorFailure = refused;
    AtomicLong pinned = new AtomicLong();
    assertSame(
        refused,
        assertThrows(
            IllegalStateException.class,
            () -> Registration.register(endpoint, BASE, 4096, MemoryKind.HOST, true, pinned)));
    assertEquals(1, endpoint.registerCalls());
    assertEquals(0, endpoint.liveRegistrations(), "nothing left pinned");
    assertEquals(0, pinned.get());
    assertEquals(List.of(), endpoint.faults());
  }

  @Test
  void aFailedDeregisterIsLoggedAndStillGivesBackThePinnedBytes() {
    AtomicLong pinned = new AtomicLong();
    Registration registration =
        Registration.register(endpoint, BASE, 4096, MemoryKind.HOST, false, pinned);
    assertEquals(4096, pinned.get());
    endpoint.deregisterFailure = new IllegalStateException("device gone");
    registration.release();
    assertEquals(0, pinned.get());
    assertEquals(0, registration.leases());
    assertEquals(List.of("deregistering 4096 bytes at 0x7f0000001000 failed"), warnings.messages());
  }

  /**
   * After the endpoint closed (which closed its registrations with it), dropping the last lease
   * gives back the pinned bytes and deregisters nothing: a deregister there would close the handle
   * a second time. A lease that is not the last one only counts down.
   */
  @Test
  void aReleaseAfterTheEndpointClosedGivesBackThePinnedBytesWithoutDeregistering() {
    AtomicLong pinned = new AtomicLong();
    Registration registration =
        Registration.register(endpoint, BASE, 4096, MemoryKind.HOST, false, pinned);
    registration.retain();
    registration.releaseAfterEndpointClosed();
    assertEquals(1, registration.leases());
    assertEquals(4096, pinned.get());
    registration.releaseAfterEndpointClosed();
    assertEquals(0, registration.leases());
    assertEquals(0, pinned.get());
    assertEquals(0, endpoint.deregisterCalls());
    assertThrows(IllegalStateException.class, registration::releaseAfterEndpointClosed);
    assertEquals(0, registration.leases());
    assertEquals(List.of(), warnings.messages());
  }
}
