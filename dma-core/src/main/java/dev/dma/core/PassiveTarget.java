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
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.LockSupport;
import java.util.function.Function;
import org.jspecify.annotations.Nullable;

/**
 * The client's side: an endpoint whose memory a server reads and writes. It exposes native memory
 * for remote access, hands out the {@link dev.dma.api.Advertisement} to send to the server, and
 * keeps the endpoint progressed on its own thread ({@code dma-target-NN}) so incoming RMA lands
 * even on providers with manual data progress (tcp).
 *
 * <h2>Idle</h2>
 *
 * A target cannot tell from its own completion queue that a peer's RMA needs it (RMA raises no
 * completion at the target), so it backs off the way the fabric worker does: after {@value #SPINS}
 * progress passes without a command it yields for {@value #YIELDS} passes, then sleeps at most
 * {@link DmaConfiguration#targetIdle() target_idle} (default 100 ms) at a time on the endpoint's
 * wait object ({@link FabricEndpoint#awaitIncoming}). On tcp that wakes it the moment a peer's
 * bytes arrive, and it spins again after each such wake: an idle target costs well under 1 % of a
 * core, and a busy one answers as fast as a spinning one. A call ({@link #expose}, a region's
 * close, {@link #close()}) {@linkplain FabricEndpoint#wakeup wakes} it too. On providers without
 * such a wait object but with a count of the RMA they served (shm) it naps instead: 20 us, doubling
 * to 8 ms (or {@code target_idle} if shorter), reading the count after each nap. A busy target sees
 * the count move and keeps spinning; an idle one costs well under 2 % of a core, and the first
 * transfer after a quiet spell waits one nap at most. Where the provider offers neither it yields,
 * as a blind sleep would delay every incoming transfer, also in a busy stream. {@code
 * target_idle=0} spins always.
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

  /**
   * Progress passes between yields when spinning: 2^10, a yield every 0.1 ms or so on shm (a pass
   * is about 100 ns there) and every 0.3 ms on tcp. A yield is a system call, and a transfer that
   * arrives during one waits for it: a yield every 64 passes cost shm's 64 B window-1 writes about
   * 0.05 us a round trip, a tenth of C's whole round trip (docs/performance.md).
   */
  private static final int YIELD_EVERY_MASK = 1023;

  /**
   * Idle passes spent spinning before yielding, as the worker's {@code Backoff}: on tcp about 1 ms
   * of progress calls, far longer than the gap between a busy server's transfers.
   */
  static final int SPINS = 2_000;

  /** Idle passes spent yielding before sleeping. */
  static final int YIELDS = 200;

  /** A target without a wait object first naps this long once idle: 20 us. */
  static final long MIN_NAP_NANOS = 20_000;

  /**
   * The longest nap of a target without a wait object (shm), 8 ms, or {@code target_idle} when
   * shorter: what the first transfer after a quiet spell may wait. Idle, the target then wakes
   * about 125 times a second. With a 4 ms cap a CI run on a loaded 2-core machine measured 2.2 % of
   * a core (43 ms of CPU in 2 s, over the 2 % bound); beside two busy loops, on 2.1, three runs
   * each gave 0.50-0.96 % with 4 ms and 0.25-0.55 % with 16 ms. 8 ms halves the wakeups of 4 ms and
   * keeps the first transfer's extra wait short.
   */
  static final long MAX_NAP_NANOS = 8_000_000;

  /**
   * Passes between two looks at whether a peer's RMA is pending ({@link
   * FabricEndpoint#incomingPending}), 2^3: the signal that traffic is flowing, which keeps the
   * target spinning. A transfer is pending from its arrival to the next progress call, so a look
   * every 8 passes sees one of a few consecutive transfers; a look every pass would add a system
   * call to each. Without it a busy target fell asleep every ~2,200 passes, and under a loaded
   * scheduler each wake cost milliseconds: 64 B reads at window 1 on tcp dropped from 43,000/s to
   * 900/s.
   */
  private static final int LOOK_EVERY_MASK = 7;

  private static final System.Logger LOG = System.getLogger(PassiveTarget.class.getName());
  private static final String CLOSED = "passive target is closed";

  private final ConcurrentLinkedQueue<Command<?>> commands = new ConcurrentLinkedQueue<>();
  private final Thread thread;
  private final Reply<FabricEndpoint> opened = new Reply<>();

  /** The longest sleep once idle, or 0 to spin always. */
  private final long idleNanos;

  private final Duration closeTimeout;
  private final List<ExposedRegion> regions = new ArrayList<>();

  /**
   * Memory {@link #allocate} made from arenas of this target (providers that can expose any native
   * memory), by address; only the target's thread touches it.
   */
  private final java.util.Map<Long, Arena> allocations = new java.util.HashMap<>();

  private volatile boolean closing;

  /**
   * Set by the target's thread once it runs no more commands, before its final drain: a caller that
   * queued a command and then sees this removes and fails it itself.
   */
  private volatile boolean stopped;

  // Progress passes so far; only the target's thread touches it.
  private int passes;

  /**
   * The endpoint, once open and able to sleep: {@link #call} and {@link #close} {@linkplain
   * FabricEndpoint#wakeup wake} it from their threads. Null while the target spins or yields.
   */
  private volatile @Nullable FabricEndpoint sleeper;

  // Both set by the target's thread once its endpoint is open, before start() returns the target.
  @SuppressWarnings("NullAway.Init")
  private byte[] address;

  @SuppressWarnings("NullAway.Init")
  private EndpointInfo info;

  private PassiveTarget(FabricProvider provider, DmaConfiguration configuration, Duration idle) {
    if (idle.isNegative()) {
      throw new IllegalArgumentException("idle must not be negative, not " + idle);
    }
    this.idleNanos = idle.toNanos();
    this.closeTimeout = configuration.closeTimeout();
    this.thread =
        new Thread(
            () -> run(provider, configuration),
            String.format("dma-target-%02d", NUMBERS.getAndIncrement()));
    thread.setDaemon(true);
  }

  /**
   * Opens a target on the provider the configuration names, idling as its {@code target_idle} says
   * (by default backing off to sleep; see the class comment).
   *
   * @param configuration the configuration
   * @return the running target
   * @throws DmaException {@link DmaException.Reason#PROVIDER_UNAVAILABLE} when no provider serves
   *     the configuration; the provider's reason when the endpoint fails to open
   */
  public static PassiveTarget start(DmaConfiguration configuration) {
    return builder(configuration).start();
  }

  /**
   * Opens a target on a chosen provider; as {@code builder(configuration).provider(provider)
   * .idle(idle).start()}.
   *
   * @param configuration the configuration
   * @param provider the provider
   * @param idle the longest sleep between progress calls once idle ({@code target_idle}); zero
   *     spins (yielding the core every 1,024 passes)
   * @return the running target
   * @throws DmaException when the endpoint fails to open
   */
  public static PassiveTarget start(
      DmaConfiguration configuration, FabricProvider provider, Duration idle) {
    return builder(configuration).provider(provider).idle(idle).start();
  }

  /**
   * A builder for a target on a chosen provider or with its own idle bound.
   *
   * @param configuration the configuration
   * @return the builder
   */
  public static Builder builder(DmaConfiguration configuration) {
    return new Builder(configuration);
  }

  /**
   * Builds and starts a {@link PassiveTarget}: the endpoint's options ({@link EndpointOptions}) and
   * the idle bound. Not thread-safe.
   */
  public static final class Builder extends EndpointOptions<Builder> {
    private @Nullable Duration idle;

    private Builder(DmaConfiguration configuration) {
      super(configuration);
    }

    /**
     * Sets the longest sleep between progress calls once idle, instead of the configuration's
     * {@code target_idle}.
     *
     * @param value a positive duration, or {@link Duration#ZERO} to spin always
     * @return this builder
     */
    public Builder idle(Duration value) {
      this.idle = Objects.requireNonNull(value, "idle");
      return this;
    }

    /**
     * Opens the endpoint on the target's thread and blocks until it is open.
     *
     * @return the running target
     * @throws DmaException {@link DmaException.Reason#PROVIDER_UNAVAILABLE} when no provider serves
     *     the configuration; the provider's reason when the endpoint fails to open
     */
    public PassiveTarget start() {
      FabricProvider chosen = providerOrSelected();
      DmaConfiguration resolved = FabricProviders.resolve(configuration, chosen);
      return PassiveTarget.start(
          chosen, resolved, idle != null ? idle : configuration.targetIdle());
    }
  }

  private static PassiveTarget start(
      FabricProvider provider, DmaConfiguration configuration, Duration idle) {
    PassiveTarget target = new PassiveTarget(provider, configuration, idle);
    target.thread.start();
    FabricEndpoint endpoint = target.opened.await("passive target exited before opening");
    target.address = endpoint.localAddress();
    target.info = endpoint.describe();
    return target;
  }

  private void run(FabricProvider provider, DmaConfiguration configuration) {
    FabricEndpoint endpoint;
    try {
      endpoint = provider.openTarget(configuration);
      opened.send(endpoint);
    } catch (DmaException failure) {
      opened.fail(failure);
      return;
    } catch (RuntimeException failure) {
      opened.fail(
          new DmaException(
              DmaException.Kind.FABRIC,
              DmaException.Reason.PROVIDER,
              "opening the endpoint failed: " + failure,
              0,
              0,
              failure));
      return;
    } finally {
      // An Error escaping above would leave start() blocked: wake it all the same.
      opened.abandon();
    }
    try {
      boolean canSleep =
          idleNanos > 0
              && endpoint.capabilities().contains(FabricEndpoint.Capability.AWAITS_INCOMING);
      if (canSleep) {
        sleeper = endpoint;
      }
      // Without a wait object, a count of served RMA still tells a busy target from an idle one.
      long served = canSleep || idleNanos == 0 ? -1 : endpoint.incomingServed();
      boolean canNap = served >= 0;
      long napCap = Math.min(idleNanos, MAX_NAP_NANOS);
      long nap = MIN_NAP_NANOS;
      int idlePasses = 0;
      while (!closing) {
        Command<?> command;
        while ((command = commands.poll()) != null) {
          command.run(endpoint);
          idlePasses = 0;
        }
        if ((passes & LOOK_EVERY_MASK) == 0 || idlePasses >= SPINS + YIELDS) {
          if (canSleep && endpoint.incomingPending()) {
            idlePasses = 0;
          } else if (canNap) {
            long now = endpoint.incomingServed();
            if (now != served) {
              served = now;
              idlePasses = 0;
              nap = MIN_NAP_NANOS;
            }
          }
        }
        endpoint.progress();
        if (idleNanos == 0 || idlePasses < SPINS) {
          idlePasses++;
          if ((++passes & YIELD_EVERY_MASK) == 0) {
            // Mostly spin: a yield is a system call, and on tcp the target's progress is on every
            // transfer's critical path (it acknowledges delivery-complete writes and serves
            // reads). Now and then give the core away, so a target never starves threads that
            // share it.
            Thread.yield();
          } else {
            Thread.onSpinWait();
          }
        } else if (idlePasses < SPINS + YIELDS || !(canSleep || canNap)) {
          // Without a wait object or a count of served RMA, stay here: a blind sleep would add
          // itself to every transfer that arrives during it, also in a busy stream (1 ms parks
          // took tcp's 64 B round trip from 18 us to 1.1 ms).
          idlePasses++;
          passes++;
          nap = MIN_NAP_NANOS;
          Thread.yield();
        } else if (canSleep) {
          if (endpoint.awaitIncoming(idleNanos)) {
            // A peer's bytes arrived: more usually follow within microseconds, so spin for them.
            idlePasses = 0;
          }
        } else {
          // Idle for SPINS + YIELDS passes with nothing served: nap, longer each time up to the
          // cap. The count is read after each nap (above), so the first transfer after a quiet
          // spell waits one nap at most and the target spins again from then on.
          LockSupport.parkNanos(nap);
          nap = Math.min(nap * 2, napCap);
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
        for (Arena own : allocations.values()) {
          own.close();
        }
        allocations.clear();
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
                DmaException.Kind.FABRIC,
                DmaException.Reason.PROVIDER,
                what + " failed: " + failure,
                0,
                0,
                failure));
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
    wake();
    return command.reply.await("passive target exited before it could " + what);
  }

  /** Ends the target thread's sleep, so it sees a command or {@code closing} now. */
  private void wake() {
    FabricEndpoint endpoint = sleeper;
    if (endpoint != null) {
      endpoint.wakeup();
    } else {
      LockSupport.unpark(thread);
    }
  }

  /**
   * Registers memory for remote access and returns its region, whose advertisement goes to the
   * server. Close the region before freeing the memory.
   *
   * @param segment native memory that outlives the region
   * @param access what the server may do to it
   * @return the region
   * @throws DmaException {@link DmaException.Reason#BAD_REQUEST} for a heap segment; {@link
   *     DmaException.Reason#CLOSED} once the target is closed; the provider's reason when the
   *     registration fails
   */
  public TargetRegion expose(MemorySegment segment, RemoteAccess access) {
    if (!segment.isNative()) {
      throw DmaException.fabric(
          DmaException.Reason.BAD_REQUEST, "cannot expose a heap segment; expose native memory");
    }
    ExposedRegion region =
        call(
            endpoint -> {
              ExposedRegion exposed = endpoint.expose(segment, access);
              regions.add(exposed);
              return exposed;
            },
            "expose");
    return new TargetRegion(
        segment,
        withLength(region.advertisement(), segment.byteSize()),
        () -> closeOnThread(region, segment));
  }

  /**
   * Allocates memory to {@linkplain #expose expose}: the way to get exposable memory on every
   * provider, and the only way on {@code local}, which can share only memory it made (a sealed
   * memfd). Zeroed and page-aligned. The target owns it: it is freed when the first region exposing
   * it (or a slice of it) closes, or when the target closes; the segment is not accessible after
   * that, so a buffer the server may still hold an old advertisement for is never reused. Expose it
   * once; allocate again for another region.
   *
   * @param lengthBytes the length, positive
   * @return the memory
   * @throws DmaException {@link DmaException.Reason#CLOSED} once the target is closed; the
   *     provider's reason when the memory cannot be made
   */
  public MemorySegment allocate(long lengthBytes) {
    if (lengthBytes <= 0) {
      throw new IllegalArgumentException("lengthBytes must be positive, not " + lengthBytes);
    }
    return call(
        endpoint -> {
          MemorySegment own = endpoint.allocateExposable(lengthBytes);
          if (own != null) {
            return own;
          }
          // Any native memory will do here: an arena per allocation, closed with its region.
          Arena arena = Arena.ofShared();
          MemorySegment memory = arena.allocate(lengthBytes, 4096);
          allocations.put(memory.address(), arena);
          return memory;
        },
        "allocate");
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
    wake();
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

  /** Closes {@code region} on the target's thread (the endpoint's owner), unless it stopped. */
  private void closeOnThread(ExposedRegion region, MemorySegment segment) {
    if (stopped) {
      return; // the target closed it already, or will as it stops
    }
    try {
      call(
          endpoint -> {
            if (regions.remove(region)) {
              region.close();
              Arena own = allocations.remove(segment.address());
              if (own != null) {
                own.close();
              }
            }
            return Boolean.TRUE;
          },
          "close a region");
    } catch (DmaException closedMeanwhile) {
      // The target closed every region on its way out.
    }
  }
}
