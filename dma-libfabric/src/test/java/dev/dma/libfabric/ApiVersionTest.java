package dev.dma.libfabric;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.dma.api.DmaConfiguration;
import dev.dma.libfabric.internal.Abi;
import dev.dma.libfabric.internal.Native;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The API version dma asks for is the one decided in {@link Native#apiVersionFor}: the newest dma
 * has been verified against (2.6) that the loaded library supports, and what libfabric recorded for
 * an open endpoint (in the {@code fi_info} it returned and in the fabric the providers see) is that
 * version, on each provider.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class ApiVersionTest {
  private static int version(int major, int minor) {
    return major << 16 | minor;
  }

  @Test
  void theRequestIsTheNewestVerifiedVersionTheLibrarySupports() {
    assertEquals(Abi.FI_VERSION_2_6, Native.NEWEST_VERIFIED_API);
    assertEquals(version(1, 17), Native.apiVersionFor(version(1, 17)));
    assertEquals(version(1, 22), Native.apiVersionFor(version(1, 22)));
    assertEquals(version(2, 0), Native.apiVersionFor(version(2, 0)));
    assertEquals(version(2, 1), Native.apiVersionFor(version(2, 1)));
    assertEquals(version(2, 5), Native.apiVersionFor(version(2, 5)));
    assertEquals(version(2, 6), Native.apiVersionFor(version(2, 6)));
    assertEquals(version(2, 6), Native.apiVersionFor(version(2, 7)), "not verified: stays at 2.6");
    assertEquals(version(2, 6), Native.apiVersionFor(version(3, 0)));
  }

  /** The libraries CI and this issue run: each is asked for its own version, as decided. */
  @Test
  void eachLoadedLibraryIsAskedForTheDecidedVersion() {
    Assumptions.assumeTrue(Libfabric.availability().available(), Libfabric.availability().reason());
    Map<Integer, Integer> decided =
        Map.of(
            version(1, 17), version(1, 17),
            version(2, 1), version(2, 1),
            version(2, 6), version(2, 6));
    Integer expected = decided.get(Libfabric.version());
    Assumptions.assumeTrue(
        expected != null,
        "no decision recorded for libfabric " + Libfabric.versionText(Libfabric.version()));
    assertEquals(
        Libfabric.versionText(expected),
        Libfabric.versionText(Libfabric.apiVersion()),
        "libfabric " + Libfabric.versionText(Libfabric.version()));
  }

  /**
   * What the providers' version gates read: {@code fabric_attr->api_version} of the entry {@code
   * fi_getinfo} returned and {@code fid_fabric->api_version} of the open fabric, both the requested
   * version. shm only opens and closes here.
   */
  @ParameterizedTest
  @ValueSource(strings = {"tcp;ofi_rxm", "sockets", "shm"})
  void libfabricRecordsTheRequestedVersionForAnOpenEndpoint(String provider) {
    Assumptions.assumeTrue(Libfabric.availability().available(), Libfabric.availability().reason());
    LoopbackTest.assumeOffered("libfabric:" + provider);
    try (LibfabricEndpoint endpoint =
        LibfabricEndpoint.open(
            EndpointPolicy.of(provider),
            DmaConfiguration.builder().bind(provider.equals("shm") ? null : "127.0.0.1").build())) {
      int api = Libfabric.apiVersion();
      assertArrayEquals(
          new int[] {api, api},
          endpoint.recordedApiVersions(),
          provider
              + ": fi_info's and fid_fabric's api_version, asked "
              + Libfabric.versionText(api));
    }
  }
}
