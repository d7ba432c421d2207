package dev.dma.provider.tcp;

import com.google.auto.service.AutoService;
import dev.dma.api.DmaConfiguration;
import dev.dma.libfabric.EndpointPolicy;
import dev.dma.libfabric.Libfabric;
import dev.dma.libfabric.LibfabricEndpoint;
import dev.dma.spi.Availability;
import dev.dma.spi.FabricEndpoint;
import dev.dma.spi.FabricProvider;
import java.util.List;
import java.util.function.Predicate;

/**
 * Provider {@code tcp}: libfabric RMA over kernel TCP sockets, for any host without an RDMA NIC.
 *
 * <h2>Which libfabric provider</h2>
 *
 * Chosen by what the loaded library offers, not by its version ({@link #libfabricProvider()}): the
 * {@code tcp} provider wherever {@code fi_getinfo} says it serves {@code FI_EP_RDM} with {@code
 * FI_RMA} itself (libfabric 1.18 on, where xnet took over the name and {@code net} is gone),
 * otherwise {@value #NET_PROVIDER} (1.17 and older, where {@code tcp} alone is {@code FI_EP_MSG}
 * and the hint {@code tcp} is answered only by {@code tcp;ofi_rxm}). A choice by major version
 * asked for {@code net} on 1.18 to 1.22 and failed to open there. Where both exist, {@value
 * #NET_PROVIDER} (xnet, the code that later became {@code tcp}) is preferred over {@code
 * tcp;ofi_rxm} (rxm layered on the old tcpx core), measured with this module's {@code
 * TcpVariantsBenchmark} through {@link LibfabricEndpoint} (delivery-complete writes, one JVM, one
 * thread posting, reaping and progressing the target; 127.0.0.1; libfabric 1.17; a shared 2-vCPU VM
 * at load 4; median of 7 rounds, range in brackets):
 *
 * <table>
 *   <caption>tcp;ofi_rxm against net</caption>
 *   <tr><th>variant</th><th>64 B write, window 1</th><th>64 KiB write, window 64</th></tr>
 *   <tr><td>tcp;ofi_rxm</td><td>16.8 µs (16.5..18.6)</td><td>1727 MB/s (1209..1858)</td></tr>
 *   <tr><td>net</td><td>14.2 µs (13.6..17.9)</td><td>1852 MB/s (1738..1910)</td></tr>
 * </table>
 *
 * <p>net was faster in six of seven rounds on both measures, and the C anchor ({@code rma-bench-c},
 * delivery-complete rows) agrees within noise. Their failure behaviour is the same (bad key, range
 * or access: {@code FI_ECANCELED} for that write with delivery-complete; a closed target fails
 * every outstanding write; a dead peer answers {@code -FI_EAGAIN} for ever). net's transmit depth
 * is 256 ({@code tcp;ofi_rxm}: 2048), still four times the default in-flight cap. net reports
 * {@code FI_PROGRESS_AUTO} but runs no progress thread unless an event queue with {@code
 * FI_WAIT_POLLFD} is opened: a delivery-complete 1 MiB write to a target that is not progressed
 * neither lands nor completes in 2 s, exactly as with {@code tcp;ofi_rxm}, and lands within about
 * 0.5 ms once the target reads its completion queue. dma never relies on automatic progress, so
 * this costs nothing.
 *
 * <h2>Source address ({@code bind})</h2>
 *
 * The configuration's {@code bind} is the source node for {@code fi_getinfo} ({@code FI_SOURCE}).
 * When it is unset this provider sets none: libfabric then takes its first interface (the first
 * non-loopback one, for example {@code eth0}), and the endpoint advertises that interface's
 * address, which is what a server reached by other hosts needs. A {@code 127.0.0.1} default would
 * silently advertise loopback to remote clients. Tests and single-host setups set {@code
 * bind=127.0.0.1}; {@code interfaces=lo} also pins loopback.
 *
 * <h2>Progress</h2>
 *
 * Every variant (net, tcp, tcp;ofi_rxm) progresses only inside libfabric calls: data lands at a
 * target only while its completion queue is read, so every passive target must call {@link
 * FabricEndpoint#progress()} (the fabric worker's busy poll does it for servers).
 *
 * <p>Stateless and thread-safe.
 */
@SuppressWarnings("exports") // @AutoService is source-only metadata.
@AutoService(FabricProvider.class)
public final class TcpProvider implements FabricProvider {
  /** The libfabric provider used where {@code tcp} does not serve RDM itself (1.17 and older). */
  public static final String NET_PROVIDER = "net";

  /** The libfabric provider used where it serves RDM with RMA itself (1.18 on, and 2.x). */
  public static final String TCP_PROVIDER = "tcp";

  /** Creates the provider (called by {@link java.util.ServiceLoader}). */
  public TcpProvider() {}

  /**
   * The choice rule: {@value #TCP_PROVIDER} when it serves RDM with RMA, else {@value
   * #NET_PROVIDER}.
   *
   * @param servesRdmRma whether a libfabric provider of that exact name serves {@code FI_EP_RDM}
   *     with {@code FI_RMA}
   * @return the libfabric provider name
   */
  static String choose(Predicate<String> servesRdmRma) {
    return servesRdmRma.test(TCP_PROVIDER) ? TCP_PROVIDER : NET_PROVIDER;
  }

  /** The choice for the loaded library, made once: it costs an {@code fi_getinfo}. */
  private static final class Chosen {
    static final String NAME = choose(name -> Libfabric.serves(EndpointPolicy.of(name)));
  }

  /**
   * The libfabric provider this provider opens on the loaded library: {@value #TCP_PROVIDER} where
   * {@code fi_getinfo} says it serves {@code FI_EP_RDM} with {@code FI_RMA}, else {@value
   * #NET_PROVIDER}. Computed once.
   *
   * @return the name
   */
  public static String libfabricProvider() {
    return Chosen.NAME;
  }

  /**
   * The endpoint policy on the loaded library.
   *
   * @return the policy: {@link #libfabricProvider()}, no fabric pin, mode 0, the default {@code
   *     mr_mode} hints and no default source node
   */
  public static EndpointPolicy policy() {
    return EndpointPolicy.of(libfabricProvider());
  }

  /**
   * {@inheritDoc}
   *
   * @return {@code tcp}
   */
  @Override
  public String name() {
    return "tcp";
  }

  /**
   * {@inheritDoc}
   *
   * @return 100
   */
  @Override
  public int priority() {
    return 100;
  }

  /** {@inheritDoc} */
  @Override
  public Availability availability() {
    return Libfabric.availability();
  }

  /** {@inheritDoc} */
  @Override
  public FabricEndpoint open(DmaConfiguration configuration) {
    return LibfabricEndpoint.open(policy(), configuration);
  }

  /**
   * {@inheritDoc}
   *
   * <p>With a wait fd on its completion queue, so an idle target sleeps until a peer's RMA arrives.
   */
  @Override
  public FabricEndpoint openTarget(DmaConfiguration configuration) {
    return LibfabricEndpoint.open(policy(), configuration, true);
  }

  /** {@inheritDoc} */
  @Override
  public List<String> discoverDomains(DmaConfiguration configuration) {
    return LibfabricEndpoint.discoverDomains(policy(), configuration);
  }
}
