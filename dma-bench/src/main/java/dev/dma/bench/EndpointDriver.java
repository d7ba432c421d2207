package dev.dma.bench;

import dev.dma.api.Completion;
import dev.dma.api.Direction;
import dev.dma.api.DmaConfiguration;
import dev.dma.api.DmaException;
import dev.dma.api.Outcome;
import dev.dma.api.TransferDone;
import dev.dma.api.TransferRequest;
import dev.dma.core.FabricProviders;
import dev.dma.spi.CompletionSink;
import dev.dma.spi.EndpointInfo;
import dev.dma.spi.FabricEndpoint;
import dev.dma.spi.FabricProvider;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.Callable;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.Supplier;

/**
 * {@code run --endpoint-only}: the provider's {@link FabricEndpoint} driven from one thread with no
 * dma core in between, in the shape of the C anchor's loop (post until refused or the window is
 * full, reap up to ten completions, hand them to the {@link ClosedLoop}, which resubmits at once).
 * A diagnostic: set beside a plain run and the C anchor, it splits what a transfer costs into what
 * Java, FFM and the endpoint cost and what the core (service, worker channel, worker pass,
 * accounting) adds.
 *
 * <p>It keeps none of the core's promises: no deadlines, no recovery from a lost peer, no operand
 * bounds checks, no registration cache (the one buffer is registered once). A failed post or
 * completion completes that transfer with the provider's error; nothing is retried.
 *
 * <p>Threads: the endpoint's owner is this driver's own thread ({@code dma-bench-endpoint}), which
 * opens it, inserts peers, registers the buffer, runs the loop and closes it; the controlling
 * thread's calls hand their step to it and wait at most {@link #STEP} for it. {@link #submit} is
 * called by the {@link ClosedLoop} on this thread (resubmissions) and by the controlling thread (a
 * point's first transfers), which go through a concurrent queue.
 */
final class EndpointDriver implements AutoCloseable {
  /**
   * The most any hand-over to the driver's thread waits: each set-up step, the loop's end, close.
   */
  static final Duration STEP = Duration.ofSeconds(30);

  /** Completions reaped per call, as the worker reaps. */
  private static final int REAP_MAX = 10;

  private final ExecutorService thread;
  private final Duration step;
  private final ClosedLoop loop;
  private final FabricEndpoint endpoint;
  private final byte[] localAddress;
  private final EndpointInfo info;
  private final int cap;

  // The driver's thread only, once the loop runs.
  private final ArrayDeque<TransferRequest<ClosedLoop.Slot>> pending = new ArrayDeque<>();
  private final List<Completion<ClosedLoop.Slot>> batch = new ArrayList<>();
  private final int[] freeSlots;
  private int freeCount;
  private final TransferRequest<?>[] posted;
  private final long[] postedLength;
  private long[] peers = new long[8];
  private TransferDone lastDone;
  private long registration;
  private long registeredBase;
  private long registeredEnd;
  private long descriptor;

  private final ConcurrentLinkedQueue<TransferRequest<ClosedLoop.Slot>> inbox =
      new ConcurrentLinkedQueue<>();
  private volatile Thread loopThread;
  private volatile boolean closing;
  private boolean loopEnded; // written under this, by the driver's thread
  private Future<?> running;

  private final CompletionSink sink =
      new CompletionSink() {
        @Override
        public void completed(int slot) {
          long length = postedLength[slot];
          TransferDone done = lastDone;
          if (done == null || done.bytes() != length) {
            done = TransferDone.of(length);
            lastDone = done;
          }
          batch.add(new Completion<>(release(slot), done, 1));
        }

        @Override
        public void failed(int slot, int errno, int providerErrno, String message) {
          DmaException error =
              DmaException.fabric(
                  DmaException.Reason.ofErrno(errno),
                  "completion failed: " + message + " (provider errno " + providerErrno + ")");
          batch.add(new Completion<>(release(slot), Outcome.failed(error), 1));
        }
      };

  private EndpointDriver(
      ExecutorService thread, Duration step, ClosedLoop loop, FabricEndpoint endpoint, int window) {
    this.thread = thread;
    this.step = step;
    this.loop = loop;
    this.endpoint = endpoint;
    this.localAddress = endpoint.localAddress();
    this.info = endpoint.describe();
    this.cap = Math.max(1, Math.min(window, endpoint.maxTx()));
    endpoint.openSlots(cap);
    freeSlots = new int[cap];
    for (int i = 0; i < cap; i++) {
      freeSlots[i] = cap - 1 - i;
    }
    freeCount = cap;
    posted = new TransferRequest<?>[cap];
    postedLength = new long[cap];
  }

  /**
   * Opens an endpoint on a new driver thread and binds {@code loop} to it.
   *
   * @param configuration the run's configuration
   * @param provider the provider it selected
   * @param loop the loop that times and resubmits
   * @param window the most transfers to keep posted (also bounded by the endpoint's {@code maxTx})
   * @return the driver, owning its thread and endpoint
   */
  static EndpointDriver open(
      DmaConfiguration configuration, FabricProvider provider, ClosedLoop loop, int window) {
    DmaConfiguration resolved = FabricProviders.resolve(configuration, provider);
    return open(() -> provider.open(resolved), loop, window, STEP);
  }

  /**
   * As {@link #open(DmaConfiguration, FabricProvider, ClosedLoop, int)}, from any opener and with
   * {@code step} in place of {@link #STEP} (a test's scripted endpoint and shorter bound).
   *
   * @param opener opens the endpoint, called on the driver's thread
   * @param loop the loop that times and resubmits
   * @param window the most transfers to keep posted
   * @param step the most each hand-over to the driver's thread waits
   * @return the driver, owning its thread and endpoint
   */
  static EndpointDriver open(
      Supplier<FabricEndpoint> opener, ClosedLoop loop, int window, Duration step) {
    ExecutorService thread =
        Executors.newSingleThreadExecutor(
            runnable -> {
              Thread t = new Thread(runnable, "dma-bench-endpoint");
              t.setDaemon(true);
              return t;
            });
    try {
      EndpointDriver driver =
          await(
              thread,
              step,
              () -> {
                FabricEndpoint endpoint = opener.get();
                try {
                  return new EndpointDriver(thread, step, loop, endpoint, window);
                } catch (RuntimeException e) {
                  endpoint.close();
                  throw e;
                }
              });
      loop.bind(driver);
      return driver;
    } catch (RuntimeException e) {
      thread.shutdownNow();
      throw e;
    }
  }

  /** The endpoint's fabric address. */
  byte[] localAddress() {
    return localAddress.clone();
  }

  /** What the endpoint runs on. */
  EndpointInfo endpointInfo() {
    return info;
  }

  /** The most transfers posted at once. */
  int inFlightCap() {
    return cap;
  }

  /**
   * Inserts a peer for {@code clientId}, before the first point.
   *
   * @param clientId a small positive id (the bench's are 1 to the number of targets)
   * @param address the peer's fabric address
   */
  void addPeer(long clientId, byte[] address) {
    if (clientId < 1 || clientId > 1 << 20) {
      throw new IllegalArgumentException("client ids run from 1, not " + clientId);
    }
    await(
        thread,
        step,
        () -> {
          if (clientId >= peers.length) {
            peers = Arrays.copyOf(peers, (int) Math.max(clientId + 1, 2L * peers.length));
          }
          peers[(int) clientId] = endpoint.insertPeer(address);
          return null;
        });
  }

  /**
   * Registers the run's one buffer, before the first point; every operand is a slice of it.
   *
   * @param buffer the buffer
   * @return closes nothing: the registration lives until {@link #close()}
   */
  AutoCloseable register(MemorySegment buffer) {
    await(
        thread,
        step,
        () -> {
          registeredBase = buffer.address();
          registeredEnd = registeredBase + buffer.byteSize();
          if (endpoint.requiresLocalRegistration()) {
            registration = endpoint.register(registeredBase, buffer.byteSize());
            descriptor = endpoint.descriptor(registration);
          }
          return null;
        });
    return () -> {};
  }

  /**
   * Queues a transfer: at once on the driver's thread (a resubmission from the loop's completer),
   * through the inbox from any other, which starts the loop on its first use.
   *
   * @param request the transfer
   * @return whether it was taken: false once the loop has ended or close began, and the transfer
   *     then gets no completion (the {@link ClosedLoop} counts it failed)
   */
  boolean submit(TransferRequest<ClosedLoop.Slot> request) {
    if (Thread.currentThread() == loopThread) {
      if (loopEnded) {
        return false;
      }
      pending.addLast(request);
      return true;
    }
    synchronized (this) {
      // Under the lock that the loop's end takes too, so whatever is added here before the loop
      // ends is failed by it, and nothing is added after.
      if (closing || loopEnded) {
        return false;
      }
      inbox.add(request);
      if (running == null) {
        running = thread.submit(this::run);
      }
    }
    return true;
  }

  /** The loop, on the driver's thread until {@link #close()}. */
  private void run() {
    loopThread = Thread.currentThread();
    String why = "the endpoint driver closed before the transfer was posted";
    try {
      while (!closing) {
        if (!inbox.isEmpty()) {
          TransferRequest<ClosedLoop.Slot> request;
          while ((request = inbox.poll()) != null) {
            pending.addLast(request);
          }
        }
        postPending();
        endpoint.reap(sink, REAP_MAX);
        if (!batch.isEmpty()) {
          deliver();
        } else if (freeCount == cap && pending.isEmpty()) {
          Thread.onSpinWait(); // between points
        }
      }
    } catch (RuntimeException | Error unexpected) {
      // A bug or a queue-level failure: fail what is queued so the point ends now rather than at
      // the bench's stall timeout. Posted transfers stay posted until close fails them.
      why = "the endpoint loop failed: " + unexpected;
      throw unexpected;
    } finally {
      synchronized (this) {
        loopEnded = true;
      }
      failQueued(why);
    }
  }

  /** Posts queued transfers in order until one is refused or no slot is free. */
  private void postPending() {
    TransferRequest<ClosedLoop.Slot> request;
    while (freeCount > 0 && (request = pending.peekFirst()) != null) {
      boolean read;
      MemorySegment operand;
      long length;
      if (request.direction() instanceof Direction.FromPeer(long readLength)) {
        read = true;
        operand = request.context().allocate(readLength);
        length = readLength;
      } else {
        read = false;
        operand = request.context().source();
        length = operand.byteSize();
      }
      long address = operand.address();
      long peer = peers[(int) request.clientId()];
      long local = address >= registeredBase && address + length <= registeredEnd ? descriptor : 0;
      int slot = freeSlots[--freeCount];
      int code =
          read
              ? endpoint.postRead(
                  slot, peer, address, length, local, request.remoteAddress(), request.remoteKey())
              : endpoint.postWrite(
                  slot, peer, address, length, local, request.remoteAddress(), request.remoteKey());
      if (code == FabricEndpoint.AGAIN) {
        freeSlots[freeCount++] = slot;
        return;
      }
      pending.pollFirst();
      if (code == FabricEndpoint.POSTED) {
        posted[slot] = request;
        postedLength[slot] = length;
      } else {
        freeSlots[freeCount++] = slot;
        DmaException error =
            DmaException.fabric(
                endpoint.postFailureReason(code), "post failed: " + endpoint.errorText(code));
        batch.add(new Completion<>(request.context(), Outcome.failed(error), 1));
      }
    }
  }

  @SuppressWarnings("unchecked")
  private ClosedLoop.Slot release(int slot) {
    TransferRequest<ClosedLoop.Slot> request = (TransferRequest<ClosedLoop.Slot>) posted[slot];
    posted[slot] = null;
    freeSlots[freeCount++] = slot;
    return request.context();
  }

  /** Completes every transfer not yet posted as failed with {@code why}; on the driver's thread. */
  private void failQueued(String why) {
    TransferRequest<ClosedLoop.Slot> request;
    while ((request = inbox.poll()) != null) {
      pending.addLast(request);
    }
    DmaException error = DmaException.fabric(why);
    while ((request = pending.pollFirst()) != null) {
      batch.add(new Completion<>(request.context(), Outcome.failed(error), 0));
    }
    deliver();
  }

  /**
   * Completes every transfer still posted as failed, once the endpoint is closed (after which the
   * provider touches no operand); on the driver's thread.
   */
  private void failPosted() {
    DmaException error =
        DmaException.fabric("the endpoint driver closed its endpoint with the transfer posted");
    for (int slot = 0; slot < cap; slot++) {
      if (posted[slot] != null) {
        batch.add(new Completion<>(release(slot), Outcome.failed(error), 1));
      }
    }
    deliver();
  }

  private void deliver() {
    if (!batch.isEmpty()) {
      loop.complete(batch);
      batch.clear();
    }
  }

  /**
   * Stops the loop, then deregisters and closes the endpoint on the driver's thread. Bounded: the
   * loop's end and the close each wait at most the step ({@link #STEP}).
   *
   * @throws IllegalStateException when the driver's thread is still busy after that (stuck in a
   *     provider call): its endpoint is then left open, to a daemon thread
   */
  @Override
  public void close() {
    closing = true;
    Future<?> loopRun;
    synchronized (this) {
      loopRun = running;
    }
    try {
      if (loopRun != null) {
        loopRun.get(step.toNanos(), TimeUnit.NANOSECONDS);
      }
    } catch (ExecutionException ignored) {
      // The loop failed, and failed its queued transfers then: close the endpoint all the same.
    } catch (TimeoutException stuck) {
      loopRun.cancel(true);
      thread.shutdown();
      throw new IllegalStateException(
          "the endpoint loop did not stop within "
              + step.toMillis()
              + " ms (stuck in a provider call?); its endpoint is left open",
          stuck);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    try {
      await(
          thread,
          step,
          () -> {
            if (registration != 0) {
              endpoint.deregister(registration);
            }
            endpoint.close();
            failPosted();
            return null;
          });
    } finally {
      thread.shutdown();
    }
  }

  /** Runs {@code work} on the driver's thread and waits for it, at most {@code step}. */
  private static <V> V await(ExecutorService thread, Duration step, Callable<V> work) {
    return OwnerThreads.await(thread.submit(work), step, "the endpoint's thread");
  }
}
