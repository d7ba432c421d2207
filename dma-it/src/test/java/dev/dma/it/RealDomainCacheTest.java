package dev.dma.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dma.api.CacheableSpan;
import dev.dma.api.DmaConfiguration;
import dev.dma.api.Operands;
import dev.dma.core.FabricProviders;
import dev.dma.core.internal.peers.PeerTable;
import dev.dma.core.internal.regions.LocalRegions;
import dev.dma.core.internal.regions.RegionRegistry;
import dev.dma.core.internal.regions.Registration;
import dev.dma.spi.FabricEndpoint;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The original crate's region-cache and peer-table tests on a real tcp domain: registrations are
 * real {@code fi_mr_reg} calls on real memory, peers real address-vector entries.
 */
class RealDomainCacheTest {
  private static final DmaConfiguration TCP =
      DmaConfiguration.builder().providers("tcp").bind("127.0.0.1").build();

  private Arena arena;
  private RegisteringEndpoint endpoint;
  private RegionRegistry registry;
  private LocalRegions regions;

  @BeforeEach
  void open() {
    arena = Arena.ofShared();
    endpoint = new RegisteringEndpoint(FabricProviders.select(TCP).open(TCP));
    registry = new RegionRegistry();
    regions = LocalRegions.withExactBound(endpoint, registry, Long.MAX_VALUE);
  }

  @AfterEach
  void close() {
    regions.close();
    endpoint.close();
    arena.close();
  }

  private static Operands spanning(CacheableSpan span) {
    return new Operands() {
      @Override
      public CacheableSpan cacheableSpan() {
        return span;
      }
    };
  }

  private static final Operands NEVER_ASKED =
      new Operands() {
        @Override
        public CacheableSpan cacheableSpan() {
          throw new AssertionError("a cache hit asked for its span");
        }
      };

  @Test
  void invalidatingANeighbourUncachesTheExtentButItsInFlightLeaseKeepsItRegistered() {
    MemorySegment extent = arena.allocate(64 * 1024, 64 * 1024);
    long base = extent.address();
    Registration lease = regions.lease(base + 4096, 4096, spanning(CacheableSpan.of(extent)));
    assertEquals(2, lease.leases(), "the registry and the operand");
    FabricService_invalidate(registry, base + 32768, base + 36864);
    assertNull(registry.covering(regions, base + 4096, base + 8192));
    assertEquals(1, lease.leases());
    assertEquals(0, endpoint.deregistrations.get(), "deregistered under a lease");
    lease.release();
    assertEquals(1, endpoint.deregistrations.get());
  }

  private static void FabricService_invalidate(RegionRegistry registry, long start, long end) {
    registry.invalidate(start, end);
  }

  @Test
  void aCacheableSpanWidensTheRegistration() {
    MemorySegment buffer = arena.allocate(3 * 64 * 1024, 64 * 1024);
    MemorySegment extent = buffer.asSlice(64 * 1024, 64 * 1024);
    long base = extent.address();
    Registration first = regions.lease(base, 4096, spanning(CacheableSpan.of(extent)));
    Registration far = regions.lease(base + 60 * 1024, 4096, NEVER_ASKED);
    assertSame(first, far);
    assertEquals(1, endpoint.registrations.get());
    // A span that does not contain its operand falls back to the operand's own extent.
    Registration narrow =
        regions.lease(
            buffer.address(), 4096, spanning(CacheableSpan.of(buffer.address() + 8192, 4096)));
    assertNotEquals(first, narrow);
    assertEquals(2, endpoint.registrations.get());
    narrow.release();
    assertEquals(1, endpoint.deregistrations.get(), "the bogus span was tracked");
    first.release();
    far.release();
  }

  @Test
  void aPinnedSpanServesTheOperandsInside() {
    MemorySegment pinned = arena.allocate(64 * 1024, 4096);
    regions.pin(pinned.address(), pinned.byteSize());
    Registration lease = regions.lease(pinned.address() + 1000, 100, NEVER_ASKED);
    assertSame(registry.covering(regions, pinned.address(), pinned.address() + 1), lease);
    lease.release();
    lease.release();
    registry.invalidate(pinned.address(), pinned.address() + pinned.byteSize());
    assertEquals(1, endpoint.deregistrations.get());
  }

  @Test
  void descriptorsStayValidWhileReclaimsRunUnderneath() throws Exception {
    MemorySegment memory = arena.allocate(8 * 32 * 1024, 4096);
    List<CacheableSpan> spans = new ArrayList<>();
    for (int i = 0; i < 8; i++) {
      spans.add(CacheableSpan.of(memory.asSlice(i * 32 * 1024L, 32 * 1024)));
    }
    for (CacheableSpan span : spans) {
      regions.lease(span.base(), 64, spanning(span)).release();
    }
    AtomicBoolean stop = new AtomicBoolean();
    AtomicLong leased = new AtomicLong();
    List<Thread> readers = new ArrayList<>();
    for (int t = 0; t < 4; t++) {
      readers.add(
          Thread.ofPlatform()
              .start(
                  () -> {
                    while (!stop.get()) {
                      for (CacheableSpan span : spans) {
                        Registration lease =
                            registry.covering(regions, span.base(), span.base() + 64);
                        if (lease != null) {
                          lease.descriptor(); // must be a live registration's descriptor
                          assertTrue(lease.leases() >= 1);
                          lease.release();
                          leased.incrementAndGet();
                        }
                      }
                    }
                  }));
    }
    // The worker re-registers (it owns the domain); reclaims run from this thread meanwhile.
    try {
      for (int round = 0; round < 60; round++) {
        registry.invalidate(memory.address(), memory.address() + memory.byteSize());
        for (CacheableSpan span : spans) {
          regions.lease(span.base(), 64, spanning(span)).release();
        }
      }
    } finally {
      // Also when a round failed: the readers would otherwise spin for the rest of the run.
      stop.set(true);
      for (Thread reader : readers) {
        assertTrue(reader.join(Duration.ofSeconds(30)), "a reader did not stop");
      }
    }
    assertTrue(leased.get() > 0);
    regions.close();
    assertEquals(endpoint.registrations.get(), endpoint.deregistrations.get());
  }

  @Test
  void clientsSharingAnAddressShareOneEntryAndTheLastOutRemovesIt() {
    PeerTable peers = new PeerTable(endpoint);
    byte[] own = endpoint.localAddress();
    long first = peers.handle(1, own, null);
    assertEquals(first, peers.handle(2, own.clone(), null));
    assertEquals(1, peers.entries());
    peers.release(1);
    assertEquals(1, peers.entries(), "one client leaving keeps what another still uses");
    peers.release(1);
    assertEquals(1, peers.entries(), "releasing twice is harmless");
    peers.release(2);
    assertEquals(0, peers.entries());
    assertEquals(1, peers.inserts());
    assertEquals(1, peers.removes());
    FabricEndpoint unused = endpoint;
    assertEquals(16, unused.localAddress().length);
    peers.clear();
  }
}
