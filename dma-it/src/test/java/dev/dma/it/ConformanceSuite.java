package dev.dma.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.dma.api.Advertisement;
import dev.dma.api.Checksum;
import dev.dma.api.Checksums;
import dev.dma.api.Completion;
import dev.dma.api.Direction;
import dev.dma.api.DmaConfiguration;
import dev.dma.api.DmaException;
import dev.dma.api.Peer;
import dev.dma.api.RemoteAccess;
import dev.dma.api.TransferRequest;
import dev.dma.core.FabricProviders;
import dev.dma.core.FabricService;
import dev.dma.core.PassiveTarget;
import dev.dma.core.TargetRegion;
import dev.dma.spi.FabricProvider;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * What every provider must do, run against each one: a service and a passive target in one JVM,
 * real bytes checked by CRC-32C against the target's memory, and the failure cases that must fail
 * one transfer and nothing else.
 */
// No case may hang a build: each is bounded (a case once never finished closing on sockets).
@org.junit.jupiter.api.Timeout(value = 120, unit = TimeUnit.SECONDS)
abstract class ConformanceSuite {
  protected Arena arena;
  protected FabricService<Buffer> service;
  protected Collector<Buffer> completions;
  protected PassiveTarget target;

  /** The configuration both the service and the target open with. */
  protected abstract DmaConfiguration configuration();

  /** A well-formed address of a peer that never answers, or null when the provider has none. */
  protected abstract byte[] deadPeerAddress();

  /** Checks how a transfer to {@link #deadPeerAddress()} failed; by default any failure will do. */
  protected void deadPeerFailure(DmaException error) {}

  /**
   * Whether the provider enforces a region's access rights (shm does not: it trusts every local
   * peer, so a write to a read-only region lands).
   */
  protected boolean enforcesAccess() {
    return true;
  }

  /**
   * Whether the provider is known to lose completions under load, so that a heavy case may see
   * transfers fail by the completion deadline (and their client then as unreachable) rather than
   * succeed: sockets did, in about 2 of 100 runs of {@link #bothDirectionsAtOnceFromSeveralClients}
   * on 2 loaded cores, once in {@link #tenThousandTransfersThroughAWindowOf64} during a full build,
   * and in 1 of 6 runs of its suite beside two busy loops, each time with every posted operation
   * stuck for good inside the provider. What must still hold is that each transfer completes
   * exactly once, fails only for that reason, and that every one that succeeded moved the right
   * bytes.
   */
  protected boolean losesCompletionsUnderLoad() {
    return false;
  }

  /**
   * Whether a failed transfer failed the way a lost completion ends: by the completion deadline, or
   * at once as unreachable because an earlier transfer of its client passed the deadline.
   */
  private static boolean isLostCompletion(Completion<Buffer> completion) {
    DmaException.Reason reason = completion.outcome().error().reason();
    return reason == DmaException.Reason.DEADLINE || reason == DmaException.Reason.PEER_UNREACHABLE;
  }

  /**
   * The reason a transfer fails with when the target refuses its key or access: {@link
   * DmaException.Reason#ACCESS_DENIED} on every provider and the fake alike (tcp reports it as the
   * connection closing, which dma maps to the same reason), unless a provider cannot tell at all.
   */
  protected DmaException.Reason refusedAccessReason() {
    return DmaException.Reason.ACCESS_DENIED;
  }

  /** Whether 32 garbage bytes shaped like an address are refused (EFA accepts any GID). */
  protected boolean garbageAddressRefused() {
    return true;
  }

  /**
   * Memory for {@code owner} to expose: by default the suite's own arena, as any client's native
   * memory; a provider that can expose only memory it made ({@code local}) allocates it through the
   * target.
   */
  protected MemorySegment exposable(PassiveTarget owner, long lengthBytes) {
    return arena.allocate(lengthBytes, 4096);
  }

  protected FabricProvider provider() {
    return FabricProviders.select(configuration());
  }

  @BeforeEach
  void open() {
    arena = Arena.ofShared();
    completions = new Collector<>();
    service =
        FabricService.<Buffer>builder(configuration())
            .provider(provider())
            .completer(completions)
            .start();
    target = PassiveTarget.start(configuration(), provider(), Duration.ZERO);
    target.insertPeer(service.localAddress());
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

  /** Releases what the subclass opened, after the service and target are closed. */
  protected void afterClose() {}

  protected TransferRequest<Buffer> request(
      long clientId, Advertisement ad, Direction direction, Buffer buffer) {
    return TransferRequest.of(clientId, ad, direction, buffer).withChecksum(Checksum.CRC32C);
  }

  @ParameterizedTest(name = "{0} bytes")
  @ValueSource(ints = {1, 4096, 1 << 20, 64 << 20})
  void writesAndReadsLandExactly(int size) throws Exception {
    MemorySegment remote = exposable(target, size);
    MemorySegment local = arena.allocate(size, 4096);
    Patterns.fill(local, size);
    int expected = Checksums.crc32c(local);
    TargetRegion region = target.expose(remote, RemoteAccess.READ_WRITE);
    Advertisement ad = region.advertisement();

    assertTrue(service.submit(request(1, ad, Direction.TO_PEER, new Buffer(1, local))));
    Completion<Buffer> written = completions.take();
    assertEquals(size, written.outcome().done().bytes());
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
    MemorySegment remote = exposable(target, (long) size * slots);
    MemorySegment local = arena.allocate((long) size * slots, 4096);
    Patterns.fill(local, 7);
    Advertisement ad = target.expose(remote, RemoteAccess.READ_WRITE).advertisement();
    long submitted = 0;
    long done = 0;
    int lost = 0;
    boolean[] landed = new boolean[slots];
    while (done < total) {
      while (submitted < total && submitted - done < slots) {
        int slot = (int) (submitted % slots);
        Advertisement at =
            new Advertisement(
                ad.address(), ad.remoteKey(), ad.remoteAddress() + (long) slot * size);
        MemorySegment piece = local.asSlice((long) slot * size, size);
        assertTrue(service.submit(TransferRequest.write(3, at, new Buffer(slot, piece))));
        submitted++;
      }
      Completion<Buffer> completion = completions.take();
      if (completion.outcome().isDone()) {
        landed[completion.context().id()] = true;
      } else {
        assertTrue(
            losesCompletionsUnderLoad() && isLostCompletion(completion),
            () -> "a transfer failed: " + completion.outcome().error());
        lost++;
      }
      done++;
    }
    if (lost > 0) {
      System.out.println(
          getClass().getSimpleName()
              + ": the provider lost completions; "
              + lost
              + " of "
              + total
              + " transfers failed by the completion deadline or as unreachable after it");
    }
    for (int slot = 0; slot < slots; slot++) {
      if (landed[slot] || !losesCompletionsUnderLoad()) {
        long offset = (long) slot * size;
        assertEquals(
            Checksums.crc32c(local.asSlice(offset, size)),
            Checksums.crc32c(remote.asSlice(offset, size)),
            "slot " + slot + " holds other bytes than its writes");
      }
    }
    assertEquals(0, service.outstanding());
  }

  @Test
  void bothDirectionsAtOnceFromSeveralClients() throws Exception {
    int clients = 4;
    int perClient = 200;
    int size = 16 * 1024;
    List<Thread> threads = new ArrayList<>();
    MemorySegment[] remotes = new MemorySegment[clients];
    Advertisement[] ads = new Advertisement[clients];
    for (int c = 0; c < clients; c++) {
      remotes[c] = exposable(target, 2L * size);
      Patterns.fill(remotes[c].asSlice(size, size), 100 + c);
      ads[c] = target.expose(remotes[c], RemoteAccess.READ_WRITE).advertisement();
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
      assertTrue(thread.join(Duration.ofSeconds(60)), "a submitting client did not finish");
    }
    int[] readChecksums = new int[clients];
    for (int c = 0; c < clients; c++) {
      readChecksums[c] = Checksums.crc32c(remotes[c].asSlice(size, size));
    }
    int lost = 0;
    boolean[] wrote = new boolean[clients];
    for (Completion<Buffer> completion : completions.take(clients * perClient * 2)) {
      int id = completion.context().id();
      if (!completion.outcome().isDone() && losesCompletionsUnderLoad()) {
        assertTrue(
            isLostCompletion(completion),
            () -> "failed for another reason: " + completion.outcome().error());
        lost++;
        continue;
      }
      if (id >= 0) {
        wrote[id] = true;
      }
      int checksum = completion.outcome().done().checksum().orElseThrow();
      if (id >= 0) {
        assertEquals(Checksums.crc32c(completion.context().segment()), checksum);
      } else {
        assertEquals(readChecksums[-1 - id], checksum, "a read landed other bytes");
      }
    }
    if (lost > 0) {
      System.out.println(
          getClass().getSimpleName()
              + ": the provider lost completions; "
              + lost
              + " transfers failed by the completion deadline");
    }
    for (int c = 0; c < clients; c++) {
      if (!wrote[c] && losesCompletionsUnderLoad()) {
        continue; // none of this client's writes got through before the provider stalled
      }
      MemorySegment expected = arena.allocate(size);
      Patterns.fill(expected, c);
      assertEquals(Checksums.crc32c(expected), Checksums.crc32c(remotes[c].asSlice(0, size)));
    }
    assertEquals(0, service.outstanding());
  }

  @Test
  void removingAPeerWithTransfersOutstandingWaitsForThem() throws Exception {
    MemorySegment remote = exposable(target, 1 << 20);
    MemorySegment local = arena.allocate(1 << 20, 4096);
    Patterns.fill(local, 5);
    Advertisement ad = target.expose(remote, RemoteAccess.READ_WRITE).advertisement();
    service.addPeer(9, ad.address());
    for (int i = 0; i < 16; i++) {
      assertTrue(service.submit(request(9, ad, Direction.TO_PEER, new Buffer(i, local))));
    }
    service.removePeer(9);
    for (Completion<Buffer> completion : completions.take(16)) {
      assertTrue(completion.outcome().isDone(), () -> completion.outcome().error().getMessage());
    }
    // The client can come back: its peer is inserted again on its next transfer.
    assertTrue(service.submit(request(9, ad, Direction.TO_PEER, new Buffer(99, local))));
    assertTrue(completions.take().outcome().isDone());
    assertEquals(Checksums.crc32c(local), Checksums.crc32c(remote));
  }

  @Test
  void aTransferToADeadPeerFailsAtTheProgressDeadline() throws Exception {
    byte[] dead = deadPeerAddress();
    assumeTrue(dead != null, "this provider has no unreachable address to test with");
    restartService(Duration.ofMillis(50));
    // A new service is a new initiator: where targets must know theirs (efa-direct), tell it.
    target.insertPeer(service.localAddress());
    MemorySegment local = arena.allocate(64);
    local.fill((byte) 0xab);
    long started = System.nanoTime();
    assertTrue(
        service.submit(
            TransferRequest.write(1, new Advertisement(dead, 1, 0), new Buffer(0, local))));
    Completion<Buffer> completion = completions.take();
    assertFalse(completion.outcome().isDone());
    assertTrue(System.nanoTime() - started < TimeUnit.SECONDS.toNanos(30));
    // tcp;ofi_rxm answers -FI_EAGAIN for ever, so the deadline fails it; other providers may
    // refuse the post or fail the completion first. Either way it fails, and promptly.
    DmaException error = completion.outcome().error();
    assertNotNull(error.getMessage());
    deadPeerFailure(error);
    // The service keeps serving.
    MemorySegment remote = exposable(target, 64);
    Advertisement ad = target.expose(remote, RemoteAccess.READ_WRITE).advertisement();
    assertTrue(service.submit(request(2, ad, Direction.TO_PEER, new Buffer(1, local))));
    assertTrue(completions.take().outcome().isDone());
    assertEquals(Checksums.crc32c(local), Checksums.crc32c(remote));
  }

  @Test
  void aTargetThatClosesMidStreamFailsOnlyItsOwnTransfers() throws Exception {
    PassiveTarget doomed = PassiveTarget.start(configuration(), provider(), Duration.ZERO);
    doomed.insertPeer(service.localAddress());
    MemorySegment doomedMemory = exposable(doomed, 1 << 20);
    Advertisement doomedAd = doomed.expose(doomedMemory, RemoteAccess.READ_WRITE).advertisement();
    MemorySegment local = arena.allocate(1 << 20, 4096);
    Patterns.fill(local, 3);
    for (int i = 0; i < 32; i++) {
      assertTrue(service.submit(request(20, doomedAd, Direction.TO_PEER, new Buffer(i, local))));
    }
    doomed.close();
    // Every one of them completes, one way or the other: nothing hangs, nothing is lost.
    List<Completion<Buffer>> doomedCompletions = completions.take(32);
    assertEquals(32, doomedCompletions.size());
    // And the service still serves everyone else.
    MemorySegment remote = exposable(target, 1 << 20);
    Advertisement ad = target.expose(remote, RemoteAccess.READ_WRITE).advertisement();
    assertTrue(service.submit(request(21, ad, Direction.TO_PEER, new Buffer(100, local))));
    Completion<Buffer> fine = completions.take();
    assertTrue(fine.outcome().isDone(), () -> fine.outcome().error().getMessage());
    assertEquals(Checksums.crc32c(local), Checksums.crc32c(remote));
    assertEquals(0, service.outstanding());
  }

  /** Each bad request fails, and a good transfer to a fresh target afterwards still succeeds. */
  private void failsAloneThenServiceServes(
      boolean remoteWrite, long keyDelta, long addressDelta, long length) throws Exception {
    PassiveTarget victim = PassiveTarget.start(configuration(), provider(), Duration.ZERO);
    try {
      victim.insertPeer(service.localAddress());
      MemorySegment exposed = exposable(victim, 4096);
      RemoteAccess access = remoteWrite ? RemoteAccess.READ_WRITE : RemoteAccess.READ;
      Advertisement ad = victim.expose(exposed, access).advertisement();
      // The advertised length rides along, as a real client's advertisement carries it: a range
      // outside it is then refused before posting (the only check there is on shm).
      Advertisement bad =
          new Advertisement(
              ad.address(), ad.remoteKey() + keyDelta, ad.remoteAddress(), ad.lengthBytes());
      MemorySegment local = arena.allocate(length);
      local.fill((byte) 0x5a);
      TransferRequest<Buffer> badRequest =
          TransferRequest.builder(new Buffer(1, local))
              .clientId(30)
              .advertisement(bad)
              .remoteAddress(ad.remoteAddress() + addressDelta)
              .direction(Direction.TO_PEER)
              .build();
      assertTrue(service.submit(badRequest));
      Completion<Buffer> failed = completions.take();
      assertFalse(failed.outcome().isDone(), "a bad RMA completed successfully");
      DmaException error = failed.outcome().error();
      // The same mistake gives the same reason on every provider: a range outside the advertised
      // length is refused before posting, a refused key or access by the target.
      DmaException.Reason expected =
          addressDelta != 0 ? DmaException.Reason.BAD_REQUEST : refusedAccessReason();
      assertEquals(expected, error.reason(), error::toString);
      assertTrue(error.getMessage().contains("client 30"), error::getMessage);
      assertEquals(
          Checksums.crc32c(new byte[4096]), Checksums.crc32c(exposed), "the refused write landed");
    } finally {
      victim.close();
    }
    MemorySegment remote = exposable(target, 4096);
    Advertisement good = target.expose(remote, RemoteAccess.READ_WRITE).advertisement();
    MemorySegment local = arena.allocate(4096);
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

  /**
   * A read from an advertisement whose address the target never mapped (past the first page, below
   * {@code vm.mmap_min_addr}) fails that read alone, promptly and as {@code ACCESS_DENIED}, on
   * every provider: shm, which checks no range, says so three ways by version ({@code
   * ShmRefusalTest}).
   */
  @Test
  void aReadFromAnAddressTheTargetNeverMappedFailsThatReadOnlyWithinSeconds() throws Exception {
    MemorySegment remote = exposable(target, 4096);
    Advertisement ad = target.expose(remote, RemoteAccess.READ_WRITE).advertisement();
    // Served once, so connections and shm's names are set up as for a client already in use.
    MemorySegment local = arena.allocate(4096);
    assertTrue(service.submit(request(32, ad, Direction.fromPeer(4096), new Buffer(1, local))));
    Completion<Buffer> first = completions.take();
    assertTrue(first.outcome().isDone(), () -> first.outcome().error().getMessage());
    Advertisement wrong = new Advertisement(ad.address(), ad.remoteKey(), 0x8000, 4096);
    long start = System.nanoTime();
    assertTrue(service.submit(request(32, wrong, Direction.fromPeer(4096), new Buffer(2, local))));
    Completion<Buffer> failed = completions.take();
    long tookMs = (System.nanoTime() - start) / 1_000_000;
    assertFalse(failed.outcome().isDone(), "a read from an unmapped address completed");
    DmaException error = failed.outcome().error();
    assertEquals(DmaException.Reason.ACCESS_DENIED, error.reason(), error::toString);
    assertTrue(error.getMessage().contains("client 32"), error::getMessage);
    // Well inside the completion deadline, which the read would otherwise wait for on shm 1.x.
    assertTrue(tookMs < 1_500, "the failure took " + tookMs + " ms");
    Patterns.fill(remote, 12);
    assertTrue(service.submit(request(32, ad, Direction.fromPeer(4096), new Buffer(3, local))));
    Completion<Buffer> fine = completions.take();
    assertTrue(fine.outcome().isDone(), () -> fine.outcome().error().getMessage());
    assertEquals(Checksums.crc32c(remote), Checksums.crc32c(local));
  }

  @Test
  void aRegionExposedWithoutWriteAccessRefusesWrites() throws Exception {
    assumeTrue(enforcesAccess(), "this provider trusts every peer with every region");
    failsAloneThenServiceServes(false, 0, 0, 64);
  }

  /**
   * The README's client lifecycle, step by step, on a service of its own with a short progress
   * deadline: hello, serve, leave, restart under the same id with a new address, a stale transfer,
   * the restarted client dying and its incarnation marked unreachable, and a third incarnation
   * served at once.
   */
  @Test
  void theClientLifecycleOfTheReadmeHoldsAsWritten() throws Exception {
    restartService(Duration.ofMillis(200));
    long client = 70;
    MemorySegment local = arena.allocate(4096);
    Patterns.fill(local, 21);
    List<PassiveTarget> incarnations = new ArrayList<>();
    try {
      // 1. Hello, and 2. serve.
      PassiveTarget first = lifecycleTarget(incarnations);
      MemorySegment firstMemory = exposable(first, 4096);
      Advertisement firstAd = first.expose(firstMemory, RemoteAccess.READ_WRITE).advertisement();
      service.addPeer(client, firstAd.address());
      assertTrue(service.submit(request(client, firstAd, Direction.TO_PEER, new Buffer(1, local))));
      assertDone(completions.take());
      assertEquals(Checksums.crc32c(local), Checksums.crc32c(firstMemory));

      // 3. Leave (another client): no more transfers for it, then removePeer; its address leaves
      //    the address vector.
      PassiveTarget leaver = lifecycleTarget(incarnations);
      MemorySegment leaverMemory = exposable(leaver, 4096);
      Advertisement leaverAd = leaver.expose(leaverMemory, RemoteAccess.READ_WRITE).advertisement();
      service.addPeer(client + 1, leaverAd.address());
      assertTrue(
          service.submit(request(client + 1, leaverAd, Direction.TO_PEER, new Buffer(7, local))));
      assertDone(completions.take());
      service.removePeer(client + 1);
      leaver.close();

      // 4. The first client restarts (no goodbye) with a new address under the same id: served at
      //    once.
      first.close();
      PassiveTarget second = lifecycleTarget(incarnations);
      MemorySegment secondMemory = exposable(second, 4096);
      Advertisement secondAd = second.expose(secondMemory, RemoteAccess.READ_WRITE).advertisement();
      service.addPeer(client, secondAd.address());
      assertTrue(
          service.submit(request(client, secondAd, Direction.TO_PEER, new Buffer(2, local))));
      assertDone(completions.take());
      assertEquals(Checksums.crc32c(local), Checksums.crc32c(secondMemory));
      //    A transfer still carrying the old address is stale: refused, nothing posted.
      assertTrue(service.submit(request(client, firstAd, Direction.TO_PEER, new Buffer(3, local))));
      Completion<Buffer> stale = completions.take();
      assertFalse(stale.outcome().isDone());
      assertEquals(DmaException.Reason.BAD_REQUEST, stale.outcome().error().reason());
      assertEquals(0, stale.posts());

      // 5. The second incarnation dies: transfers to it fail, until one passes the progress
      //    deadline and marks it unreachable; after that they fail at once.
      second.close();
      boolean marked = false;
      for (int attempt = 0; attempt < 20 && !marked; attempt++) {
        assertTrue(
            service.submit(request(client, secondAd, Direction.TO_PEER, new Buffer(4, local))));
        Completion<Buffer> failed = completions.take();
        assertFalse(failed.outcome().isDone(), "a write to a closed target succeeded");
        DmaException.Reason reason = failed.outcome().error().reason();
        assertTrue(
            reason == DmaException.Reason.DEADLINE
                || reason == DmaException.Reason.ACCESS_DENIED
                || reason == DmaException.Reason.PEER_UNREACHABLE,
            failed.outcome().error()::toString);
        marked = reason != DmaException.Reason.ACCESS_DENIED;
      }
      assertTrue(marked, "the dead incarnation was never marked unreachable");
      long before = System.nanoTime();
      assertTrue(
          service.submit(request(client, secondAd, Direction.TO_PEER, new Buffer(5, local))));
      Completion<Buffer> atOnce = completions.take();
      assertEquals(DmaException.Reason.PEER_UNREACHABLE, atOnce.outcome().error().reason());
      assertEquals(0, atOnce.posts());
      assertTrue(System.nanoTime() - before < TimeUnit.MILLISECONDS.toNanos(150));

      //    The client comes back with a third address under the same id: served at once.
      PassiveTarget third = lifecycleTarget(incarnations);
      MemorySegment thirdMemory = exposable(third, 4096);
      Advertisement thirdAd = third.expose(thirdMemory, RemoteAccess.READ_WRITE).advertisement();
      assertTrue(service.submit(request(client, thirdAd, Direction.TO_PEER, new Buffer(6, local))));
      assertDone(completions.take());
      assertEquals(Checksums.crc32c(local), Checksums.crc32c(thirdMemory));
      assertEquals(0, service.outstanding());
    } finally {
      closeAll(incarnations);
    }
  }

  /**
   * Requests that carry the {@link Peer} {@code addPeer} returned (the form a server with many
   * clients uses, posted without a lookup) move exactly the bytes requests without one move, in
   * both directions; after the client restarts under its id, its new peer is served and a request
   * still carrying the old peer is refused as stale without a post, as one carrying only the old
   * address is; after removePeer, the new peer's next request inserts the client again.
   */
  @Test
  void requestsCarryingTheirPeerMoveTheSameBytesAndAnOldPeerIsStale() throws Exception {
    long client = 80;
    List<PassiveTarget> incarnations = new ArrayList<>();
    MemorySegment local = arena.allocate(4096);
    try {
      PassiveTarget first = lifecycleTarget(incarnations);
      MemorySegment firstMemory = exposable(first, 4096);
      Advertisement firstAd = first.expose(firstMemory, RemoteAccess.READ_WRITE).advertisement();
      Peer firstPeer = service.addPeer(client, firstAd.address());
      assertEquals(client, firstPeer.clientId());
      for (int i = 0; i < 100; i++) {
        Patterns.fill(local, 100 + i);
        assertTrue(
            service.submit(
                TransferRequest.write(firstPeer, firstAd, new Buffer(i, local))
                    .withChecksum(Checksum.CRC32C)));
        Completion<Buffer> written = completions.take();
        assertDone(written);
        assertEquals(Checksums.crc32c(local), Checksums.crc32c(firstMemory), "write " + i);
      }
      MemorySegment landing = arena.allocate(4096);
      assertTrue(
          service.submit(
              TransferRequest.read(firstPeer, firstAd, 4096, new Buffer(100, landing))
                  .withChecksum(Checksum.CRC32C)));
      assertDone(completions.take());
      assertEquals(Checksums.crc32c(firstMemory), Checksums.crc32c(landing), "the bytes read");

      // The client restarts under its id with a new address.
      first.close();
      PassiveTarget second = lifecycleTarget(incarnations);
      MemorySegment secondMemory = exposable(second, 4096);
      Advertisement secondAd = second.expose(secondMemory, RemoteAccess.READ_WRITE).advertisement();
      Peer secondPeer = service.addPeer(client, secondAd.address());
      Patterns.fill(local, 7);
      assertTrue(
          service.submit(TransferRequest.write(secondPeer, secondAd, new Buffer(101, local))));
      assertDone(completions.take());
      assertEquals(Checksums.crc32c(local), Checksums.crc32c(secondMemory));
      assertTrue(service.submit(TransferRequest.write(firstPeer, firstAd, new Buffer(102, local))));
      Completion<Buffer> stale = completions.take();
      assertFalse(stale.outcome().isDone());
      assertEquals(DmaException.Reason.BAD_REQUEST, stale.outcome().error().reason());
      assertEquals(0, stale.posts());

      service.removePeer(client);
      Patterns.fill(local, 8);
      assertTrue(
          service.submit(TransferRequest.write(secondPeer, secondAd, new Buffer(103, local))));
      assertDone(completions.take());
      assertEquals(Checksums.crc32c(local), Checksums.crc32c(secondMemory));
      assertEquals(0, service.outstanding());
    } finally {
      closeAll(incarnations);
    }
  }

  /**
   * Whether the provider can tell that a peer's endpoint is gone (its address refuses connections,
   * its shm region or process is gone), so a stale advertisement fails {@link
   * DmaException.Reason#PEER_UNREACHABLE} at once; EFA cannot look, and ends it at a deadline.
   */
  protected boolean tellsAGonePeer() {
    return true;
  }

  /**
   * A stale advertisement: the client restarted (its endpoint closed, a new one opened) and the
   * server still holds the old advertisement. A transfer carrying it fails the same way on every
   * provider that can tell, {@code PEER_UNREACHABLE}, well before the progress deadline (2 s here)
   * or the completion deadline; its incarnation is marked unreachable, so the next one fails at
   * once without a post; and the client's new incarnation is served. With a connection (or an shm
   * insert) to the old endpoint from transfers before the restart, and without one.
   */
  @ParameterizedTest(name = "served before the restart: {0}")
  @ValueSource(booleans = {true, false})
  void aStaleAdvertisementAfterARestartFailsPeerUnreachablePromptly(boolean servedBefore)
      throws Exception {
    restartService(Duration.ofSeconds(2));
    long client = 90;
    MemorySegment local = arena.allocate(4096);
    Patterns.fill(local, 31);
    List<PassiveTarget> incarnations = new ArrayList<>();
    try {
      PassiveTarget before = lifecycleTarget(incarnations);
      Advertisement stale =
          before.expose(exposable(before, 4096), RemoteAccess.READ_WRITE).advertisement();
      if (servedBefore) {
        assertTrue(service.submit(request(client, stale, Direction.TO_PEER, new Buffer(1, local))));
        assertDone(completions.take());
      }
      // The client restarts: its endpoint closes, a new one opens, and its hello is still on the
      // way.
      before.close();
      PassiveTarget after = lifecycleTarget(incarnations);
      MemorySegment afterMemory = exposable(after, 4096);
      Advertisement current = after.expose(afterMemory, RemoteAccess.READ_WRITE).advertisement();

      long started = System.nanoTime();
      assertTrue(service.submit(request(client, stale, Direction.TO_PEER, new Buffer(2, local))));
      Completion<Buffer> failed = completions.take();
      long tookMs = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - started);
      assertFalse(failed.outcome().isDone(), "a write to a closed endpoint succeeded");
      DmaException error = failed.outcome().error();
      if (!tellsAGonePeer()) {
        assertTrue(
            error.reason() == DmaException.Reason.DEADLINE
                || error.reason() == DmaException.Reason.PEER_UNREACHABLE,
            error::toString);
        return;
      }
      assertEquals(DmaException.Reason.PEER_UNREACHABLE, error.reason(), error::toString);
      assertTrue(error.getMessage().startsWith("client 90 at "), error::getMessage);
      assertTrue(tookMs < 1000, "took " + tookMs + " ms, not before the progress deadline");

      // Marked: the next transfer with the stale advertisement fails at once, never posted.
      assertTrue(service.submit(request(client, stale, Direction.TO_PEER, new Buffer(3, local))));
      Completion<Buffer> atOnce = completions.take();
      assertEquals(
          DmaException.Reason.PEER_UNREACHABLE,
          atOnce.outcome().error().reason(),
          atOnce.outcome().error()::toString);
      assertEquals(0, atOnce.posts());

      // The client's hello arrives: its new incarnation is served.
      assertTrue(service.submit(request(client, current, Direction.TO_PEER, new Buffer(4, local))));
      assertDone(completions.take());
      assertEquals(Checksums.crc32c(local), Checksums.crc32c(afterMemory));
      assertEquals(0, service.outstanding());
    } finally {
      closeAll(incarnations);
    }
  }

  /** Replaces the suite's service with one whose progress deadline is {@code progressDeadline}. */
  private void restartService(Duration progressDeadline) {
    service.close();
    service =
        FabricService.<Buffer>builder(
                configuration().toBuilder().progressDeadline(progressDeadline).build())
            .provider(provider())
            .completer(completions)
            .start();
  }

  /** Closes the service (so {@link #close()} does not) and then every target a case opened. */
  private void closeAll(List<PassiveTarget> incarnations) {
    service.close();
    service = null;
    for (PassiveTarget each : incarnations) {
      each.close();
    }
  }

  private PassiveTarget lifecycleTarget(List<PassiveTarget> opened) {
    PassiveTarget target = PassiveTarget.start(configuration(), provider(), Duration.ZERO);
    opened.add(target);
    target.insertPeer(service.localAddress());
    return target;
  }

  private static void assertDone(Completion<Buffer> completion) {
    assertTrue(completion.outcome().isDone(), () -> completion.outcome().error().toString());
  }

  @Test
  void garbageAndTruncatedAddressesFailAddPeer() {
    byte[] own = service.localAddress();
    byte[] truncated = java.util.Arrays.copyOf(own, own.length - 1);
    byte[] longer = java.util.Arrays.copyOf(own, own.length + 5);
    byte[] garbage = new byte[own.length];
    java.util.Arrays.fill(garbage, (byte) 0xee);
    List<byte[]> bad = new ArrayList<>(List.of(new byte[] {1}, truncated, longer));
    if (garbageAddressRefused()) {
      bad.add(garbage);
    }
    for (byte[] address : bad) {
      DmaException error = assertThrows(DmaException.class, () -> service.addPeer(40, address));
      assertEquals(DmaException.Kind.FABRIC, error.kind());
      assertNotNull(error.getMessage());
    }
    // The service is unharmed.
    service.addPeer(41, target.localAddress());
    service.addPeer(41, target.localAddress());
    service.removePeer(41);
  }
}
