package dev.dma.core.internal.regions;

/**
 * A snapshot of one endpoint's registration-cache counters, for observability. Immutable; taken by
 * {@link LocalRegions#stats()} on any thread. The counters are read one by one, so a snapshot taken
 * while the worker runs may mix neighbouring moments.
 *
 * @param hits leases served by a cached registration
 * @param misses leases that registered (a cached span or the operand's own extent)
 * @param registrations registrations made, by leases and pins
 * @param evictions cached spans evicted to respect the pinned-bytes bound (or after {@code
 *     -FI_ENOMEM})
 * @param pinnedBytes bytes currently registered by this endpoint (cached, pinned and in flight)
 * @param maxPinnedBytes the bound on {@code pinnedBytes}; {@link Long#MAX_VALUE} when unbounded
 * @param cachedEntries entries this endpoint's domain holds in the registry
 */
public record RegionStats(
    long hits,
    long misses,
    long registrations,
    long evictions,
    long pinnedBytes,
    long maxPinnedBytes,
    int cachedEntries) {}
