package dev.dma.provider.efa;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.dma.api.Advertisement;
import dev.dma.api.Checksums;
import dev.dma.api.Completion;
import dev.dma.api.Direction;
import dev.dma.api.DmaConfiguration;
import dev.dma.api.DmaException;
import dev.dma.api.TransferRequest;
import dev.dma.core.FabricService;
import dev.dma.core.PassiveTarget;
import dev.dma.spi.FabricProvider;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The provider-neutral conformance suite of dma-it ({@code ConformanceSuite}), with EFA's rules
 * added: every peer is inserted initiator first, a target that has not inserted the initiator fails
 * with {@code FI_ENOTCONN} and advice (where the fabric has that rule), addresses of the wrong
 * length fail with the spec's text. Run on the fake configured as EFA and, with {@code
 * -Ddma.efa=true} on an EFA host, on the real providers. (dma-it's suite is package-private test
 * code of a module this one cannot depend on, hence the copy.)
 */
abstract class EfaConformanceSuite {
  protected Arena arena;
  protected FabricService<Buffer> service;
  protected Collector<Buffer> completions;
  protected PassiveTarget target;

  /** The configuration both the service and the target open with. */
  protected abstract DmaConfiguration configuration();

  /** The provider under test. */
  protected abstract FabricProvider provider();

  /** Which EFA fabric's rules apply. */
  protected abstract EfaFabric fabric();

  /** A well-formed address of a peer that never answers, or null when there is none to use. */
  protected abstract byte[] deadPeerAddress();

  /** Whether a 32-byte address of garbage is refused by the address vector. */
  protected boolean garbageAddressRefused() {
    return true;
  }

  /** Runs after the service and the target are closed. */
  protected void afterClose() {}

  private FabricService<Buffer> startService(DmaConfiguration configuration) {
    return FabricService.<Buffer>builder(configuration)
        .provider(provider())
        .completer(completions)
        .start();
  }

  private PassiveTarget startTarget() {
    PassiveTarget opened = PassiveTarget.start(configuration(), provider(), Duration.ZERO);
    // Initiator first: the target knows the server before it advertises anything.
    opened.insertPeer(service.localAddress());
    return opened;
  }

  @BeforeEach
  void open() {
    arena = Arena.ofShared();
    completions = new Collector<>();
    service = startService(configuration());
    target = startTarget();
  }

  @AfterEach
  void close() {
    if (service != null) {
      service.close();
    }
    if (target != null) {
      target.close();
    }
    arena.close();
    afterClose();
  }

  protected TransferRequest<Buffer> request(
      long clientId, Advertisement ad, Direction direction, Buffer buffer) {
    return TransferRequest.to(clientId, ad, direction, true, buffer);
  }

  @Test
  void endpointsAreEfaShaped() {
    assertEquals(32, service.localAddress().length);
    assertEquals(32, target.localAddress().length);
    assertTrue(service.endpointInfo().requiresLocalMr(), "every operand is registered");
    assertTrue(service.endpointInfo().usesVirtualAddressing());
  }

  @ParameterizedTest(name = "{0} bytes")
  @ValueSource(ints = {1, 4096, 1 << 20, 8 << 20})
  void writesAndReadsLandExactly(int size) throws Exception {
    MemorySegment remote = arena.allocate(size, 4096);
    MemorySegment local = arena.allocate(size, 4096);
    Patterns.fill(local, size);
    int expected = Checksums.crc32c(local);
    Advertisement ad = target.expose(remote, true, true).advertisement();
    assertEquals(remote.address(), ad.remoteAddress(), "virtual addressing");

    assertTrue(service.submit(request(1, ad, Direction.TO_PEER, new Buffer(1, local))));
    Completion<Buffer> written = completions.take();
    assertTrue(written.outcome().isDone(), () -> written.outcome().error().getMessage());
    assertEquals(expected, written.outcome().done().checksum().orElseThrow());
    assertEquals(expected, Checksums.crc32c(remote), "the target's bytes");

    local.fill((byte) 0);
    assertTrue(service.submit(request(1, ad, Direction.fromPeer(size), new Buffer(2, local))));
    Completion<Buffer> read = completions.take();
    assertEquals(expected, read.outcome().done().checksum().orElseThrow());
    assertEquals(expected, Checksums.crc32c(local), "the bytes read back");
    assertEquals(0, service.outstanding());
  }

  @Test
  void tenThousandTransfersThroughAWindowOf64() throws Exception {
    int size = 4096;
    int slots = 64;
    int total = 10_000;
    MemorySegment remote = arena.allocate((long) size * slots, 4096);
    MemorySegment local = arena.allocate((long) size * slots, 4096);
    Patterns.fill(local, 7);
    Advertisement ad = target.expose(remote, true, true).advertisement();
    long submitted = 0;
    long done = 0;
    int failures = 0;
    String firstFailure = null;
    while (done < total) {
      while (submitted < total && submitted - done < slots) {
        int slot = (int) (submitted % slots);
        Advertisement at =
            new Advertisement(
                ad.address(), ad.remoteKey(), ad.remoteAddress() + (long) slot * size);
        MemorySegment piece = local.asSlice((long) slot * size, size);
        assertTrue(
            service.submit(
                TransferRequest.to(3, at, Direction.TO_PEER, false, new Buffer(slot, piece))));
        submitted++;
      }
      Completion<Buffer> completion = completions.take();
      if (!completion.outcome().isDone()) {
        failures++;
        firstFailure =
            firstFailure == null ? completion.outcome().error().getMessage() : firstFailure;
      }
      done++;
    }
    assertEquals(0, failures, firstFailure);
    assertEquals(Checksums.crc32c(local), Checksums.crc32c(remote));
    assertEquals(0, service.outstanding());
  }

  @Test
  void bothDirectionsAtOnceFromSeveralClients() throws Exception {
    int clients = 4;
    int perClient = 100;
    int size = 16 * 1024;
    List<Thread> threads = new ArrayList<>();
    MemorySegment[] remotes = new MemorySegment[clients];
    Advertisement[] ads = new Advertisement[clients];
    for (int c = 0; c < clients; c++) {
      remotes[c] = arena.allocate(2L * size, 4096);
      Patterns.fill(remotes[c].asSlice(size, size), 100 + c);
      ads[c] = target.expose(remotes[c], true, true).advertisement();
    }
    CountDownLatch start = new CountDownLatch(1);
    for (int c = 0; c < clients; c++) {
      int client = c;
      MemorySegment writes = arena.allocate(size, 4096);
      Patterns.fill(writes, client);
      threads.add(
          Thread.ofPlatform()
              .start(
                  () -> {
                    try {
                      start.await();
                    } catch (InterruptedException e) {
                      return;
                    }
                    Advertisement readAt =
                        new Advertisement(
                            ads[client].address(),
                            ads[client].remoteKey(),
                            ads[client].remoteAddress() + size);
                    for (int i = 0; i < perClient; i++) {
                      service.submit(
                          request(
                              client, ads[client], Direction.TO_PEER, new Buffer(client, writes)));
                      MemorySegment landing = arena.allocate(size, 64);
                      service.submit(
                          request(
                              client,
                              readAt,
                              Direction.fromPeer(size),
                              new Buffer(-1 - client, landing)));
                    }
                  }));
    }
    start.countDown();
    for (Thread thread : threads) {
      thread.join();
    }
    int[] readChecksums = new int[clients];
    for (int c = 0; c < clients; c++) {
      readChecksums[c] = Checksums.crc32c(remotes[c].asSlice(size, size));
    }
    for (Completion<Buffer> completion : completions.take(clients * perClient * 2)) {
      assertTrue(completion.outcome().isDone(), () -> completion.outcome().error().getMessage());
      int id = completion.context().id();
      int checksum = completion.outcome().done().checksum().orElseThrow();
      if (id >= 0) {
        assertEquals(Checksums.crc32c(completion.context().segment()), checksum);
      } else {
        assertEquals(readChecksums[-1 - id], checksum, "a read landed other bytes");
      }
    }
    assertEquals(0, service.outstanding());
  }

  /** EFA flushes a removed peer's in-flight operations: the service must wait for them first. */
  @Test
  void removingAPeerWithTransfersOutstandingWaitsForThem() throws Exception {
    MemorySegment remote = arena.allocate(1 << 20, 4096);
    MemorySegment local = arena.allocate(1 << 20, 4096);
    Patterns.fill(local, 5);
    Advertisement ad = target.expose(remote, true, true).advertisement();
    service.addPeer(9, ad.address());
    for (int i = 0; i < 16; i++) {
      assertTrue(service.submit(request(9, ad, Direction.TO_PEER, new Buffer(i, local))));
    }
    service.removePeer(9);
    for (Completion<Buffer> completion : completions.take(16)) {
      assertTrue(completion.outcome().isDone(), () -> completion.outcome().error().getMessage());
    }
    assertTrue(service.submit(request(9, ad, Direction.TO_PEER, new Buffer(99, local))));
    assertTrue(completions.take().outcome().isDone());
    assertEquals(Checksums.crc32c(local), Checksums.crc32c(remote));
  }

  /**
   * efa-direct's initiator-first rule, broken on purpose: ENOTCONN, with advice, and nothing lands.
   */
  @Test
  void aTargetThatHasNotInsertedTheInitiatorFailsWithEnotconn() throws Exception {
    assumeTrue(fabric().initiatorFirst(), fabric().configuredName() + " handshakes instead");
    PassiveTarget stranger = PassiveTarget.start(configuration(), provider(), Duration.ZERO);
    try {
      MemorySegment exposed = arena.allocate(4096, 4096);
      Advertisement ad = stranger.expose(exposed, true, true).advertisement();
      MemorySegment local = arena.allocate(64);
      local.fill((byte) 0x5a);
      assertTrue(service.submit(request(50, ad, Direction.TO_PEER, new Buffer(1, local))));
      Completion<Buffer> failed = completions.take();
      assertFalse(failed.outcome().isDone(), "an RMA to a target that does not know us landed");
      DmaException error = failed.outcome().error();
      assertEquals(DmaException.Kind.TRANSFER, error.kind());
      assertEquals(107, error.fabricErrno(), error.getMessage());
      assertTrue(error.getMessage().startsWith("completion error: "), error.getMessage());
      assertTrue(error.getMessage().contains("; not connected: "), error.getMessage());
      assertEquals(Checksums.crc32c(new byte[4096]), Checksums.crc32c(exposed));
      // Inserting the server fixes it.
      stranger.insertPeer(service.localAddress());
      service.removePeer(50);
      assertTrue(service.submit(request(51, ad, Direction.TO_PEER, new Buffer(2, local))));
      Completion<Buffer> fine = completions.take();
      assertTrue(fine.outcome().isDone(), () -> fine.outcome().error().getMessage());
    } finally {
      stranger.close();
    }
  }

  @Test
  void aTransferToADeadPeerFailsAtTheProgressDeadline() throws Exception {
    byte[] dead = deadPeerAddress();
    assumeTrue(dead != null, "no address is known to be dead yet well-formed on this fabric");
    service.close();
    service =
        startService(configuration().toBuilder().progressDeadline(Duration.ofMillis(50)).build());
    target.insertPeer(service.localAddress());
    MemorySegment local = arena.allocate(64, 64);
    local.fill((byte) 0xab);
    long started = System.nanoTime();
    assertTrue(
        service.submit(
            TransferRequest.to(
                1, new Advertisement(dead, 1, 0), Direction.TO_PEER, false, new Buffer(0, local))));
    Completion<Buffer> completion = completions.take();
    assertFalse(completion.outcome().isDone());
    assertTrue(System.nanoTime() - started < TimeUnit.SECONDS.toNanos(30));
    assertNotNull(completion.outcome().error().getMessage());
    MemorySegment remote = arena.allocate(64, 64);
    Advertisement ad = target.expose(remote, true, true).advertisement();
    assertTrue(service.submit(request(2, ad, Direction.TO_PEER, new Buffer(1, local))));
    Completion<Buffer> fine = completions.take();
    assertTrue(fine.outcome().isDone(), () -> fine.outcome().error().getMessage());
    assertEquals(Checksums.crc32c(local), Checksums.crc32c(remote));
  }

  @Test
  void aTargetThatClosesMidStreamFailsOnlyItsOwnTransfers() throws Exception {
    PassiveTarget doomed = startTarget();
    MemorySegment doomedMemory = arena.allocate(1 << 20, 4096);
    Advertisement doomedAd = doomed.expose(doomedMemory, true, true).advertisement();
    MemorySegment local = arena.allocate(1 << 20, 4096);
    Patterns.fill(local, 3);
    for (int i = 0; i < 32; i++) {
      assertTrue(service.submit(request(20, doomedAd, Direction.TO_PEER, new Buffer(i, local))));
    }
    doomed.close();
    assertEquals(32, completions.take(32).size());
    MemorySegment remote = arena.allocate(1 << 20, 4096);
    Advertisement ad = target.expose(remote, true, true).advertisement();
    assertTrue(service.submit(request(21, ad, Direction.TO_PEER, new Buffer(100, local))));
    Completion<Buffer> fine = completions.take();
    assertTrue(fine.outcome().isDone(), () -> fine.outcome().error().getMessage());
    assertEquals(Checksums.crc32c(local), Checksums.crc32c(remote));
    assertEquals(0, service.outstanding());
  }

  private void failsAloneThenServiceServes(
      boolean remoteWrite, long keyDelta, long addressDelta, long length) throws Exception {
    PassiveTarget victim = startTarget();
    try {
      MemorySegment exposed = arena.allocate(4096, 4096);
      Advertisement ad = victim.expose(exposed, true, remoteWrite).advertisement();
      Advertisement bad =
          new Advertisement(
              ad.address(), ad.remoteKey() + keyDelta, ad.remoteAddress() + addressDelta);
      MemorySegment local = arena.allocate(length, 64);
      local.fill((byte) 0x5a);
      assertTrue(service.submit(request(30, bad, Direction.TO_PEER, new Buffer(1, local))));
      Completion<Buffer> failed = completions.take();
      assertFalse(failed.outcome().isDone(), "a bad RMA completed successfully");
      assertEquals(DmaException.Kind.TRANSFER, failed.outcome().error().kind());
      assertTrue(
          failed.outcome().error().getMessage().contains("; "),
          failed.outcome().error().getMessage());
      assertEquals(
          Checksums.crc32c(new byte[4096]), Checksums.crc32c(exposed), "the refused write landed");
    } finally {
      victim.close();
    }
    MemorySegment remote = arena.allocate(4096, 4096);
    Advertisement good = target.expose(remote, true, true).advertisement();
    MemorySegment local = arena.allocate(4096, 64);
    Patterns.fill(local, 11);
    assertTrue(service.submit(request(31, good, Direction.TO_PEER, new Buffer(2, local))));
    Completion<Buffer> fine = completions.take();
    assertTrue(fine.outcome().isDone(), () -> fine.outcome().error().getMessage());
    assertEquals(Checksums.crc32c(local), Checksums.crc32c(remote));
  }

  @Test
  void aWrongRemoteKeyFailsThatTransferOnly() throws Exception {
    failsAloneThenServiceServes(true, 12345, 0, 64);
  }

  @Test
  void anOutOfBoundsRemoteRangeFailsThatTransferOnly() throws Exception {
    failsAloneThenServiceServes(true, 0, 4000, 1024);
  }

  @Test
  void aRegionExposedWithoutWriteAccessRefusesWrites() throws Exception {
    failsAloneThenServiceServes(false, 0, 0, 64);
  }

  @Test
  void wrongLengthAndGarbageAddressesFailAddPeer() {
    byte[] own = service.localAddress();
    for (int length : new int[] {1, 31, 33, 37}) {
      DmaException error =
          assertThrows(DmaException.class, () -> service.addPeer(40, Arrays.copyOf(own, length)));
      assertEquals("efa address is " + length + " bytes, not 32", error.getMessage());
    }
    if (garbageAddressRefused()) {
      byte[] garbage = new byte[32];
      Arrays.fill(garbage, (byte) 0xee);
      DmaException error = assertThrows(DmaException.class, () -> service.addPeer(40, garbage));
      assertEquals(DmaException.Kind.FABRIC, error.kind());
    }
    service.addPeer(41, target.localAddress());
    service.addPeer(41, target.localAddress());
    service.removePeer(41);
  }
}
