package dev.dma.libfabric;

import dev.dma.libfabric.internal.Abi;

/**
 * Provider behaviour that differs from what libfabric's man pages promise, each pinned to the
 * library versions where it was read in the source and seen in a test. Each predicate takes the
 * loaded library's {@code fi_version()} ({@link Libfabric#version()}), never the API version dma
 * asks for: these are properties of the code that runs, not of the API contract requested.
 */
final class Quirks {
  private Quirks() {}

  /**
   * sockets answers {@code fi_av_remove} of a peer it never connected to with {@code -FI_EINVAL},
   * and removes it anyway: from libfabric 2.5 on ("Enforce AV Removal Behavior" in 2.5.0's NEWS).
   *
   * <p>2.6.0's {@code sock_av_remove} ({@code prov/sockets/src/sock_av.c}) has two halves. The
   * first walks the endpoints bound to the AV and looks the handle up in each one's connection map:
   * no connection (the peer was inserted but nothing was ever posted to it, nor did it connect)
   * sets {@code ret = -FI_EINVAL} and skips that endpoint. The second marks the table entry invalid
   * whatever the first found, and also answers {@code -FI_EINVAL} when the entry was already
   * invalid or out of range. So after a removal of a handle dma knows to be live (its table checks
   * that), {@code -FI_EINVAL} means only "never connected", and {@code fi_av_lookup}, which refuses
   * an invalid entry with {@code -FI_EINVAL}, confirms the entry is gone. 2.1.0's version returns 0
   * in both cases, and 1.17 answers 0 for the never-connected peer too (SocketsRemovalQuirkTest).
   * No upper bound: 2.6 is the newest library checked, and the lookup keeps a later fix (or a real
   * failure) from being taken for a removal.
   *
   * @param provider the provider's name ({@code fabric_attr->prov_name})
   * @param libraryVersion the loaded library's packed {@code fi_version()}
   * @return whether an {@code -FI_EINVAL} from {@code fi_av_remove} may be this quirk
   */
  static boolean socketsRemovalAnswersEinval(String provider, int libraryVersion) {
    return "sockets".equals(provider) && libraryVersion >= Abi.FI_VERSION_2_5;
  }
}
