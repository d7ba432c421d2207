package dev.dma.core;

import dev.dma.api.DmaConfiguration;
import dev.dma.api.DmaException;
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
 * for remote access, hands out the {@link dev.dma.api.Advertisement} to send to the server, and keeps
 * the endpoint progressed on its own thread ({@code dma-target-NN}) so incoming RMA lands even on
 * providers with manual data progress (tcp).
 *
 * <p>Threads: every method is thread-safe; each runs on the target's thread and blocks until done.
 * Ownership: the caller owns the exposed memory and must keep it alive until its region is closed;
 * {@link #close()} closes every region still open, then the endpoint.
 */
public final class PassiveTarget implements AutoCloseable {
  private static final AtomicInteger NUMBERS = new AtomicInteger();

  /** Progress passes between yields when spinning: 2^6. */
  private static final int YIELD_EVERY_MASK = 63;

  private final ConcurrentLinkedQueue<Runnable> commands = new ConcurrentLinkedQueue<>();
  private final Thread thread;
  private final Reply<FabricEndpoint> opened = new Reply<>();
  private final long idleNanos;
  private final List<ExposedRegion> regions = new ArrayList<>();
  private volatile boolean closing;
  // Progress passes so far; only the target's thread touches it.
  private int passes;
  private byte[] address;
  private EndpointInfo info;

  private PassiveTarget(FabricProvider provider, DmaConfiguration configuration, Duration idle) {
    this.idleNanos = idle.toNanos();
    this.thread =
        new Thread(
            () -> run(provider, configuration),
            String.format("dma-target-%02d", NUMBERS.getAndIncrement()));
    thread.setDaemon(true);
  }

  /**
   * Opens a target on the provider the configuration names, progressed by spinning (lowest
   * latency, one busy core, yielding now and then).
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
        Runnable command;
        while ((command = commands.poll()) != null) {
          command.run();
        }
        endpoint.progress();
        if (idleNanos > 0) {
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
      Runnable command;
      while ((command = commands.poll()) != null) {
        command.run();
      }
      for (ExposedRegion region : regions) {
        region.close();
      }
      regions.clear();
      endpoint.close();
    }
  }

  private <V> V call(Function<FabricEndpoint, V> action, String what) {
    Reply<V> reply = new Reply<>();
    FabricEndpoint endpoint = opened.await("passive target is closed");
    commands.add(
        () -> {
          if (closing) {
            reply.fail(DmaException.fabric("passive target is closed"));
            return;
          }
          try {
            reply.send(action.apply(endpoint));
          } catch (DmaException failure) {
            reply.fail(failure);
          } catch (RuntimeException failure) {
            reply.fail(
                new DmaException(DmaException.Kind.FABRIC, what + " failed: " + failure, 0, 0, failure));
          } finally {
            reply.abandon();
          }
        });
    if (!thread.isAlive()) {
      throw DmaException.fabric("passive target is closed");
    }
    return reply.await("passive target exited before it could " + what);
  }

  /**
   * Registers memory for remote access and returns its region, whose advertisement goes to the
   * server. Close the region before freeing the memory.
   *
   * @param segment native memory that outlives the region
   * @param remoteRead whether the server may read it
   * @param remoteWrite whether the server may write it
   * @return the region
   * @throws DmaException when the registration fails or the target is closed
   */
  public ExposedRegion expose(MemorySegment segment, boolean remoteRead, boolean remoteWrite) {
    if (!segment.isNative()) {
      throw DmaException.fabric("cannot expose a heap segment; expose native memory");
    }
    ExposedRegion region =
        call(
            endpoint -> {
              ExposedRegion exposed = endpoint.expose(segment, remoteRead, remoteWrite);
              regions.add(exposed);
              return exposed;
            },
            "expose");
    return new TargetRegion(region);
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

  /** Closes every region still open, then the endpoint, and joins the thread. Idempotent. */
  @Override
  public void close() {
    closing = true;
    Threads.joinUninterruptibly(thread);
  }

  /** A region whose close runs on the target's thread (the endpoint's owner). */
  private final class TargetRegion implements ExposedRegion {
    private final ExposedRegion region;

    TargetRegion(ExposedRegion region) {
      this.region = region;
    }

    @Override
    public dev.dma.api.Advertisement advertisement() {
      return region.advertisement();
    }

    @Override
    public void close() {
      if (!thread.isAlive()) {
        return; // the target closed it already
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
