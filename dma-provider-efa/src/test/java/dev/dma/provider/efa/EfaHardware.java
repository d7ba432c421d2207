package dev.dma.provider.efa;

import org.junit.jupiter.api.Assumptions;

/**
 * The switch for tests on real EFA: {@code -Ddma.efa=true} (or {@code -Pefa}). Without it, or on a
 * host where the provider is unavailable, the tests are skipped with the reason printed.
 */
final class EfaHardware {
  static final String FLAG = "dma.efa";

  private EfaHardware() {}

  static void require(EfaFabric fabric) {
    if (!Boolean.getBoolean(FLAG)) {
      String reason =
          "real "
              + fabric.configuredName()
              + " tests are off: run with -D"
              + FLAG
              + "=true (or -Pefa) on a host with an EFA device";
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
