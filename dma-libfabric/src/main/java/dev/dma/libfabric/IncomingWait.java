package dev.dma.libfabric;

import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static java.lang.foreign.ValueLayout.JAVA_SHORT;

import dev.dma.libfabric.internal.Native;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

/**
 * A passive target's wait for incoming RMA on one {@link LibfabricEndpoint}: the completion queue's
 * wait fd (tcp, for a target's endpoint: {@link FabricObjects#waitFd}) polled beside an eventfd
 * that {@link #wakeup()} writes, and the counter of served RMA a target without a wait fd reads
 * instead (shm: {@link FabricObjects#cntr}).
 *
 * <p>Threads: the endpoint's owner calls everything but {@link #wakeup()}, which any thread may
 * call, also concurrently with the owner and after {@link #close()} (then it does nothing).
 */
final class IncomingWait {
  private final FabricObjects objects;

  /** Two {@code struct pollfd}s (16 bytes), a {@code struct timespec} (16), a fid array (8). */
  private final long waitScratch;

  /**
   * An eventfd that {@link #wakeup()} writes, from any thread, to end an {@link #await}; -1 when
   * the endpoint cannot wait. Closed, under {@link #wakeLock}, by {@link #close()}, so a late
   * wakeup never writes to a descriptor number the process reused.
   */
  private int wakeFd = -1;

  private final Object wakeLock = new Object();

  /**
   * The eight bytes {@link #wakeup()} writes (1) and a drain reads; outlives the endpoint's arena.
   */
  private final MemorySegment wakeValue = Arena.ofAuto().allocate(JAVA_LONG);

  IncomingWait(FabricObjects objects, Arena arena) {
    this.objects = objects;
    this.waitScratch = arena.allocate(48, 8).address();
    wakeValue.set(JAVA_LONG, 0, 1L);
  }

  /** Makes the eventfd, where the queue has a wait fd; once, at open. */
  void open() {
    if (objects.waitFd >= 0) {
      wakeFd = Native.eventfd();
    }
  }

  /**
   * libfabric's wait protocol: {@code fi_trywait} first (it answers {@code -FI_EAGAIN} when there
   * is progress to make now, and the wait would miss it), then {@code ppoll} on the queue's fd and
   * on the eventfd {@link #wakeup()} writes.
   */
  boolean await(long timeoutNanos) {
    int fd = objects.waitFd;
    if (fd < 0 || wakeFd < 0) {
      return false;
    }
    try {
      long fids = waitScratch + 32;
      Native.MEMORY.set(JAVA_LONG, fids, objects.cq);
      int rc = (int) Native.I_LLI.invokeExact(objects.fnTrywait, objects.fabric, fids, 1);
      if (rc != 0) {
        // -FI_EAGAIN: there is work now. Anything else: do not sleep on a wait we cannot trust.
        return true;
      }
      Native.MEMORY.set(JAVA_INT, waitScratch, fd);
      Native.MEMORY.set(JAVA_SHORT, waitScratch + 4, Native.POLLIN);
      Native.MEMORY.set(JAVA_SHORT, waitScratch + 6, (short) 0);
      Native.MEMORY.set(JAVA_INT, waitScratch + 8, wakeFd);
      Native.MEMORY.set(JAVA_SHORT, waitScratch + 12, Native.POLLIN);
      Native.MEMORY.set(JAVA_SHORT, waitScratch + 14, (short) 0);
      long bounded = Math.max(1, timeoutNanos);
      Native.MEMORY.set(JAVA_LONG, waitScratch + 16, bounded / 1_000_000_000L);
      Native.MEMORY.set(JAVA_LONG, waitScratch + 24, bounded % 1_000_000_000L);
      int ready = Native.ppoll(waitScratch, 2, waitScratch + 16);
      if (ready > 0 && Native.MEMORY.get(JAVA_SHORT, waitScratch + 14) != 0) {
        // Woken by wakeup(): reset the eventfd's counter so the next wait sleeps again.
        Native.read(wakeFd, waitScratch + 32, 8);
      }
      return ready > 0;
    } catch (RuntimeException | Error rethrown) {
      throw rethrown;
    } catch (Throwable impossible) {
      throw new AssertionError(impossible);
    }
  }

  /**
   * A {@code ppoll} of the completion queue's wait fd with no timeout: readable while a socket has
   * bytes the provider has not read. False without a wait fd.
   */
  boolean pending() {
    int fd = objects.waitFd;
    if (fd < 0) {
      return false;
    }
    Native.MEMORY.set(JAVA_INT, waitScratch, fd);
    Native.MEMORY.set(JAVA_SHORT, waitScratch + 4, Native.POLLIN);
    Native.MEMORY.set(JAVA_SHORT, waitScratch + 6, (short) 0);
    Native.MEMORY.set(JAVA_LONG, waitScratch + 16, 0L);
    Native.MEMORY.set(JAVA_LONG, waitScratch + 24, 0L);
    return Native.ppoll(waitScratch, 1, waitScratch + 16) > 0;
  }

  /**
   * The counter a passive target without a wait object binds to its endpoint (shm); util counters
   * progress their endpoints on each read. -1 without one.
   */
  long served() {
    MemorySegment read = objects.fnCntrRead;
    if (objects.cntr == 0) {
      return -1;
    }
    try {
      return (long) Native.L_L.invokeExact(read, objects.cntr);
    } catch (Throwable impossible) {
      throw new AssertionError(impossible);
    }
  }

  /** Writes the eventfd {@link #await} polls besides the queue's wait fd; a no-op once closed. */
  void wakeup() {
    synchronized (wakeLock) {
      if (wakeFd >= 0) {
        Native.write(wakeFd, wakeValue.address(), 8);
      }
    }
  }

  /** Closes the eventfd; idempotent. */
  void close() {
    synchronized (wakeLock) {
      if (wakeFd >= 0) {
        Native.closeFd(wakeFd);
        wakeFd = -1;
      }
    }
  }
}
