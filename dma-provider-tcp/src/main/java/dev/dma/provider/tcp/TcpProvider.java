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

/**
 * Provider {@code tcp}: libfabric RMA over kernel TCP sockets, for any host without an RDMA NIC.
 *
 * <h2>Which libfabric provider</h2>
 *
 * On libfabric 2.x, the {@code tcp} provider, which serves {@code FI_EP_RDM} natively. On 1.x, the
 * choice is {@value #LIBFABRIC_1_PROVIDER} (xnet, the code that 2.x renames to {@code tcp}) over
 * {@code tcp;ofi_rxm} (rxm layered on the old tcpx core), measured with this module's {@code
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
 * Both 1.x variants progress only inside libfabric calls: data lands at a target only while its
 * completion queue is read, so every passive target must call {@link FabricEndpoint#progress()}
 * (the fabric worker's busy poll does it for servers).
 *
 * <p>Stateless and thread-safe.
 */
@SuppressWarnings("exports") // @AutoService is source-only metadata.
@AutoService(FabricProvider.class)
public final class TcpProvider implements FabricProvider {
  /** The libfabric provider used on libfabric 1.x. */
  public static final String LIBFABRIC_1_PROVIDER = "net";

  /** The libfabric provider used on libfabric 2.x: tcp serves RDM itself there. */
  public static final String LIBFABRIC_2_PROVIDER = "tcp";

  /** Creates the provider (called by {@link java.util.ServiceLoader}). */
  public TcpProvider() {}

  /**
   * The endpoint policy for a libfabric major version.
   *
   * @param majorVersion the loaded library's major version
   * @return the policy: the provider name, no fabric pin, mode 0, the default {@code mr_mode} hints
   *     and no default source node
   */
  public static EndpointPolicy policy(int majorVersion) {
    return EndpointPolicy.of(majorVersion >= 2 ? LIBFABRIC_2_PROVIDER : LIBFABRIC_1_PROVIDER);
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
    return LibfabricEndpoint.open(policy(Libfabric.majorVersion()), configuration);
  }

  /** {@inheritDoc} */
  @Override
  public List<String> discoverDomains(DmaConfiguration configuration) {
    return LibfabricEndpoint.discoverDomains(policy(Libfabric.majorVersion()), configuration);
  }
}
