package dev.dma.examples.cache;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dma.api.Checksums;
import dev.dma.api.DmaConfiguration;
import dev.dma.fake.FakeFabric;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The cache's server code, unit-tested on the fake provider in one JVM: the same control channel
 * over a real socket, the values moved by the fake fabric. The server runs over a group of two
 * endpoints on one fake fabric (as {@code interfaces=lo,lo} on tcp) and stripes from 64 KiB.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class CacheServerFakeTest {
  private static MemorySegment pattern(Arena arena, long size, int seed) {
    MemorySegment value = arena.allocate(size);
    for (long i = 0; i < size; i++) {
      value.set(ValueLayout.JAVA_BYTE, i, (byte) (seed + i * 13));
    }
    return value;
  }

  @Test
  void putAndGetMoveTheBytesStripedOrNotAndAFailureComesBackWithItsReason() throws Exception {
    try (FakeFabric fabric = FakeFabric.create("cache-server-" + System.nanoTime());
        Arena arena = Arena.ofShared()) {
      String name = fabric.name();
      DmaConfiguration serverConfiguration =
          DmaConfiguration.builder().providers("fake").interfaces(List.of(name, name)).build();
      DmaConfiguration clientConfiguration =
          DmaConfiguration.builder().providers("fake").interfaces(List.of(name)).build();
      InetAddress loopback = InetAddress.getLoopbackAddress();
      try (CacheServer server =
              CacheServer.start(serverConfiguration, new InetSocketAddress(loopback, 0), 64 << 10);
          CacheClient client =
              CacheClient.connect(
                  clientConfiguration, new InetSocketAddress(loopback, server.port()), 1 << 20)) {
        assertEquals(List.of(name, name), server.fabric().devices());

        // A large value: one read out of the client's buffer, striped over both endpoints.
        MemorySegment large = pattern(arena, (1 << 20) - 5, 3);
        assertEquals(Checksums.crc32c(large), client.put("large", large));
        assertEquals(2, client.lastChunks());
        assertArrayEquals(large.toArray(ValueLayout.JAVA_BYTE), server.value("large"));
        assertArrayEquals(large.toArray(ValueLayout.JAVA_BYTE), client.get("large"));
        assertEquals(2, client.lastChunks());

        // A small one: below the threshold, one chunk.
        MemorySegment small = pattern(arena, 100, 9);
        client.put("small", small);
        assertEquals(1, client.lastChunks());
        assertArrayEquals(small.toArray(ValueLayout.JAVA_BYTE), client.get("small"));
        assertNull(client.get("absent"));

        // The fabric refuses the next operation at the target: the PUT fails with the reason,
        // the stored value is untouched, and the connection goes on.
        fabric.script().failNextOps(1, 13, -13, "denied by the test");
        IOException refused =
            assertThrows(IOException.class, () -> client.put("small", pattern(arena, 100, 77)));
        assertTrue(
            refused.getMessage().contains("ERR ACCESS_DENIED")
                && refused.getMessage().contains("denied by the test"),
            refused.getMessage());
        assertArrayEquals(small.toArray(ValueLayout.JAVA_BYTE), server.value("small"));
        assertArrayEquals(small.toArray(ValueLayout.JAVA_BYTE), client.get("small"));
      }
      assertEquals(0, fabric.counters().violations(), fabric.counters().lastViolation());
    }
  }
}
