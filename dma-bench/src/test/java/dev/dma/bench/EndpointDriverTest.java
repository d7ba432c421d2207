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
 * libfabric against a passive target in this JVM; fails a transfer the provider refuses and only
 * that one; and its close is bounded when its thread is stuck in a provider call.
 */
@Timeout(120)
class EndpointDriverTest {
  private static final long SIZE = 4096;
  private static final long WAIT_NANOS = TimeUnit.SECONDS.toNanos(20);

  /** A passive target exposing {@code SIZE} bytes of 0x5a, and a driver with one peer: it. */
  private record Rig(
      Arena arena,
      PassiveTarget target,
      MemorySegment remote,
      TargetRegion region,
      ClosedLoop loop,
      EndpointDriver driver)
      implements AutoCloseable {

    static Rig open(String provider) {
      assumeTrue(Libfabric.availability().available(), "libfabric is not installed");
      DmaConfiguration configuration =
          DmaConfiguration.builder().providers(provider).bind("127.0.0.1").maxInFlight(4).build();
      FabricProvider chosen = FabricProviders.select(configuration);
      Arena arena = Arena.ofShared();
      PassiveTarget target = PassiveTarget.builder(configuration).provider(chosen).start();
      MemorySegment remote = target.allocate(SIZE);
      remote.fill((byte) 0x5a);
      TargetRegion region = target.expose(remote, RemoteAccess.READ_WRITE);
      ClosedLoop loop = new ClosedLoop(1);
      EndpointDriver driver = EndpointDriver.open(configuration, chosen, loop, 4);
      driver.addPeer(1, region.advertisement().address());
      return new Rig(arena, target, remote, region, loop, driver);
    }

    /** Native memory the driver has registered. */
    MemorySegment registered(long bytes) {
      MemorySegment buffer = arena.allocate(bytes, 4096);
      driver.register(buffer);
      return buffer;
    }

    /** Runs exactly one transfer of {@code direction} to {@code to}; returns the counters. */
    ClosedLoop.Snapshot one(Direction direction, MemorySegment operand, Advertisement to)
        throws InterruptedException {
      loop.prepare(direction, operand, List.of(to), false);
      loop.beginMeasure(1);
      loop.start();
      assertTrue(loop.awaitFinished(WAIT_NANOS), "the transfer did not complete within 20 s");
      loop.stop();
      assertTrue(loop.awaitDrained(WAIT_NANOS), "the loop did not drain within 20 s");
      return loop.snapshot();
    }

    @Override
    public void close() {
      try (arena;
          target;
          region;
          driver) {
        // closed in reverse: the driver first, then the region, the target and the memory
      }
    }
  }

  @ParameterizedTest
  @ValueSource(strings = {"tcp", "libfabric:shm"})
  void aWriteAndAReadThroughTheBareEndpointMoveTheBytes(String provider) throws Exception {
    try (Rig rig = Rig.open(provider)) {
      MemorySegment buffer = rig.registered(2 * SIZE);
      MemorySegment source = buffer.asSlice(0, SIZE);
      MemorySegment landing = buffer.asSlice(SIZE, SIZE);
      for (int i = 0; i < SIZE; i++) {
        source.set(ValueLayout.JAVA_BYTE, i, (byte) (i * 7 + 1));
      }

      ClosedLoop.Snapshot wrote = rig.one(Direction.TO_PEER, source, rig.region().advertisement());
      assertEquals(1, wrote.completed(), rig.loop().firstError());
      assertEquals(0, wrote.failed(), rig.loop().firstError());
      assertEquals(-1, rig.remote().mismatch(source), "the target's memory differs from the write");

      rig.remote().fill((byte) 0x3c);
      ClosedLoop.Snapshot read =
          rig.one(Direction.fromPeer(SIZE), landing, rig.region().advertisement());
      assertEquals(1, read.completed(), rig.loop().firstError());
      for (long i = 0; i < SIZE; i++) {
        assertEquals((byte) 0x3c, landing.get(ValueLayout.JAVA_BYTE, i), "byte " + i);
      }
    }
  }

  @Test
  void aTransferWithAWrongKeyFailsAloneWithTheProvidersError() throws Exception {
    try (Rig rig = Rig.open("tcp")) {
      MemorySegment source = rig.registered(SIZE);
      source.fill((byte) 0x11);
      Advertisement good = rig.region().advertisement();
      Advertisement wrongKey =
          new Advertisement(
              good.address(), good.remoteKey() + 1, good.remoteAddress(), good.lengthBytes());

      ClosedLoop.Snapshot failed = rig.one(Direction.TO_PEER, source, wrongKey);
      assertEquals(0, failed.completed());
      assertEquals(1, failed.failed());
      assertTrue(rig.loop().firstError().contains("completion failed"), rig.loop().firstError());
      for (long i = 0; i < SIZE; i++) {
        assertEquals((byte) 0x5a, rig.remote().get(ValueLayout.JAVA_BYTE, i), "byte " + i);
      }

      ClosedLoop.Snapshot after = rig.one(Direction.TO_PEER, source, good);
      assertEquals(1, after.completed(), rig.loop().firstError());
      assertEquals(-1, rig.remote().mismatch(source));
    }
  }

  /**
   * An endpoint that accepts every post and whose reap, once {@code reapEntered} is counted down,
   * waits for {@code reapMay} deaf to interrupts, as a provider call stuck in native code would;
   * counts its closes.
   */
  private static FabricEndpoint scripted(
      CountDownLatch reapEntered, CountDownLatch reapMay, AtomicInteger closes) {
    return (FabricEndpoint)
        Proxy.newProxyInstance(
            FabricEndpoint.class.getClassLoader(),
            new Class<?>[] {FabricEndpoint.class},
            (proxy, method, args) ->
                switch (method.getName()) {
                  case "localAddress" -> new byte[16];
                  case "maxTx" -> 4;
                  case "insertPeer" -> 1L;
                  case "reap" -> {
                    reapEntered.countDown();
                    boolean released = false;
                    while (!released) {
                      try {
                        released = reapMay.await(1, TimeUnit.SECONDS);
                      } catch (InterruptedException ignored) {
                        // deaf to interrupts, as native code is
                      }
                    }
                    yield 0;
                  }
                  case "close" -> {
                    closes.incrementAndGet();
                    yield null;
                  }
                  default -> {
                    Class<?> type = method.getReturnType();
                    Object zero =
                        type == int.class
                            ? (Object) 0
                            : type == long.class
                                ? (Object) 0L
                                : type == boolean.class ? false : null;
                    yield zero;
                  }
                });
  }

  @Test
  void closeIsBoundedWhenTheLoopIsStuckInAProviderCallAndFailsWhatWasPostedOtherwise()
      throws Exception {
    Advertisement target = new Advertisement(new byte[16], 7, 4096, SIZE);
    try (Arena arena = Arena.ofShared()) {
      MemorySegment operand = arena.allocate(SIZE, 4096);

      CountDownLatch stuckReap = new CountDownLatch(1);
      CountDownLatch reapMay = new CountDownLatch(1);
      AtomicInteger closes = new AtomicInteger();
      ClosedLoop stuckLoop = new ClosedLoop(1);
      EndpointDriver stuck =
          EndpointDriver.open(
              () -> scripted(stuckReap, reapMay, closes), stuckLoop, 4, Duration.ofMillis(300));
      try {
        stuck.addPeer(1, target.address());
        stuckLoop.prepare(Direction.TO_PEER, operand, List.of(target), false);
        stuckLoop.start();
        assertTrue(stuckReap.await(10, TimeUnit.SECONDS), "the loop never reaped");
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

      // The same, not stuck: the posted write never completes, and close fails it once the
      // endpoint is closed.
      CountDownLatch freeReap = new CountDownLatch(1);
      AtomicInteger freeCloses = new AtomicInteger();
      ClosedLoop freeLoop = new ClosedLoop(1);
      EndpointDriver free =
          EndpointDriver.open(
              () -> scripted(freeReap, new CountDownLatch(0), freeCloses),
              freeLoop,
              4,
              Duration.ofMillis(300));
      free.addPeer(1, target.address());
      freeLoop.prepare(Direction.TO_PEER, operand, List.of(target), false);
      freeLoop.start();
      assertTrue(freeReap.await(10, TimeUnit.SECONDS), "the loop never reaped");
      freeLoop.stop();
      free.close();
      assertEquals(1, freeCloses.get());
      assertTrue(freeLoop.awaitDrained(WAIT_NANOS), "the posted write got no completion");
      assertTrue(freeLoop.firstError().contains("with the transfer posted"), freeLoop.firstError());
    }
  }

  @Test
  void theCommandLineRunsBothDirectionsOnTheFakeAndRejectsWhatItCannotDrive() {
    String run =
        "--provider fake --sizes 4k --op both --window 8 --endpoint-only --iterations 3000"
            + " --warmup 20ms --json --no-progress";
    CliTest.Run r = CliTest.run(run.split(" "));
    assertEquals(0, r.code(), r.err());
    for (String op : new String[] {"write", "read"}) {
      assertTrue(
          r.out().contains("\"op\":\"" + op + "\",\"size_bytes\":4096,\"window\":8"), r.out());
    }
    assertEquals(2, r.out().split("\"transfers\":3000,\"errors\":0", -1).length - 1, r.out());

    r = CliTest.run("--provider", "fake", "--endpoint-only", "--virtual-threads", "4");
    assertEquals(Main.USAGE, r.code());
    assertTrue(r.err().contains("--endpoint-only drives one endpoint"), r.err());
  }
}
