package dev.dma.core;

import dev.dma.api.DmaConfiguration;
import dev.dma.api.DmaException;
import dev.dma.api.RemoteAccess;
import dev.dma.core.internal.Reply;
import dev.dma.core.internal.Threads;
import dev.dma.spi.EndpointInfo;
import dev.dma.spi.ExposedRegion;
import dev.dma.spi.FabricEndpoint;
import dev.dma.spi.FabricProvider;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.LockSupport;
import java.util.function.Function;

/**
 * The client's side: an endpoint whose memory a server reads and writes. It exposes native memory
 * for remote access, hands out the {@link dev.dma.api.Advertisement} to send to the server, and
 * keeps the endpoint progressed on its own thread ({@code dma-target-NN}) so incoming RMA lands
 * even on providers with manual data progress (tcp).
 *
 * <p>Threads: every method is thread-safe; each runs on the target's thread and blocks until done.
 * Ownership: the caller owns the exposed memory and must keep it alive until its region is closed;
 * the target's thread closes every region still open, then the endpoint, when it stops.
 *
 * <h2>Nothing waits forever</h2>
 *
 * Every call is answered: run by the target's thread, or failed with {@link
 * DmaException.Reason#CLOSED} once the target is closing. A call that races the thread's final
 * drain is failed by whichever side removes it from the queue. {@link #close(Duration)} returns
 * within its bound: it wakes a target sleeping between progress calls and waits at most the bound
 * for the thread to close the regions and the endpoint; if a provider call is stuck past that,
 * close fails the calls still queued and returns, and the thread, a daemon, closes the endpoint and
 * ends by itself as soon as the provider returns (no Java code can safely take the endpoint from
 * it, since the endpoint is used by one thread only).
 */
public final class PassiveTarget implements AutoCloseable {
  private static final AtomicInteger NUMBERS = new AtomicInteger();

  /** Progress passes between yields when spinning: 2^6. */
  private static final int YIELD_EVERY_MASK = 63;

  private static final System.Logger LOG = System.getLogger(PassiveTarget.class.getName());
  private static final String CLOSED = "passive target is closed";

  private final ConcurrentLinkedQueue<Command<?>> commands = new ConcurrentLinkedQueue<>();
  private final Thread thread;
  private final Reply<FabricEndpoint> opened = new Reply<>();
  private final long idleNanos;
  private final Duration closeTimeout;
  private final List<ExposedRegion> regions = new ArrayList<>();
  private volatile boolean closing;

  /**
   * Set by the target's thread once it runs no more commands, before its final drain: a caller that
   * queued a command and then sees this removes and fails it itself.
   */
  private volatile boolean stopped;

  // Progress passes so far; only the target's thread touches it.
  private int passes;

  // Both set by the target's thread once its endpoint is open, before start() returns the target.
  @SuppressWarnings("NullAway.Init")
  private byte[] address;

  @SuppressWarnings("NullAway.Init")
  private EndpointInfo info;

  private PassiveTarget(FabricProvider provider, DmaConfiguration configuration, Duration idle) {
    this.idleNanos = idle.toNanos();
    this.closeTimeout = configuration.closeTimeout();
    this.thread =
        new Thread(
            () -> run(provider, configuration),
            String.format("dma-target-%02d", NUMBERS.getAndIncrement()));
    thread.setDaemon(true);
  }

  /**
   * Opens a target on the provider the configuration names, progressed by spinning (lowest latency,
   * one busy core, yielding now and then).
   *
   * @param configuration the configuration
   * @return the running target
   * @throws DmaException when the provider is unavailable or the endpoint fails to open
   */
  public static PassiveTarget start(DmaConfiguration configuration) {
    return start(configuration, FabricProviders.select(configuration), Duration.ZERO);
  }

  /**
   * Opens a target on a chosen provider.
   *
   * @param configuration the configuration
   * @param provider the provider
   * @param idle how long to sleep between progress calls when nothing else is asked; zero spins
   *     (yielding the core every 64 passes)
   * @return the running target
   * @throws DmaException when the endpoint fails to open
   */
  public static PassiveTarget start(
      DmaConfiguration configuration, FabricProvider provider, Duration idle) {
    PassiveTarget target =
        new PassiveTarget(provider, FabricProviders.resolve(configuration, provider), idle);
    target.thread.start();
    FabricEndpoint endpoint = target.opened.await("passive target exited before opening");
    target.address = endpoint.localAddress();
    target.info = endpoint.describe();
    return target;
  }

  private void run(FabricProvider provider, DmaConfiguration configuration) {
    FabricEndpoint endpoint;
    try {
      endpoint = provider.open(configuration);
      opened.send(endpoint);
    } catch (DmaException failure) {
      opened.fail(failure);
      return;
    } catch (RuntimeException failure) {
      opened.fail(
          new DmaException(
              DmaException.Kind.FABRIC, "opening the endpoint failed: " + failure, 0, 0, failure));
      return;
    } finally {
      // An Error escaping above would leave start() blocked: wake it all the same.
      opened.abandon();
    }
    try {
      while (!closing) {
        Command<?> command;
        while ((command = commands.poll()) != null) {
          command.run(endpoint);
        }
        endpoint.progress();
        if (idleNanos > 0) {
          // close() and call() unpark: a long idle delays neither.
          LockSupport.parkNanos(idleNanos);
        } else if ((++passes & YIELD_EVERY_MASK) == 0) {
          // Mostly spin: a yield is a system call, and on tcp the target's progress is on every
          // transfer's critical path (it acknowledges delivery-complete writes and serves reads).
          // Now and then give the core away, so a target never starves threads that share it.
          Thread.yield();
        } else {
          Thread.onSpinWait();
        }
      }
    } finally {
      // Also when progress() threw: no command may run against an endpoint about to close.
      closing = true;
      stopped = true;
      // Every command queued before `stopped` was written is here; a later one is failed by its
      // caller (see call()). Whoever removes a command answers it.
      Command<?> command;
      while ((command = commands.poll()) != null) {
        command.refuse();
      }
      try {
        for (ExposedRegion region : regions) {
          region.close();
        }
        regions.clear();
      } finally {
        endpoint.close();
      }
    }
  }

  private static DmaException closed() {
    return DmaException.fabric(DmaException.Reason.CLOSED, CLOSED);
  }

  /** One call to run on the target's thread; answered exactly once through its reply. */
  private final class Command<V> {
    final Function<FabricEndpoint, V> action;
    final String what;
    final Reply<V> reply = new Reply<>();

    Command(Function<FabricEndpoint, V> action, String what) {
      this.action = action;
      this.what = what;
    }

    void run(FabricEndpoint endpoint) {
      if (closing) {
        refuse();
        return;
      }
      try {
        reply.send(action.apply(endpoint));
      } catch (DmaException failure) {
        reply.fail(failure);
      } catch (RuntimeException failure) {
        reply.fail(
            new DmaException(
                DmaException.Kind.FABRIC, what + " failed: " + failure, 0, 0, failure));
      } finally {
        reply.abandon();
      }
    }

    void refuse() {
      reply.fail(closed());
    }
  }

  private <V> V call(Function<FabricEndpoint, V> action, String what) {
    opened.await(CLOSED);
    if (closing) {
      throw closed();
    }
    Command<V> command = new Command<>(action, what);
    commands.add(command);
    // The thread may have finished its final drain before the add: then it will never take this
    // command. If `stopped` still reads false, the add preceded the thread's write of it and so
    // its final drain, which answers the command. Otherwise whoever removes it answers it. A
    // target merely closing would refuse the command anyway; refusing it here also covers a
    // thread stuck in the provider after close(timeout) drained the queue.
    if ((closing || stopped) && commands.remove(command)) {
      command.refuse();
    }
    LockSupport.unpark(thread); // a target sleeping for `idle` picks the command up now
    return command.reply.await("passive target exited before it could " + what);
  }

  /**
   * Registers memory for remote access and returns its region, whose advertisement goes to the
   * server. Close the region before freeing the memory.
   *
   * @param segment native memory that outlives the region
   * @param access what the server may do to it
   * @return the region
   * @throws DmaException when the registration fails or the target is closed
   */
  public ExposedRegion expose(MemorySegment segment, RemoteAccess access) {
    if (!segment.isNative()) {
      throw DmaException.fabric("cannot expose a heap segment; expose native memory");
    }
    ExposedRegion region =
        call(
            endpoint -> {
              ExposedRegion exposed = endpoint.expose(segment, access);
              regions.add(exposed);
              return exposed;
            },
            "expose");
    return new TargetRegion(region, withLength(region.advertisement(), segment.byteSize()));
  }

  /**
   * The provider's advertisement with the exposed length, when the provider did not give one, so a
   * server can bound its transfers to the region.
   */
  private static dev.dma.api.Advertisement withLength(
      dev.dma.api.Advertisement advertisement, long lengthBytes) {
    if (advertisement.lengthKnown() || lengthBytes <= 0) {
      return advertisement;
    }
    return new dev.dma.api.Advertisement(
        advertisement.address(),
        advertisement.remoteKey(),
        advertisement.remoteAddress(),
        lengthBytes);
  }

  /**
   * Inserts the server's address into this endpoint's address vector. Needed before the first RMA
   * on fabrics where a target must know its initiator (efa-direct); harmless elsewhere.
   *
   * @param serverAddress the server's {@link FabricService#localAddress()}
   * @throws DmaException when the fabric refuses the address
   */
  public void insertPeer(byte[] serverAddress) {
    call(
        endpoint -> {
          endpoint.peerIdentity(serverAddress);
          return endpoint.insertPeer(serverAddress);
        },
        "insert the server's address");
  }

  /**
   * This endpoint's fabric address.
   *
   * @return a copy of the address bytes
   */
  public byte[] localAddress() {
    return address.clone();
  }

  /**
   * What the endpoint turned out to be.
   *
   * @return its description
   */
  public EndpointInfo endpointInfo() {
    return info;
  }

  /**
   * Closes like {@link #close(Duration)}, bounded by the configuration's {@code close_timeout}.
   * Idempotent; any thread.
   */
  @Override
  public void close() {
    close(closeTimeout);
  }

  /**
   * Stops the target: calls queued or made from now on fail with {@link
   * DmaException.Reason#CLOSED}, the target's thread closes every region still open, then the
   * endpoint, and ends. Waits at most {@code timeout} for that (uninterruptibly; an interrupt is
   * kept for the caller), then returns either way: if the thread is still inside a provider call,
   * the calls still queued are failed here and the thread finishes the close on its own when the
   * provider returns. Idempotent; any thread, including the target's own (a command's action),
   * which then only marks the target closing.
   *
   * @param timeout the longest wait for the thread to finish; zero or negative waits not at all
   */
  public void close(Duration timeout) {
    closing = true;
    if (Thread.currentThread() == thread) {
      return; // the loop sees `closing` when this command returns
    }
    LockSupport.unpark(thread);
    if (!Threads.joinUninterruptibly(thread, timeout)) {
      // The thread is stuck in a provider call: it runs no command until that returns, so fail the
      // queued ones rather than leave their callers blocked on it.
      Command<?> command;
      while ((command = commands.poll()) != null) {
        command.refuse();
      }
      LOG.log(
          System.Logger.Level.WARNING,
          () ->
              thread.getName()
                  + " did not stop within "
                  + timeout
                  + " (a provider call is blocked); it closes its endpoint when that call returns");
    }
  }

  /** A region whose close runs on the target's thread (the endpoint's owner). */
  private final class TargetRegion implements ExposedRegion {
    private final ExposedRegion region;
    private final dev.dma.api.Advertisement advertisement;

    TargetRegion(ExposedRegion region, dev.dma.api.Advertisement advertisement) {
      this.region = region;
      this.advertisement = advertisement;
    }

    /** The provider's advertisement, with the exposed length. */
    @Override
    public dev.dma.api.Advertisement advertisement() {
      return advertisement;
    }

    @Override
    public void close() {
      if (stopped) {
        return; // the target closed it already, or will as it stops
      }
      try {
        call(
            endpoint -> {
              if (regions.remove(region)) {
                region.close();
              }
              return Boolean.TRUE;
            },
            "close a region");
      } catch (DmaException closedMeanwhile) {
        // The target closed every region on its way out.
      }
    }
  }
}
