package dev.dma.provider.efa;

import org.junit.jupiter.api.Assumptions;

/**
 * The switch for tests on real EFA: {@code -Ddma.efa=true}. Without it, or on a host where the
 * provider is unavailable, the tests are skipped with the reason printed.
 */
public final class EfaHardware {
  /** The system property that turns the real-hardware tests on. */
  public static final String FLAG = "dma.efa";

  private EfaHardware() {}

  /**
   * Skips the calling test class unless the flag is set and the fabric is available here.
   *
   * @param fabric the fabric the tests need
   */
  public static void require(EfaFabric fabric) {
    if (!Boolean.getBoolean(FLAG)) {
      String reason =
          "real "
              + fabric.configuredName()
              + " tests are off: run with -D"
              + FLAG
              + "=true on a host with an EFA device";
      System.out.println("SKIPPED " + reason);
      Assumptions.abort(reason);
    }
    var availability = fabric.availability();
    if (!availability.available()) {
      String reason = fabric.configuredName() + " is unavailable: " + availability.reason();
      System.out.println("SKIPPED " + reason);
      Assumptions.abort(reason);
    }
  }
}
