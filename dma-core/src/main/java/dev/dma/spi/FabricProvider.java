package dev.dma.spi;

import dev.dma.api.DmaConfiguration;
import dev.dma.api.DmaException;
import java.util.List;

/**
 * A kind of fabric that dma can drive: found with {@link java.util.ServiceLoader} (declare it with
 * {@code @AutoService(FabricProvider.class)} and {@code provides ... with ...} in module-info) and
 * chosen by {@link #name()} in {@link DmaConfiguration#providers()}.
 *
 * <p>Threads: implementations are stateless or thread-safe; {@link #availability()} is computed
 * once and cheap to call again.
 */
public interface FabricProvider {

  /**
   * The name users put in {@link DmaConfiguration#providers()}, for example {@code tcp}.
   *
   * @return the name
   */
  String name();

  /**
   * Whether this provider answers to a configured name. By default only its own {@link #name()}; a
   * provider family may accept a prefix (for example {@code libfabric:sockets}).
   *
   * @param configuredName a name from the configuration
   * @return whether {@link #open} serves it
   */
  default boolean accepts(String configuredName) {
    return name().equals(configuredName);
  }

  /**
   * Rank among available providers when the configuration names none explicitly; higher wins. The
   * fake provider ranks lowest.
   *
   * @return the priority
   */
  int priority();

  /**
   * Whether this provider can open endpoints here, and why not.
   *
   * @return the availability
   */
  Availability availability();

  /**
   * Opens one endpoint (one device), for use by the calling thread only.
   *
   * @param configuration the configuration; {@link DmaConfiguration#provider()} is a name this
   *     provider {@linkplain #accepts accepts}
   * @return the open endpoint, owned by the caller, who must {@linkplain FabricEndpoint#close()
   *     close} it
   * @throws DmaException of kind {@link DmaException.Kind#FABRIC} naming the step that failed
   */
  FabricEndpoint open(DmaConfiguration configuration);

  /**
   * Opens an endpoint for a {@code PassiveTarget}: as {@link #open}, but a provider may give it
   * what only a passive side needs, such as a completion queue with a wait object so the target can
   * {@linkplain FabricEndpoint#awaitIncoming sleep until a peer's RMA arrives} (which would cost an
   * initiator a system call per completion).
   *
   * @param configuration the configuration
   * @return the open endpoint, owned by the caller
   * @throws DmaException of kind {@link DmaException.Kind#FABRIC} naming the step that failed
   */
  default FabricEndpoint openTarget(DmaConfiguration configuration) {
    return open(configuration);
  }

  /**
   * The domain (device) names an endpoint could be pinned to with {@link
   * DmaConfiguration#interfaces()}, in the fabric's order, without duplicates.
   *
   * @param configuration the configuration
   * @return the names, possibly empty
   * @throws DmaException when the fabric cannot be queried
   */
  default List<String> discoverDomains(DmaConfiguration configuration) {
    return List.of();
  }
}
