package dev.dma.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.dma.api.Advertisement;
import dev.dma.api.Direction;
import dev.dma.api.DmaConfiguration;
import dev.dma.api.RemoteAccess;
import dev.dma.core.FabricProviders;
import dev.dma.core.PassiveTarget;
import dev.dma.core.TargetRegion;
import dev.dma.libfabric.Libfabric;
import dev.dma.spi.Availability;
import dev.dma.spi.FabricEndpoint;
import dev.dma.spi.FabricProvider;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.reflect.Proxy;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * {@code run --endpoint-only}: the bare endpoint loop moves the bytes it completes, on real
 * libfabric against a passive target in this JVM, and fails a transfer the provider refuses.
 */
@Timeout(120)
class EndpointDriverTest {
  private static final long SIZE = 4096;
  private static final long WAIT_NANOS = TimeUnit.SECONDS.toNanos(20);

  private static DmaConfiguration configuration(String provider) {
    assumeTrue(Libfabric.availability().available(), "libfabric is not installed");
    return DmaConfiguration.builder().providers(provider).bind("127.0.0.1").maxInFlight(4).build();
  }

  /** Runs exactly one transfer of {@code direction} through {@code loop}; returns its counters. */
  private static ClosedLoop.Snapshot one(
      ClosedLoop loop, Direction direction, MemorySegment operand, Advertisement target)
      throws InterruptedException {
    loop.prepare(direction, operand, List.of(target), false);
    loop.beginMeasure(1);
    loop.start();
    assertTrue(loop.awaitFinished(WAIT_NANOS), "the transfer did not complete within 20 s");
    loop.stop();
    assertTrue(loop.awaitDrained(WAIT_NANOS), "the loop did not drain within 20 s");
    return loop.snapshot();
  }

  @ParameterizedTest
  @ValueSource(strings = {"tcp", "libfabric:shm"})
  void aWriteAndAReadThroughTheBareEndpointMoveTheBytes(String name) throws Exception {
    DmaConfiguration configuration = configuration(name);
    FabricProvider provider = FabricProviders.select(configuration);
    ClosedLoop loop = new ClosedLoop(1);
    try (Arena arena = Arena.ofShared();
        PassiveTarget target = PassiveTarget.builder(configuration).provider(provider).start()) {
      MemorySegment remote = target.allocate(SIZE);
      remote.fill((byte) 0x5a);
      try (TargetRegion region = target.expose(remote, RemoteAccess.READ_WRITE);
          EndpointDriver driver =
              EndpointDriver.open(configuration, provider, loop, configuration.maxInFlight())) {
        MemorySegment buffer = arena.allocate(2 * SIZE, 4096);
        MemorySegment source = buffer.asSlice(0, SIZE);
        MemorySegment landing = buffer.asSlice(SIZE, SIZE);
        for (int i = 0; i < SIZE; i++) {
          source.set(ValueLayout.JAVA_BYTE, i, (byte) (i * 7 + 1));
        }
        driver.addPeer(1, region.advertisement().address());
        driver.register(buffer);

        ClosedLoop.Snapshot wrote = one(loop, Direction.TO_PEER, source, region.advertisement());
        assertEquals(1, wrote.completed(), loop.firstError());
        assertEquals(0, wrote.failed(), loop.firstError());
        assertEquals(-1, remote.mismatch(source), "the target's memory differs from the write");

        remote.fill((byte) 0x3c);
        ClosedLoop.Snapshot read =
            one(loop, Direction.fromPeer(SIZE), landing, region.advertisement());
        assertEquals(1, read.completed(), loop.firstError());
        for (long i = 0; i < SIZE; i++) {
          assertEquals((byte) 0x3c, landing.get(ValueLayout.JAVA_BYTE, i), "byte " + i);
        }
      }
    }
  }

  @Test
  void aTransferWithAWrongKeyFailsAloneWithTheProvidersError() throws Exception {
    DmaConfiguration configuration = configuration("tcp");
    FabricProvider provider = FabricProviders.select(configuration);
    ClosedLoop loop = new ClosedLoop(1);
    try (Arena arena = Arena.ofShared();
        PassiveTarget target = PassiveTarget.builder(configuration).provider(provider).start()) {
      MemorySegment remote = target.allocate(SIZE);
      remote.fill((byte) 0x5a);
      try (TargetRegion region = target.expose(remote, RemoteAccess.READ_WRITE);
          EndpointDriver driver =
              EndpointDriver.open(configuration, provider, loop, configuration.maxInFlight())) {
        MemorySegment source = arena.allocate(SIZE, 4096);
        source.fill((byte) 0x11);
        driver.addPeer(1, region.advertisement().address());
        driver.register(source);
        Advertisement good = region.advertisement();
        Advertisement wrongKey =
            new Advertisement(
                good.address(), good.remoteKey() + 1, good.remoteAddress(), good.lengthBytes());

        ClosedLoop.Snapshot failed = one(loop, Direction.TO_PEER, source, wrongKey);
        assertEquals(0, failed.completed());
        assertEquals(1, failed.failed());
        assertTrue(loop.firstError().contains("completion failed"), loop.firstError());
        for (long i = 0; i < SIZE; i++) {
          assertEquals((byte) 0x5a, remote.get(ValueLayout.JAVA_BYTE, i), "byte " + i);
        }

        ClosedLoop.Snapshot after = one(loop, Direction.TO_PEER, source, good);
        assertEquals(1, after.completed(), loop.firstError());
        assertEquals(-1, remote.mismatch(source));
      }
    }
  }

  /**
   * An endpoint that accepts every post and whose reap waits for {@code reapMay} (ignoring
   * interrupts, as a provider call stuck in native code would); counts its closes.
   */
  private static FabricProvider scripted(CountDownLatch reapMay, AtomicInteger closes) {
    FabricEndpoint endpoint =
        (FabricEndpoint)
            Proxy.newProxyInstance(
                FabricEndpoint.class.getClassLoader(),
                new Class<?>[] {FabricEndpoint.class},
                (proxy, method, args) ->
                    switch (method.getName()) {
                      case "localAddress" -> new byte[16];
                      case "maxTx" -> 4;
                      case "insertPeer" -> 1L;
                      case "reap" -> {
                        boolean released = false;
                        while (!released) {
                          try {
                            released = reapMay.await(1, TimeUnit.SECONDS);
                          } catch (InterruptedException ignored) {
                            // stuck in native code: deaf to interrupts
                          }
                        }
                        yield 0;
                      }
                      case "close" -> {
                        closes.incrementAndGet();
                        yield null;
                      }
                      default ->
                          method.getReturnType() == int.class
                              ? 0
                              : method.getReturnType() == long.class
                                  ? 0L
                                  : method.getReturnType() == boolean.class ? false : null;
                    });
    return new FabricProvider() {
      @Override
      public String name() {
        return "fake";
      }

      @Override
      public int priority() {
        return 0;
      }

      @Override
      public Availability availability() {
        throw new UnsupportedOperationException();
      }

      @Override
      public FabricEndpoint open(DmaConfiguration configuration) {
        return endpoint;
      }
    };
  }

  @Test
  void closeIsBoundedWhenTheLoopIsStuckInAProviderCallAndClosesTheEndpointOtherwise()
      throws Exception {
    DmaConfiguration configuration = DmaConfiguration.builder().providers("fake").build();
    Advertisement target = new Advertisement(new byte[16], 7, 4096, SIZE);
    try (Arena arena = Arena.ofShared()) {
      MemorySegment operand = arena.allocate(SIZE, 4096);

      CountDownLatch reapMay = new CountDownLatch(1);
      AtomicInteger closes = new AtomicInteger();
      ClosedLoop stuckLoop = new ClosedLoop(1);
      EndpointDriver stuck =
          EndpointDriver.open(
              configuration, scripted(reapMay, closes), stuckLoop, 4, Duration.ofMillis(300));
      try {
        stuck.addPeer(1, target.address());
        stuckLoop.prepare(Direction.TO_PEER, operand, List.of(target), false);
        stuckLoop.start();
        long began = System.nanoTime();
        IllegalStateException refused = assertThrows(IllegalStateException.class, stuck::close);
        long tookMillis = (System.nanoTime() - began) / 1_000_000;
        assertTrue(
            refused.getMessage().contains("did not stop within 300 ms"), refused.getMessage());
        assertTrue(tookMillis < 5_000, "close took " + tookMillis + " ms");
        assertEquals(0, closes.get(), "an endpoint still in use by its thread was closed");
      } finally {
        reapMay.countDown();
      }

      AtomicInteger freeCloses = new AtomicInteger();
      ClosedLoop freeLoop = new ClosedLoop(1);
      CountDownLatch open = new CountDownLatch(0);
      EndpointDriver free =
          EndpointDriver.open(
              configuration, scripted(open, freeCloses), freeLoop, 4, Duration.ofMillis(300));
      free.addPeer(1, target.address());
      freeLoop.prepare(Direction.TO_PEER, operand, List.of(target), false);
      freeLoop.start();
      free.close();
      assertEquals(1, freeCloses.get());
    }
  }

  @Test
  void theCommandLineRunsBothDirectionsOnTheFakeAndRejectsWhatItCannotDrive() {
    for (String op : new String[] {"write", "read"}) {
      CliTest.Run r =
          CliTest.run(
              "--provider",
              "fake",
              "--sizes",
              "4k",
              "--op",
              op,
              "--window",
              "8",
              "--endpoint-only",
              "--iterations",
              "3000",
              "--warmup",
              "20ms",
              "--json",
              "--no-progress");
      assertEquals(0, r.code(), r.err());
      assertTrue(r.out().contains("\"transfers\":3000,\"errors\":0"), r.out());
    }
    CliTest.Run r = CliTest.run("--provider", "fake", "--endpoint-only", "--virtual-threads", "4");
    assertEquals(Main.USAGE, r.code());
    assertTrue(r.err().contains("--endpoint-only drives one endpoint"), r.err());
  }
}
