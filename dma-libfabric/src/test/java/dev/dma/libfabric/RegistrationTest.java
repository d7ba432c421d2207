package dev.dma.libfabric;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dma.api.DmaConfiguration;
import dev.dma.api.DmaException;
import dev.dma.api.RemoteAccess;
import dev.dma.spi.ExposedRegion;
import dev.dma.spi.FabricEndpoint;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** Registrations: unique keys, deregistration from any thread, nothing after close. */
class RegistrationTest {
  static final DmaConfiguration TCP =
      DmaConfiguration.builder().providers("libfabric:tcp;ofi_rxm").bind("127.0.0.1").build();

  @BeforeAll
  static void libfabric() {
    Assumptions.assumeTrue(Libfabric.availability().available(), Libfabric.availability().reason());
  }

  @Test
  void overlappingRegistrationsGetDistinctKeys() {
    try (Arena arena = Arena.ofShared();
        FabricEndpoint endpoint = new LibfabricProvider().open(TCP)) {
      MemorySegment memory = arena.allocate(1 << 16, 4096);
      // tcp uses the requested key, and a duplicate fails with -FI_ENOKEY: the endpoint must
      // hand out unique ones.
      long first = endpoint.register(memory.address(), memory.byteSize());
      long second = endpoint.register(memory.address(), 4096);
      try (ExposedRegion a = endpoint.expose(memory, RemoteAccess.READ_WRITE);
          ExposedRegion b = endpoint.expose(memory.asSlice(0, 4096), RemoteAccess.READ)) {
        assertNotEquals(a.advertisement().remoteKey(), b.advertisement().remoteKey());
        assertEquals(0, a.advertisement().remoteAddress());
      }
      assertNotEquals(first, second);
      endpoint.descriptor(first);
      endpoint.deregister(first);
      endpoint.deregister(first); // harmless
      endpoint.deregister(second);
      DmaException zero =
          assertThrows(DmaException.class, () -> endpoint.register(memory.address(), 0));
      assertEquals("cannot register 0 bytes", zero.getMessage());
    }
  }

  @Test
  void deregistrationFromOtherThreadsRacesCloseSafely() throws Exception {
    for (int round = 0; round < 5; round++) {
      try (Arena arena = Arena.ofShared()) {
        FabricEndpoint endpoint = new LibfabricProvider().open(TCP);
        MemorySegment memory = arena.allocate(1 << 20, 4096);
        List<Long> registrations = new ArrayList<>();
        for (int i = 0; i < 200; i++) {
          registrations.add(endpoint.register(memory.address() + i * 4096L, 4096));
        }
        CountDownLatch start = new CountDownLatch(1);
        AtomicReference<Throwable> failure = new AtomicReference<>();
        List<Thread> threads = new ArrayList<>();
        for (int t = 0; t < 3; t++) {
          int offset = t;
          threads.add(
              Thread.ofPlatform()
                  .start(
                      () -> {
                        try {
                          start.await();
                          for (int i = offset; i < registrations.size(); i += 3) {
                            endpoint.deregister(registrations.get(i));
                          }
                        } catch (Throwable e) {
                          failure.set(e);
                        }
                      }));
        }
        start.countDown();
        endpoint.close(); // closes whatever the threads have not, and makes the rest no-ops
        for (Thread thread : threads) {
          assertTrue(thread.join(java.time.Duration.ofSeconds(30)));
        }
        assertEquals(null, failure.get());
        for (long registration : registrations) {
          endpoint.deregister(registration); // after close: never reaches libfabric
        }
        endpoint.close(); // idempotent
      }
    }
  }

  @Test
  void anEndpointUsedBothWaysKeepsItsCompletionsAcrossProgress() {
    try (Loopback loopback = LoopbackTest.loopback("libfabric:tcp;ofi_rxm")) {
      MemorySegment remote = loopback.arena.allocate(4096, 4096);
      MemorySegment local = loopback.arena.allocate(4096, 4096);
      local.fill((byte) 9);
      try (ExposedRegion region = loopback.expose(remote, RemoteAccess.READ_WRITE)) {
        int rc =
            loopback.post(
                true,
                0,
                loopback.peer,
                local.asSlice(0, 4096),
                0,
                region.advertisement().remoteKey());
        assertEquals(FabricEndpoint.POSTED, rc);
        // Drive both sides only through progress(): the initiator's own completion is read by
        // progress() and must come out of the next reap.
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (remote.get(java.lang.foreign.ValueLayout.JAVA_BYTE, 4095) != 9
            && System.nanoTime() < deadline) {
          loopback.initiator.progress();
          loopback.target.progress();
        }
        for (int i = 0; i < 1_000; i++) {
          loopback.initiator.progress();
          loopback.target.progress();
        }
        assertEquals(1, loopback.await(0));
        assertEquals(1, loopback.sink.completed);
      }
    }
  }
}
