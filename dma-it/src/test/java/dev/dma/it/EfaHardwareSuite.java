package dev.dma.it;

import dev.dma.api.DmaConfiguration;

/**
 * The EFA conformance suite on a real EFA provider, on the first EFA device. The provider is found
 * by its name, as users find it. Subclasses name the fabric and skip themselves (with the reason
 * printed) unless {@code -Ddma.efa=true} is set on an EFA host.
 */
abstract class EfaHardwareSuite extends EfaConformanceSuite {
  @Override
  protected DmaConfiguration configuration() {
    return DmaConfiguration.builder().providers(fabric().configuredName()).build();
  }

  /**
   * None: EFA accepts an operation to a well-formed address nobody answers and fails it only when
   * the device gives up, which is undocumented and has been seen to take minutes (aws-ofi-nccl
   * issue 663), longer than this suite waits.
   */
  @Override
  protected byte[] deadPeerAddress() {
    return null;
  }

  /** EFA builds an address handle for any GID, so garbage may well be accepted by fi_av_insert. */
  @Override
  protected boolean garbageAddressRefused() {
    return false;
  }
}
