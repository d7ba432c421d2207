package dev.dma.provider.efa;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dma.api.DmaException;
import dev.dma.api.RemoteAccess;
import dev.dma.fake.FakeEndpoint;
import dev.dma.fake.FakeFabric;
import dev.dma.spi.CompletionSink;
import dev.dma.spi.ExposedRegion;
import dev.dma.spi.FabricEndpoint;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** {@link EfaEndpoint}'s own rules, driven by hand over the fake configured like EFA. */
class EfaEndpointTest {
  private FakeFabric fabric;
  private Arena arena;
  private FakeEndpoint target;
  private ExposedRegion region;
  private MemorySegment local;

  @BeforeEach
  void open() {
    fabric = FakeFabric.create("efa-endpoint-" + System.nanoTime());
    fabric.script().likeEfaDirect();
    arena = Arena.ofShared();
    target = fabric.openEndpoint();
    region = target.expose(arena.allocate(4096, 4096), RemoteAccess.READ_WRITE);
    local = arena.allocate(4096, 4096);
  }

  @AfterEach
  void close() {
    assertEquals(0, fabric.counters().violations(), fabric.counters().lastViolation());
    fabric.close();
    arena.close();
  }

  private EfaEndpoint initiator(EfaFabric rules) {
    EfaEndpoint endpoint = ImitatedEfa.endpoint(fabric.openEndpoint(), rules);
    endpoint.openSlots(8);
    return endpoint;
  }

  private int write(EfaEndpoint endpoint, int slot, long peer, long registration) {
    return endpoint.postWrite(
        slot,
        peer,
        local.address(),
        64,
        endpoint.descriptor(registration),
        region.advertisement().remoteAddress(),
        region.advertisement().remoteKey());
  }

  @Test
  void onEfaTheFirstOperationToAPeerGoesAloneUntilItCompletes() {
    try (EfaEndpoint endpoint = initiator(EfaFabric.EFA)) {
      target.insertPeer(endpoint.localAddress());
      long registration = endpoint.register(local.address(), local.byteSize());
      long peer = endpoint.insertPeer(target.localAddress());
      assertEquals(FabricEndpoint.POSTED, write(endpoint, 0, peer, registration));
      assertEquals(
          FabricEndpoint.AGAIN, write(endpoint, 1, peer, registration), "handshake under way");
      assertEquals(1, ((FakeEndpoint) endpoint.delegate()).inFlight(), "nothing queued behind it");
      Recorder recorder = new Recorder();
      assertEquals(1, endpoint.reap(recorder, 8));
      assertEquals(List.of(0), recorder.completed);
      assertEquals(FabricEndpoint.POSTED, write(endpoint, 1, peer, registration));
      assertEquals(FabricEndpoint.POSTED, write(endpoint, 2, peer, registration), "handshake done");
      assertEquals(2, endpoint.reap(recorder, 8));
      // Removing the peer and inserting it again handshakes again.
      endpoint.removePeer(peer);
      long again = endpoint.insertPeer(target.localAddress());
      assertEquals(FabricEndpoint.POSTED, write(endpoint, 3, again, registration));
      assertEquals(FabricEndpoint.AGAIN, write(endpoint, 4, again, registration));
      endpoint.reap(recorder, 8);
      endpoint.deregister(registration);
    }
  }

  @Test
  void aFailedFirstOperationLetsTheNextOneTryTheHandshake() {
    try (EfaEndpoint endpoint = initiator(EfaFabric.EFA)) {
      target.insertPeer(endpoint.localAddress());
      long registration = endpoint.register(local.address(), local.byteSize());
      long peer = endpoint.insertPeer(target.localAddress());
      fabric.script().failNextOps(1, 113, 15, "Unreachable remote (never received a response)");
      assertEquals(FabricEndpoint.POSTED, write(endpoint, 0, peer, registration));
      Recorder recorder = new Recorder();
      endpoint.reap(recorder, 8);
      assertEquals(1, recorder.failed.size());
      assertTrue(
          recorder.failed.getFirst().contains("(prov_errno=15); unreachable peer:"),
          recorder.failed.getFirst());
      assertEquals(FabricEndpoint.POSTED, write(endpoint, 1, peer, registration));
      assertEquals(FabricEndpoint.AGAIN, write(endpoint, 2, peer, registration));
      endpoint.reap(recorder, 8);
      endpoint.deregister(registration);
    }
  }

  @Test
  void onEfaDirectThereIsNoHandshakeGate() {
    try (EfaEndpoint endpoint = initiator(EfaFabric.EFA_DIRECT)) {
      target.insertPeer(endpoint.localAddress());
      long registration = endpoint.register(local.address(), local.byteSize());
      long peer = endpoint.insertPeer(target.localAddress());
      for (int slot = 0; slot < 4; slot++) {
        assertEquals(FabricEndpoint.POSTED, write(endpoint, slot, peer, registration));
      }
      assertEquals(4, endpoint.reap(new Recorder(), 8));
      endpoint.deregister(registration);
    }
  }

  @Test
  void aPostWithoutADescriptorIsRefusedWithoutReachingTheProvider() {
    try (EfaEndpoint endpoint = initiator(EfaFabric.EFA_DIRECT)) {
      long peer = endpoint.insertPeer(target.localAddress());
      long attempts = fabric.counters().postAttempts();
      assertEquals(-22, endpoint.postWrite(0, peer, local.address(), 64, 0, 0, 1));
      assertEquals(-22, endpoint.postRead(0, peer, local.address(), 64, 0, 0, 1));
      assertEquals(attempts, fabric.counters().postAttempts());
    }
  }

  @Test
  void aTargetThatHasNotInsertedTheInitiatorFailsWithAdvice() {
    try (EfaEndpoint endpoint = initiator(EfaFabric.EFA_DIRECT)) {
      long registration = endpoint.register(local.address(), local.byteSize());
      long peer = endpoint.insertPeer(target.localAddress());
      assertEquals(FabricEndpoint.POSTED, write(endpoint, 0, peer, registration));
      Recorder recorder = new Recorder();
      endpoint.reap(recorder, 8);
      assertEquals(List.of(107), recorder.errnos);
      String message = recorder.failed.getFirst();
      assertTrue(message.startsWith("completion error: "), message);
      assertTrue(
          message.contains("(prov_errno=14); not connected: the target has not inserted"), message);
      endpoint.deregister(registration);
    }
  }

  @Test
  void registrationFailuresGetAdvice() {
    try (EfaEndpoint endpoint = initiator(EfaFabric.EFA_DIRECT)) {
      fabric.script().failNextRegistrations(1, 12);
      DmaException error =
          assertThrows(DmaException.class, () -> endpoint.register(local.address(), 64));
      assertTrue(error.getMessage().contains("ulimit -l unlimited"), error.getMessage());
      assertEquals(12, error.fabricErrno());
    }
  }

  /** Records what a reap delivered. */
  static final class Recorder implements CompletionSink {
    final List<Integer> completed = new ArrayList<>();
    final List<Integer> errnos = new ArrayList<>();
    final List<String> failed = new ArrayList<>();

    @Override
    public void completed(int slot) {
      completed.add(slot);
    }

    @Override
    public void failed(int slot, int errno, int providerErrno, String message) {
      errnos.add(errno);
      failed.add(message);
    }
  }
}
