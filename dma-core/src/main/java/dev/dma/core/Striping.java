package dev.dma.core;

import dev.dma.api.BatchCompleter;
import dev.dma.api.CacheableSpan;
import dev.dma.api.Checksum;
import dev.dma.api.Checksums;
import dev.dma.api.Completion;
import dev.dma.api.Direction;
import dev.dma.api.DmaException;
import dev.dma.api.MemoryKind;
import dev.dma.api.Operands;
import dev.dma.api.Outcome;
import dev.dma.api.TransferDone;
import dev.dma.api.TransferRequest;
import dev.dma.core.DmaService.Offer;
import dev.dma.core.internal.FabricWorker;
import dev.dma.core.internal.Intake;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Executor;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.jspecify.annotations.Nullable;

/**
 * A {@link FabricServiceGroup}'s striping: cuts a transfer of at least the threshold into
 * page-aligned chunks, holds room for every chunk before it asks the caller for anything, makes the
 * whole-request checks once ({@link Intake}), offers the chunks on consecutive devices, and, as
 * every service's completer ({@link Router}), turns the chunks' completions back into the
 * transfer's one completion ({@link Stripe}). The rules a caller sees are the group's (its class
 * comment, "Striping"); this file is how they are kept.
 *
 * <p>Threads: {@link #offer} runs on the submitting thread; {@link Router} on every device's worker
 * and checksum-pool threads, possibly at once; a {@link Stripe} is shared by them and counts down
 * atomically. Ownership: the group owns its services and pool; this holds them only to use them.
 * Nothing here runs for a transfer below the threshold.
 *
 * @param <T> the caller context type
 */
final class Striping<T extends Operands> {
  private final FabricServiceGroup<T> group;
  private final FabricService<T>[] array;
  private final List<String> devices;
  private final ChecksumPool pool;
  private final Router<T> router;
  private final Rails<T> rails;
  private final long thresholdBytes;
  private final int chunks;
  // A stepped group's deliveries (Stepping, test-only); null in production.
  private final @Nullable Executor steppedDeliveries;

  Striping(
      FabricServiceGroup<T> group,
      FabricService<T>[] array,
      List<String> devices,
      ChecksumPool pool,
      Router<T> router,
      Rails<T> rails,
      long thresholdBytes,
      int chunks,
      @Nullable Executor steppedDeliveries) {
    this.steppedDeliveries = steppedDeliveries;
    this.group = group;
    this.rails = rails;
    this.array = array;
    this.devices = devices;
    this.pool = pool;
    this.router = router;
    this.thresholdBytes = thresholdBytes;
    this.chunks = chunks;
  }

  /**
   * Offers {@code request} striped when it reaches the threshold and is long enough for two aligned
   * chunks; otherwise answers null, and the group offers it whole. A write's source is asked here
   * once, to size it.
   */
  @Nullable Offer offer(TransferRequest<T> request) {
    if (request.direction() instanceof Direction.FromPeer(long lengthBytes)) {
      return lengthBytes >= thresholdBytes ? offerStriped(request, lengthBytes, null) : null;
    }
    MemorySegment source = sourceOrNull(request.context());
    return source != null && source.byteSize() >= thresholdBytes
        ? offerStriped(request, source.byteSize(), source)
        : null;
  }

  /**
   * A write's source, to size it; null when there is none or asking threw. Either way the transfer
   * is then not striped: the worker asks again and fails it with the usual text.
   */
  private static @Nullable MemorySegment sourceOrNull(Operands context) {
    try {
      return context.source();
    } catch (Throwable callerBug) {
      // An Error included: the worker asks again and fails only this transfer (Intake).
      return null;
    }
  }

  /**
   * Offers a striped transfer of {@code length} bytes; {@code source} is a write's source, asked
   * once already, and null for a read.
   *
   * <p>The order is what makes it one transfer. First room for every chunk, so that FULL leaves
   * nothing to undo: a read's {@code allocate} is asked only once the group will accept, so a
   * caller's retry after FULL asks it for the first time, and an accepted request was asked exactly
   * once. Then the whole-request checks the worker would make on an unstriped transfer, in the
   * worker's order and with its texts, so that no chunk is posted for a request that would be
   * refused. Then the chunks.
   */
  private @Nullable Offer offerStriped(
      TransferRequest<T> request, long length, @Nullable MemorySegment source) {
    long chunkBytes =
        ceilDiv(ceilDiv(length, chunks), FabricServiceGroup.STRIPE_ALIGNMENT)
            * FabricServiceGroup.STRIPE_ALIGNMENT;
    int count = (int) ceilDiv(length, chunkBytes);
    if (count < 2) {
      return null;
    }
    int[] placed = new int[count];
    Offer room = reserve(placed);
    if (room != Offer.ACCEPTED) {
      return room;
    }
    // Accepted from here on: every outcome is the request's one completion.
    MemorySegment operand;
    try {
      operand = Intake.checkedOperand(request, source, array[0].peerText());
    } catch (DmaException refused) {
      for (int device : placed) {
        array[device].release();
      }
      deliverOffThread(new Completion<>(request.context(), Outcome.failed(refused), 0, count));
      return Offer.ACCEPTED;
    }
    Stripe<T> stripe = new Stripe<>(request, count, length);
    for (int i = 0; i < count; i++) {
      long offset = i * chunkBytes;
      long size = Math.min(chunkBytes, length - offset);
      Chunk chunk = new Chunk(stripe, i, placed[i], operand.asSlice(offset, size));
      Direction direction =
          request.direction() instanceof Direction.FromPeer
              ? Direction.fromPeer(size)
              : Direction.TO_PEER;
      TransferRequest<Chunk> part =
          new TransferRequest<>(
              request.clientId(),
              request.peerAddress(),
              request.remoteKey(),
              request.remoteAddress() + offset,
              direction,
              request.checksum(),
              chunk,
              request.remoteBase(),
              request.remoteLength(),
              request.retryWrite(),
              request.peer());
      if (offerChunk(part, placed[i]) != Offer.ACCEPTED) {
        // Its room was held, so only a worker that went away since refuses it.
        stripe.chunkDone(
            i,
            Outcome.failed(
                DmaException.fabric(
                    DmaException.Reason.CLOSED,
                    FabricWorker.WORKER_GONE + ": device " + devices.get(placed[i]))),
            0,
            0L);
      }
    }
    Completion<T> whole = stripe.submitted();
    if (whole != null) {
      // Every chunk finished (or was refused) before this thread let go of the stripe.
      deliverOffThread(whole);
    }
    return Offer.ACCEPTED;
  }

  /**
   * Takes room for one chunk per slot of {@code placed}, each on device {@code start + i} or, when
   * that one is full or gone, the next with room; fills in the devices. FULL or CLOSED (as {@link
   * FabricServiceGroup#offer} answers them, for the first chunk that found no room) gives every
   * room back. While a device is paused ({@link Rails}) and another is healthy, no chunk goes to
   * it: the healthy devices carry its share.
   */
  private Offer reserve(int[] placed) {
    int start = group.choose();
    boolean avoiding = rails.anyPaused();
    for (int i = 0; i < placed.length; i++) {
      Offer answer = Offer.CLOSED;
      int device = -1;
      for (int j = 0; j < array.length && device < 0; j++) {
        int candidate = (start + i + j) % array.length;
        if (avoiding && rails.avoid(candidate)) {
          continue;
        }
        Offer room = array[candidate].reserve();
        if (room == Offer.ACCEPTED) {
          device = candidate;
        } else if (room == Offer.FULL) {
          answer = room;
        }
      }
      if (device < 0) {
        for (int k = 0; k < i; k++) {
          array[placed[k]].release();
        }
        return answer;
      }
      placed[i] = device;
    }
    return Offer.ACCEPTED;
  }

  /**
   * Delivers a striped transfer's completion that the submitting thread would otherwise deliver (a
   * refusal at intake, or the last chunk finished before the submitter let go): on a checksum pool
   * thread, where checksummed completions are delivered anyway, so the completer never runs inside
   * {@link FabricServiceGroup#offer} (where it could re-enter the caller's locks or recurse into
   * offer). A pool that is closing runs a job on the submitting thread; that job starts a thread of
   * its own.
   */
  private void deliverOffThread(Completion<T> completion) {
    Executor stepped = steppedDeliveries;
    if (stepped != null) {
      stepped.execute(() -> router.deliver(completion));
      return;
    }
    Thread submitter = Thread.currentThread();
    pool.submit(
        () -> {
          if (Thread.currentThread() == submitter) {
            Thread.ofPlatform()
                .name("dma-stripe-completion")
                .daemon(true)
                .start(() -> router.deliver(completion));
          } else {
            router.deliver(completion);
          }
        });
  }

  // A chunk rides a service typed for T: contexts are only ever used as Operands there, and the
  // router takes every Chunk out of the batches before the caller's completer sees them.
  @SuppressWarnings("unchecked")
  private Offer offerChunk(TransferRequest<Chunk> part, int device) {
    return array[device].offerReserved((TransferRequest<T>) (TransferRequest<?>) part);
  }

  private static long ceilDiv(long value, long divisor) {
    return (value + divisor - 1) / divisor;
  }

  /**
   * The local end of one chunk of a striped transfer: a slice of the whole operand. Its methods run
   * on the worker of the device that carries it.
   */
  private static final class Chunk implements Operands {
    final Stripe<?> stripe;
    final int index;
    // The device it was offered to, for the transfer's device count.
    final int device;
    private final MemorySegment slice;

    Chunk(Stripe<?> stripe, int index, int device, MemorySegment slice) {
      this.stripe = stripe;
      this.index = index;
      this.device = device;
      this.slice = slice;
    }

    @Override
    public MemorySegment source() {
      return slice;
    }

    @Override
    public MemorySegment allocate(long lengthBytes) {
      return slice;
    }

    @Override
    public @Nullable CacheableSpan cacheableSpan() {
      return stripe.context.cacheableSpan();
    }

    @Override
    public MemoryKind memoryKind() {
      return stripe.context.memoryKind();
    }

    @Override
    public String toString() {
      return "chunk " + index + " of " + stripe.context;
    }
  }

  /**
   * One striped transfer in flight: counts its chunks down, keeps the first error and every chunk's
   * CRC-32C. Chunks finish on several threads at once; the one that counts to zero builds the
   * transfer's one completion. The count starts one above the chunks: the submitting thread holds
   * that share until it has offered every chunk, so no chunk finishing early can complete the
   * transfer while it is still being offered, and the submitter learns when it let go last. The
   * counter's decrements publish each chunk's CRC, and the submitter's tally, to whoever ends it.
   */
  private static final class Stripe<T extends Operands> {
    final T context;
    private final TransferRequest<T> request;
    private final AtomicInteger remaining;
    private final AtomicReference<ChunkError> firstError = new AtomicReference<>();
    // The chunks' posts, summed: the transfer's Completion.posts, and whether a write may have
    // changed the target.
    private final AtomicInteger posts = new AtomicInteger();
    private final AtomicInteger chunksPosted = new AtomicInteger();
    // The devices that posted a chunk, one bit each: the transfer's Completion.devices.
    private final AtomicLong devicesPosted = new AtomicLong();
    private final int[] crcs;
    private final long[] lengths;
    private final long lengthBytes;
    private final boolean checksummed;

    Stripe(TransferRequest<T> request, int chunks, long lengthBytes) {
      this.request = request;
      this.context = request.context();
      this.remaining = new AtomicInteger(chunks + 1);
      this.crcs = new int[chunks];
      this.lengths = new long[chunks];
      this.lengthBytes = lengthBytes;
      this.checksummed = request.checksum() == Checksum.CRC32C;
    }

    /**
     * The submitting thread: every chunk was offered. Answers the transfer's completion when every
     * chunk had already finished, else null.
     */
    @Nullable Completion<T> submitted() {
      return countDown();
    }

    /**
     * Records one chunk's end; answers the transfer's completion when it was the last, else null.
     */
    @Nullable Completion<T> chunkDone(int index, Outcome outcome, int chunkPosts, long devices) {
      if (chunkPosts > 0) {
        posts.addAndGet(chunkPosts);
        chunksPosted.incrementAndGet();
        devicesPosted.getAndAccumulate(devices, (a, b) -> a | b);
      }
      if (outcome instanceof TransferDone done) {
        crcs[index] = done.checksum().orElse(0);
        lengths[index] = done.bytes();
      } else {
        firstError.compareAndSet(null, new ChunkError(index, outcome.error()));
      }
      return countDown();
    }

    private @Nullable Completion<T> countDown() {
      if (remaining.decrementAndGet() != 0) {
        return null;
      }
      // A chunk moved to another device counts every device that carried it, posted or not (one
      // may refuse it at intake): never more devices than posts, as for a transfer not striped.
      int posted = posts.get();
      return new Completion<>(
          context,
          aggregate(),
          posted,
          crcs.length,
          Math.min(posted, Long.bitCount(devicesPosted.get())));
    }

    private Outcome aggregate() {
      ChunkError error = firstError.get();
      if (error != null) {
        return Outcome.failed(failure(error));
      }
      if (!checksummed) {
        return TransferDone.of(lengthBytes);
      }
      int crc = crcs[0];
      for (int i = 1; i < crcs.length; i++) {
        crc = Checksums.crc32cCombine(crc, crcs[i], lengths[i]);
      }
      return TransferDone.withChecksum(lengthBytes, crc);
    }

    /**
     * The request's failure, from its first chunk error: the chunk's kind, reason and error numbers
     * (so {@code retryable()} is the chunk's), the text naming the request as submitted and the
     * chunk, and what the target's memory may hold.
     *
     * <p>This is the one place that decides the last: a striped write any of whose chunks was
     * posted may have landed in part even though the request failed ({@link
     * DmaException.TargetMemory#MAY_HAVE_CHANGED}); one none of whose chunks was posted (refused
     * whole, or every chunk refused at its worker's intake) changed nothing.
     */
    private DmaException failure(ChunkError first) {
      boolean write = request.direction() instanceof Direction.ToPeer;
      int chunks = crcs.length;
      int posted = chunksPosted.get();
      boolean targetMayHaveChanged = write && posted > 0;
      String memory;
      if (!write) {
        memory = "";
      } else if (targetMayHaveChanged) {
        memory =
            "; "
                + posted
                + " of "
                + chunks
                + " chunks were posted, so the target's memory may have changed";
      } else {
        memory = "; no chunk was posted, so the target's memory is unchanged";
      }
      DmaException cause = first.error();
      return withTarget(
          targetMayHaveChanged,
          new DmaException(
              cause.kind(),
              cause.reason(),
              (write ? "striped write of " : "striped read of ")
                  + lengthBytes
                  + " bytes at remote address "
                  + Long.toUnsignedString(request.remoteAddress())
                  + ", chunk "
                  + first.index()
                  + " of "
                  + chunks
                  + ": "
                  + cause.getMessage()
                  + memory,
              cause.fabricErrno(),
              cause.providerErrno(),
              cause));
    }

    private static DmaException withTarget(boolean mayHaveChanged, DmaException error) {
      return error.withTargetMemory(
          mayHaveChanged
              ? DmaException.TargetMemory.MAY_HAVE_CHANGED
              : DmaException.TargetMemory.UNCHANGED);
    }
  }

  /** The first chunk of a striped transfer to fail, and why. */
  private record ChunkError(int index, DmaException error) {}

  /**
   * Every service's completer: passes batches without the group's own contexts straight to the
   * caller's completer (no allocation); replaces chunks by their transfer's one completion once the
   * last is in, and a transfer the group posted again or as a probe ({@link Rails.Moved}) by the
   * caller's completion counting every device's posts.
   */
  static final class Router<T extends Operands> implements BatchCompleter<T> {
    private static final System.Logger LOG = System.getLogger(FabricServiceGroup.class.getName());
    private final BatchCompleter<T> completer;
    private final Rails<T> rails;

    Router(BatchCompleter<T> completer, Rails<T> rails) {
      this.completer = completer;
      this.rails = rails;
    }

    private static boolean ours(Object context) {
      return context instanceof Chunk || context instanceof Rails.Moved;
    }

    @Override
    public void complete(List<Completion<T>> batch) {
      int size = batch.size();
      int i = 0;
      while (i < size && !ours(batch.get(i).context())) {
        i++;
      }
      if (i == size) {
        completer.complete(batch);
        return;
      }
      List<Completion<T>> out = new ArrayList<>(size);
      for (int j = 0; j < size; j++) {
        Completion<T> each = batch.get(j);
        Object context = each.context();
        int posts = each.posts();
        long devices = 0;
        if (context instanceof Rails.Moved moved) {
          if (moved.probeOf >= 0 && each.outcome().isDone()) {
            rails.probeSucceeded(moved.probeOf);
          } else if (moved.probeOf >= 0
              && !moved.probeJudged
              && rails.probeRefused(moved, each.outcome().error())) {
            // Posted again elsewhere: that post's completion is the caller's one.
            continue;
          }
          context = moved.context;
          posts += moved.priorPosts;
          devices = moved.devices;
        }
        if (context instanceof Chunk chunk) {
          @SuppressWarnings("unchecked")
          Stripe<T> stripe = (Stripe<T>) chunk.stripe;
          long carried = devices != 0 ? devices : 1L << chunk.device;
          Completion<T> whole = stripe.chunkDone(chunk.index, each.outcome(), posts, carried);
          if (whole != null) {
            out.add(whole);
          }
        } else if (devices != 0) {
          @SuppressWarnings("unchecked")
          T caller = (T) context;
          out.add(
              new Completion<>(
                  caller,
                  each.outcome(),
                  posts,
                  1,
                  Math.min(posts, Math.max(1, Long.bitCount(devices)))));
        } else {
          out.add(each);
        }
      }
      if (!out.isEmpty()) {
        completer.complete(out);
      }
    }

    /** Delivers one completion outside a worker's batch (see {@link Striping#deliverOffThread}). */
    void deliver(Completion<T> completion) {
      try {
        completer.complete(List.of(completion));
      } catch (RuntimeException thrown) {
        LOG.log(
            System.Logger.Level.WARNING,
            "the completer threw; the completion is delivered",
            thrown);
      }
    }
  }
}
