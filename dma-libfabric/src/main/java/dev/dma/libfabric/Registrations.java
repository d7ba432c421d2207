package dev.dma.libfabric;

import static java.lang.foreign.ValueLayout.JAVA_LONG;

import dev.dma.api.Advertisement;
import dev.dma.api.DmaException;
import dev.dma.api.RemoteAccess;
import dev.dma.libfabric.internal.Abi;
import dev.dma.libfabric.internal.Native;
import dev.dma.spi.ExposedRegion;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.HashSet;
import java.util.Set;

/**
 * The memory registrations ({@code fi_mr_reg}) of one {@link LibfabricEndpoint}'s domain: it
 * registers operands and exposed regions, hands out keys, deregisters, and closes whatever is still
 * registered before the domain closes.
 *
 * <p>Threads: the endpoint's owner thread registers and closes; {@link #deregister(long)} (and so
 * {@link ExposedRegion#close()}) runs on any thread. All of them hold this object's lock, so no
 * registration is closed after the domain: once {@link #closeAll()} ran, deregistering is a no-op
 * that never calls libfabric. The owner thread checks that the endpoint is open before it
 * registers.
 */
final class Registrations {
  /** Under the endpoint's name, as before registrations had a class of their own. */
  private static final System.Logger LOG = System.getLogger(LibfabricEndpoint.class.getName());

  private final FabricObjects objects;

  /** {@code fi_mr_reg}'s out-parameter, written and read under the lock. */
  private final long registrationOut;

  // Guarded by this object's monitor, because deregister runs on any thread.
  private final Set<Long> open = new HashSet<>();
  private boolean closed;
  private long nextKey = 1;

  /**
   * Creates the registrations of a domain not opened yet.
   *
   * @param objects the endpoint's libfabric objects; the domain must be open before registering
   * @param arena the endpoint's arena
   */
  Registrations(FabricObjects objects, Arena arena) {
    this.objects = objects;
    this.registrationOut = arena.allocate(JAVA_LONG).address();
  }

  /**
   * Registers memory with the domain; the endpoint is open (its owner thread checked).
   *
   * @param address the first byte
   * @param lengthBytes the length, positive
   * @param access the {@code FI_*} access bits
   * @param step the call as failures name it, for example {@code fi_mr_reg(operand)}
   * @return the {@code fid_mr}
   * @throws DmaException of kind FABRIC for a length that is not positive or a failed registration
   */
  synchronized long register(long address, long lengthBytes, long access, String step) {
    if (lengthBytes <= 0) {
      throw DmaException.fabric("cannot register " + lengthBytes + " bytes");
    }
    // Without FI_MR_PROV_KEY the requested key is the key, and a duplicate in one domain fails
    // with -FI_ENOKEY: hand out unique keys.
    long key = objects.facts.providerKeys() ? 0 : nextKey++;
    Native.MEMORY.set(JAVA_LONG, registrationOut, 0L);
    int rc;
    try {
      rc =
          (int)
              Native.I_LLLLLLLLL.invokeExact(
                  objects.fnMrReg,
                  objects.domain,
                  address,
                  lengthBytes,
                  access,
                  0L,
                  key,
                  0L,
                  registrationOut,
                  0L);
    } catch (Throwable impossible) {
      throw new AssertionError(impossible);
    }
    FabricObjects.check(step, rc);
    long mr = Native.word(registrationOut);
    open.add(mr);
    return mr;
  }

  /**
   * Registers a native segment for remote access and describes it for peers; the endpoint is open
   * (its owner thread checked). The region is registered with {@code FI_READ|FI_WRITE} plus {@code
   * FI_REMOTE_READ} and {@code FI_REMOTE_WRITE} as asked (on shm from libfabric 2.5, a writable
   * region also with {@code FI_REMOTE_READ}, see {@link ShmWriteCheck}). Its remote address is the
   * segment's address under {@code FI_MR_VIRT_ADDR}, otherwise 0 (an offset); its key is {@code
   * fi_mr_key}.
   *
   * @param segment native memory
   * @param access what peers may do to it
   * @return the region, which any thread may close
   */
  ExposedRegion expose(MemorySegment segment, RemoteAccess access) {
    // On shm 2.5+ a writable region is readable too: the check of every write to it is a fetching
    // atomic, which the target verifies for read access as well (ShmWriteCheck).
    boolean readable =
        access.allowsRead()
            || (access.allowsWrite()
                && Quirks.shmReportsRefusedRmaAsDone(
                    objects.facts.providerName(), Libfabric.version()));
    long flags =
        Abi.FI_READ
            | Abi.FI_WRITE
            | (readable ? Abi.FI_REMOTE_READ : 0)
            | (access.allowsWrite() ? Abi.FI_REMOTE_WRITE : 0);
    long mr = register(segment.address(), segment.byteSize(), flags, "fi_mr_reg(expose)");
    long key = Native.word(mr + Abi.MR_KEY);
    Advertisement advertisement =
        new Advertisement(
            objects.localAddress,
            key,
            objects.facts.virtualAddressing() ? segment.address() : 0,
            segment.byteSize() > 0 ? segment.byteSize() : Advertisement.UNKNOWN_LENGTH);
    return new Exposed(this, mr, advertisement);
  }

  /**
   * Closes a registration; harmless for one already closed, including every registration after
   * {@link #closeAll()}. Any thread.
   *
   * @param registration the {@code fid_mr}
   */
  synchronized void deregister(long registration) {
    if (closed || !open.remove(registration)) {
      return;
    }
    int rc = Native.close(registration);
    if (rc != 0) {
      LOG.log(System.Logger.Level.WARNING, Native.failure("fi_close(mr)", rc));
    }
  }

  /** Closes every registration still open, before the domain closes; later deregisters no-op. */
  synchronized void closeAll() {
    for (long mr : open) {
      FabricObjects.closeLogged("fi_close(mr)", mr);
    }
    open.clear();
    closed = true;
  }

  /** An exposed region: its advertisement, and a close that deregisters it. */
  private static final class Exposed implements ExposedRegion {
    private final Registrations registrations;
    private final long mr;
    private final Advertisement advertisement;

    Exposed(Registrations registrations, long mr, Advertisement advertisement) {
      this.registrations = registrations;
      this.mr = mr;
      this.advertisement = advertisement;
    }

    @Override
    public Advertisement advertisement() {
      return advertisement;
    }

    @Override
    public void close() {
      registrations.deregister(mr);
    }
  }
}
