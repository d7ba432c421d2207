package dev.dma.spi;

import dev.dma.api.Advertisement;

/**
 * Memory a passive target registered for remote access ({@link FabricEndpoint#expose}): what to
 * advertise to the server, and the registration to close when the memory may no longer be touched.
 *
 * <p>Owned by whoever exposed it; close it before the memory is freed and before its endpoint is
 * closed (closing the endpoint closes any region still open). {@link #close()} may be called from
 * any thread, once or more; the advertisement's accessors are immutable values.
 */
public interface ExposedRegion extends AutoCloseable {

  /**
   * The advertisement a server needs to RMA into this region: the endpoint's address, the region's
   * remote key, and its remote address (the virtual address on virtual-addressing providers,
   * otherwise 0).
   *
   * @return the advertisement
   */
  Advertisement advertisement();

  /** Deregisters the region; idempotent. */
  @Override
  void close();
}
