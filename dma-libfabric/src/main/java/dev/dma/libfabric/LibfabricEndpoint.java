package dev.dma.libfabric;

import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static java.lang.foreign.ValueLayout.JAVA_SHORT;

import dev.dma.api.DmaConfiguration;
import dev.dma.api.DmaException;
import dev.dma.api.Errno;
import dev.dma.api.RemoteAccess;
import dev.dma.libfabric.internal.Abi;
import dev.dma.libfabric.internal.Native;
import dev.dma.spi.CompletionMessages;
import dev.dma.spi.CompletionSink;
import dev.dma.spi.EndpointInfo;
import dev.dma.spi.ExposedRegion;
import dev.dma.spi.FabricEndpoint;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.Arrays;
import java.util.List;
import org.jspecify.annotations.Nullable;

/**
 * One libfabric RDM endpoint with its own fabric, domain, address vector and completion queue: the
 * generic {@link FabricEndpoint} every libfabric provider module uses. Provider policy (which
 * provider, fabric, mode bits, default source node) comes in an {@link EndpointPolicy}; everything
 * else is read back from what libfabric returned.
 *
 * <h2>Where things are</h2>
 *
 * <ul>
 *   <li>This class: the per-transfer data path, top to bottom. Writes with {@code
 *       fi_writemsg(FI_COMPLETION|FI_DELIVERY_COMPLETE)}, so a completion means the peer holds the
 *       bytes (tcp;ofi_rxm otherwise completes before the data lands); reads with {@code fi_read}.
 *       Each operation's {@code op_context} is its 64-byte slot in one native slab ({@link
 *       #openSlots}). Posting and reaping allocate nothing, take no locks and use no lambdas.
 *   <li>{@code FabricQuery}: the {@code fi_getinfo} query and the choice of entry; {@code
 *       FabricObjects}: opening, resetting and closing the libfabric objects (a failure names its
 *       step, {@code "fi_domain: <fi_strerror> (<code>)"}) and the JVM's signal handlers kept
 *       across the calls that would replace them.
 *   <li>{@code AddressVector}: peer addresses checked before {@code fi_av_insert} and the live
 *       handles a post may name (libfabric checks neither, and tcp;ofi_rxm dies with SIGSEGV on a
 *       bad {@code fi_addr}); {@code Registrations}: memory registrations and their serialization
 *       with {@link #close()}.
 *   <li>{@code CompletionErrors}: the message of a completion error entry.
 *   <li>{@code ShmBounce} and {@code ShmWriteCheck}: shm's write sources in dma-owned buffers, and
 *       on libfabric 2.5+ the check that a write shm reports done did land (below).
 * </ul>
 *
 * <h2>shm and an operation its target refuses, per libfabric version</h2>
 *
 * A wrong remote key, a range outside the region (by its last byte only, too) or a region without
 * the access. Measured with two shm endpoints in one process (dma-libfabric {@code ShmRefusalTest})
 * and against a target process (dma-it {@code LostCompletionTest}, {@code ShmConformanceTest}), and
 * read in 2.1's and 2.6's source:
 *
 * <table class="striped">
 *   <caption>shm, refused operations</caption>
 *   <thead>
 *     <tr><th>libfabric</th><th>refused write</th><th>refused read</th><th>dma's defence</th></tr>
 *   </thead>
 *   <tbody>
 *     <tr><td>1.17</td><td>never completes: the target drops the command</td><td>not refused:
 *         reads check neither key nor bounds (the target's bytes arrive); at an unmapped address,
 *         an error entry naming no operation, and the read never completes</td><td>the completion
 *         deadline; a remote address in the first page is refused before posting ({@code
 *         -FI_EFAULT})</td></tr>
 *     <tr><td>2.1 (2.0 to 2.4 by the same code, not run)</td><td>never completes</td><td>not
 *         refused, as on 1.17: with CMA the initiator copies ({@code smr_rma_fast}); without CMA
 *         it never completes</td><td>the completion deadline; the first page as above</td></tr>
 *     <tr><td>2.5+ (2.6 run)</td><td>reported done, nothing lands ({@code smr_progress_cmd_rma}
 *         returns the command without {@code SMR_OP_ERROR})</td><td>not refused, as on 1.17 (with
 *         CMA); without CMA reported done, the landing buffer holding stale bytes of an earlier
 *         transfer from shm's bounce buffers</td><td>writes:
 *         {@code ShmWriteCheck}, a fetching atomic on the write's first and last bytes posted
 *         right behind it, whose result decides the write's outcome, so a refused write fails
 *         {@code FI_EACCES} ({@code ACCESS_DENIED}) in the same round trip; reads: none (no key is checked with CMA, and
 *         without it a landing-buffer nonce would be overwritten by the stale bytes); the
 *         first page as above</td></tr>
 *   </tbody>
 * </table>
 *
 * The check costs one more command per shm write on 2.5+ only, handled by the target in the same
 * pass as the write; on other versions and other providers its field is null and the data path
 * reads it once per post and completion.
 *
 * <h2>What a failure leaves behind, per provider</h2>
 *
 * dma delivers a posted transfer's failure only after the endpoint was reset or closed (or the
 * provider reported the operation over), and after that no provider below reads a write's source or
 * writes a read's landing buffer. What a failed write may still do is land at the target, later,
 * with the bytes its source held when it was posted ({@code
 * DmaException.TargetMemory.MAY_HAVE_CHANGED}). Measured with a target process that was stopped
 * across the failure and resumed (dma-it {@code OperandSafetyTest}, 4 KiB, 64 KiB and 8 MiB, every
 * run, on 1.17 and 2.1):
 *
 * <table class="striped">
 *   <caption>After a failed transfer's completion is delivered</caption>
 *   <thead>
 *     <tr><th>provider</th><th>failed write: target memory</th><th>failed write: source</th>
 *         <th>failed read: landing buffer</th><th>why</th></tr>
 *   </thead>
 *   <tbody>
 *     <tr><td>tcp;ofi_rxm, net / tcp</td><td>may still receive the posted bytes, whole or a
 *         prefix</td><td>never read again</td><td>never written</td><td>the bytes are in kernel
 *         socket buffers, which closing the endpoint does not discard; nothing in this process
 *         reads the source after {@code fi_close(ep)}</td></tr>
 *     <tr><td>sockets, udp;ofi_rxd</td><td>may still receive the posted bytes</td><td>never read
 *         again</td><td>never written</td><td>as above: copies in this process or the kernel,
 *         made while posted</td></tr>
 *     <tr><td>shm</td><td>may still receive the posted bytes</td><td>never read again: writes
 *         above 4 KiB are posted from a dma-owned bounce buffer, given up for good when the write
 *         fails ({@code ShmBounce})</td><td>never written (but a read shm does not refuse is no
 *         failure, as the table above says)</td><td>with
 *         cross-memory attach the target copies a write straight out of the initiator's memory
 *         whenever it gets to the command, after the failure too (measured: the refilled bytes
 *         landed without the bounce)</td></tr>
 *     <tr><td>efa</td><td>may still receive the posted bytes</td><td>never read again, by
 *         reading of the source: same-host peers are kept off shm ({@code
 *         FI_EFA_ENABLE_SHM_TRANSFER=0}, set by dma unless the environment sets it), and the
 *         device reads a posted source only while the queue pair lives</td><td>never written
 *         (device DMA stops with the queue pair)</td><td>efa posts same-host writes to its own shm
 *         endpoint with dma's flags, which has shm's hazard and is out of the bounce's
 *         reach</td></tr>
 *     <tr><td>efa-direct</td><td>may still receive the posted bytes</td><td>never read again,
 *         by reading of the source (no shm path)</td><td>never written</td><td>the device stops
 *         with the queue pair, which the reset destroys</td></tr>
 *   </tbody>
 * </table>
 *
 * EFA cannot run here; its rows come from the provider's source (2.1 to 2.6) and {@code fi_efa(7)},
 * not from a measurement.
 *
 * <h2>Threads and ownership</h2>
 *
 * One owner thread opens, uses and closes it (the contract of {@link FabricEndpoint}), except
 * {@link #deregister(long)} and {@link ExposedRegion#close()}, which any thread may call: they
 * serialize with {@link #close()} so no registration is closed after the domain. The caller owns
 * the endpoint and must close it; closing also closes every registration still open.
 */
public final class LibfabricEndpoint implements FabricEndpoint {
  private static final System.Logger LOG = System.getLogger(LibfabricEndpoint.class.getName());

  /** Completions read per {@code fi_cq_read}. */
  private static final int BATCH = 16;

  /** Write flags: a completion only once the data is at the target. */
  private static final long WRITE_FLAGS = Abi.FI_COMPLETION | Abi.FI_DELIVERY_COMPLETE;

  /** The scratch layout for one {@code fi_writemsg}: msg, iovec, rma_iov, desc. */
  private static final long SCRATCH_MSG = 0;

  private static final long SCRATCH_IOV = Abi.MSG_RMA_SIZE;
  private static final long SCRATCH_RMA_IOV = SCRATCH_IOV + Abi.IOVEC_SIZE;
  private static final long SCRATCH_DESC = SCRATCH_RMA_IOV + Abi.RMA_IOV_SIZE;
  private static final long SCRATCH_BYTES = SCRATCH_DESC + 8;

  private final Arena arena = Arena.ofShared();
  private final EndpointPolicy policy;

  // The libfabric objects (the data path reads their handles and function pointers directly),
  // the peers and the registrations.
  private final FabricObjects objects;
  private final AddressVector peers;
  private final Registrations registrations;
  // Made at the first question, once the provider is known; owner thread only.
  private @Nullable PeerLiveness liveness;

  // Preallocated native buffers for the data path.
  private final long scratch;

  /** Two {@code struct pollfd}s (16 bytes), a {@code struct timespec} (16), a fid array (8). */
  private final long waitScratch;

  /**
   * An eventfd that {@link #wakeup()} writes, from any thread, to end a target's {@link
   * #awaitIncoming}; -1 when this endpoint cannot wait. Closed, under {@link #wakeLock}, by {@link
   * #close()}, so a late wakeup never writes to a descriptor number the process reused.
   */
  private int wakeFd = -1;

  private final Object wakeLock = new Object();

  /**
   * The eight bytes {@link #wakeup()} writes (1) and a drain reads; outlives the endpoint's arena.
   */
  private final MemorySegment wakeValue = Arena.ofAuto().allocate(JAVA_LONG);

  private final long entries;
  private final long errorEntry;
  private final long errorEntryBytes;
  private final long strerrorBuffer;

  // Op slots, and the contexts in the slab: the slots' own, then (shm 2.5+) one per slot for its
  // write's check.
  private long slabBase;
  private int slots;
  private int contexts;

  // Completions read by progress() that belong to this endpoint's own operations, kept for reap().
  private int[] queuedSlot = new int[0];
  private int[] queuedErrno = new int[0];
  private int[] queuedProviderErrno = new int[0];
  private String[] queuedMessage = new String[0];
  private int queueHead;
  private int queueSize;

  // The last error entry read by readError().
  private int errorSlot;
  private int errorErrno;
  private int errorProviderErrno;
  private String errorMessage = "";

  /** Entries whose op_context named no slot (shm reports some errors with a NULL context). */
  private long orphanCompletions;

  // Error entries naming no operation, and the errno of the latest (see failedCopy).
  private long orphanErrors;
  private int orphanErrno;

  private boolean closed;

  private LibfabricEndpoint(EndpointPolicy policy) {
    this.policy = policy;
    this.objects = new FabricObjects(policy, arena);
    this.peers = new AddressVector(objects, policy, arena);
    this.registrations = new Registrations(objects, arena);
    this.scratch = arena.allocate(SCRATCH_BYTES, 64).address();
    this.waitScratch = arena.allocate(48, 8).address();
    wakeValue.set(JAVA_LONG, 0, 1L);
    this.entries = arena.allocate(BATCH * Abi.CQ_ENTRY_SIZE, 64).address();
    this.errorEntryBytes =
        Native.API_VERSION >= Abi.FI_VERSION_1_20
            ? Abi.ERR_ENTRY_SIZE_1_20
            : Abi.ERR_ENTRY_SIZE_1_0;
    // Twice the size the provider copies, so a provider newer than these headers cannot overrun.
    this.errorEntry = arena.allocate(2 * Abi.ERR_ENTRY_SIZE_1_20, 64).address();
    this.strerrorBuffer = arena.allocate(256, 8).address();
    // The scratch's pointers never change; only lengths, addresses, keys and the context do.
    Native.MEMORY.set(
        JAVA_LONG, scratch + SCRATCH_MSG + Abi.MSG_RMA_MSG_IOV, scratch + SCRATCH_IOV);
    Native.MEMORY.set(JAVA_LONG, scratch + SCRATCH_MSG + Abi.MSG_RMA_DESC, scratch + SCRATCH_DESC);
    Native.MEMORY.set(JAVA_LONG, scratch + SCRATCH_MSG + Abi.MSG_RMA_IOV_COUNT, 1L);
    Native.MEMORY.set(
        JAVA_LONG, scratch + SCRATCH_MSG + Abi.MSG_RMA_RMA_IOV, scratch + SCRATCH_RMA_IOV);
    Native.MEMORY.set(JAVA_LONG, scratch + SCRATCH_MSG + Abi.MSG_RMA_RMA_IOV_COUNT, 1L);
    Native.MEMORY.set(JAVA_LONG, scratch + SCRATCH_MSG + Abi.MSG_RMA_DATA, 0L);
  }

  /**
   * Opens an endpoint (SEED-SPEC 5.2): queries with the policy's hints, picks the domain named by
   * {@code interfaces[0]} (or the first), and opens fabric, domain, AV, CQ and endpoint ({@code
   * FabricObjects.open}).
   *
   * <p>The source node is {@link DmaConfiguration#bind()}, else the policy's default, passed with
   * {@code FI_SOURCE}; with neither, libfabric picks the address.
   *
   * @param policy the provider's choices
   * @param configuration the interfaces and bind to use
   * @return the open endpoint, owned by the caller and used by the calling thread
   * @throws DmaException of kind FABRIC naming the step that failed; whatever was opened is closed
   */
  public static LibfabricEndpoint open(EndpointPolicy policy, DmaConfiguration configuration) {
    return open(policy, configuration, false);
  }

  /**
   * Opens an endpoint as {@link #open(EndpointPolicy, DmaConfiguration)} does, for a passive target
   * when {@code forTarget}: on tcp its completion queue then gets a wait fd, so {@link
   * #awaitIncoming} can sleep until a peer's RMA arrives. An initiator never asks for one: the
   * provider would signal the fd, a system call, on every completion.
   *
   * @param policy the provider's choices
   * @param configuration the interfaces and bind to use
   * @param forTarget whether the endpoint serves a passive target
   * @return the open endpoint, owned by the caller and used by the calling thread
   * @throws DmaException of kind FABRIC naming the step that failed; whatever was opened is closed
   */
  public static LibfabricEndpoint open(
      EndpointPolicy policy, DmaConfiguration configuration, boolean forTarget) {
    Native.require();
    LibfabricEndpoint endpoint = new LibfabricEndpoint(policy);
    endpoint.objects.forTarget = forTarget;
    try {
      endpoint.objects.open(configuration);
      if (endpoint.objects.waitFd >= 0) {
        endpoint.wakeFd = Native.eventfd();
      }
      return endpoint;
    } catch (RuntimeException | Error failed) {
      try {
        endpoint.close();
      } catch (RuntimeException suppressed) {
        failed.addSuppressed(suppressed);
      }
      throw failed;
    }
  }

  /**
   * The domain names an endpoint of this policy and configuration could open on (SEED-SPEC 2.14),
   * in libfabric's order without duplicates; null and non-UTF-8 names are skipped. The query passes
   * the source node {@link #open} would ({@code bind}, else the policy's default; none for shm), so
   * with {@code bind} set only the domains that serve that address are listed: on tcp, {@code
   * bind=127.0.0.1} lists {@code lo} and not {@code eth0}, and a group started from the list never
   * opens an endpoint that cannot reach its peers.
   *
   * @param policy the provider's choices
   * @param configuration the configuration; its {@code bind} narrows the list
   * @return the names, possibly empty
   * @throws DmaException of kind FABRIC when the query fails, naming the bind when one was set
   */
  public static List<String> discoverDomains(
      EndpointPolicy policy, DmaConfiguration configuration) {
    Native.require();
    String node = FabricObjects.sourceNode(policy, configuration);
    try {
      return FabricQuery.domainNames(policy, node);
    } catch (DmaException failed) {
      if (node == null) {
        throw failed;
      }
      throw new DmaException(
          failed.kind(),
          failed.reason(),
          "no "
              + policy.providerName()
              + " domain serves the source address \""
              + node
              + "\" (bind): "
              + failed.getMessage()
              + "; set bind to an address of this host, or leave it unset",
          failed.fabricErrno(),
          failed.providerErrno(),
          failed);
    }
  }

  /**
   * The facts of the {@code fi_info} entry this endpoint opened, and the decisions taken from them.
   *
   * @return the facts
   */
  public InfoFacts facts() {
    return objects.facts;
  }

  // ---------------------------------------------------------------------------------------------
  // Description

  /** {@inheritDoc} */
  @Override
  public byte[] localAddress() {
    return objects.localAddress.clone();
  }

  /** {@inheritDoc} */
  @Override
  public EndpointInfo describe() {
    InfoFacts facts = objects.facts;
    return new EndpointInfo(
        facts.providerName(),
        facts.addrFormat(),
        facts.mrMode(),
        facts.caps(),
        facts.requiresLocalMr(),
        facts.virtualAddressing());
  }

  /**
   * {@inheritDoc}
   *
   * <p>An IPv4 or IPv6 {@code sockaddr} (tcp, sockets, rxm, rxd) as {@code 10.0.0.2:4711} or {@code
   * [fe80::1]:4711}, a printable name (shm's) as itself, anything else in hex.
   */
  @Override
  public String peerText(byte[] address) {
    return PeerAddressText.of(address);
  }

  /**
   * The provider name libfabric returned, for example {@code tcp;ofi_rxm}.
   *
   * @return the name, or empty
   */
  public String providerName() {
    return objects.facts.providerName();
  }

  /**
   * The domain the endpoint opened, for example {@code lo}.
   *
   * @return the name, or empty
   */
  public String domainName() {
    return objects.facts.domainName();
  }

  /**
   * The returned {@code fi_info.mode} bits (context requirements).
   *
   * @return the bits
   */
  public long mode() {
    return objects.facts.mode();
  }

  /**
   * The returned {@code tx_attr.inject_size}.
   *
   * @return bytes
   */
  public long injectSize() {
    return objects.facts.injectSize();
  }

  /**
   * The returned {@code domain_attr.threading} ({@code FI_THREAD_SAFE} = 1).
   *
   * @return the threading model
   */
  public int threading() {
    return objects.facts.threading();
  }

  /**
   * The returned {@code domain_attr.data_progress} ({@code FI_PROGRESS_AUTO} = 1, {@code MANUAL} =
   * 2). tcp;ofi_rxm says MANUAL; {@code net} says AUTO but runs no thread without an EQ, so this
   * endpoint always progresses by reading its CQ.
   *
   * @return the progress model
   */
  public int dataProgress() {
    return objects.facts.dataProgress();
  }

  /**
   * The policy this endpoint was opened with.
   *
   * @return the policy
   */
  public EndpointPolicy policy() {
    return policy;
  }

  /**
   * How many completion entries named no slot of this endpoint (null or foreign {@code op_context})
   * and were dropped. shm reports some errors that way.
   *
   * @return the count
   */
  public long orphanCompletions() {
    return orphanCompletions;
  }

  /** How many shm write checks met {@code -FI_EAGAIN} and were owed (0 without the check). */
  long shmChecksOwed() {
    ShmWriteCheck writeCheck = check;
    return writeCheck == null ? 0 : writeCheck.owedSoFar;
  }

  /**
   * Whether every write's success waits for the check that it landed ({@link ShmWriteCheck}: shm on
   * libfabric 2.5+, once slots are open). For tests.
   *
   * @return whether the check is on
   */
  boolean writeCheckActive() {
    return check != null;
  }

  /** {@inheritDoc} */
  @Override
  public int maxTx() {
    return objects.facts.transmitDepth();
  }

  /** {@inheritDoc} */
  @Override
  public boolean requiresLocalRegistration() {
    return objects.facts.requiresLocalMr();
  }

  /**
   * {@inheritDoc}
   *
   * <p>Where a post's code has a known cause, it is named after libfabric's text: sockets answers
   * {@code -FI_ENOENT} for a live peer handle when it cannot connect to the peer ({@code
   * sock_ep_get_conn}; this endpoint refuses unknown handles before libfabric sees them).
   */
  @Override
  public String errorText(int code) {
    String text = Native.strerror(code);
    if (Math.abs(code) == Errno.FI_EFAULT && refuseFirstPage) {
      return text
          + ": the remote address is in the first page, which no process maps, so the"
          + " advertisement's address or the offset is wrong (refused before posting)";
    }
    if (Math.abs(code) == Abi.FI_EIO && refuseFirstPage) {
      return text
          + ": shm could not copy the read: the remote range is not mapped in the target process,"
          + " so the advertisement's address or the offset is wrong (from 2.5 shm says so with an"
          + " error naming no operation, read at the post; up to 2.4 dma asked the kernel)";
    }
    if (Math.abs(code) == Abi.FI_ENOENT && "sockets".equals(objects.facts.providerName())) {
      return text
          + ": sockets could not connect to the peer (nothing accepts at its address: the peer"
          + " never started, exited, or closed its endpoint)";
    }
    if (Math.abs(code) == dev.dma.api.Errno.FI_EMFILE) {
      return text + ": " + ProviderLimits.descriptorLimit();
    }
    return text;
  }

  /**
   * {@inheritDoc}
   *
   * <p>sockets answers a post with {@code -FI_ENOENT} when its connection attempt finds nothing
   * listening at the peer's address: the peer is gone ({@link
   * DmaException.Reason#PEER_UNREACHABLE}), as tcp says by never connecting. A read shm could not
   * copy because the target never mapped the range ({@code -FI_EIO}) is {@link
   * DmaException.Reason#ACCESS_DENIED}, as tcp's target refuses a range.
   */
  @Override
  public DmaException.Reason postFailureReason(int code) {
    if (Math.abs(code) == Abi.FI_ENOENT && "sockets".equals(objects.facts.providerName())) {
      return DmaException.Reason.PEER_UNREACHABLE;
    }
    if (Math.abs(code) == Abi.FI_EIO && refuseFirstPage) {
      // shm's read copy failed (failedCopy, ShmFailedReads): the target's memory there is not
      // accessible, the reason tcp gives a range its target refuses.
      return DmaException.Reason.ACCESS_DENIED;
    }
    return DmaException.Reason.ofErrno(code);
  }

  // ---------------------------------------------------------------------------------------------
  // Peers

  /**
   * {@inheritDoc}
   *
   * <p>Checks what libfabric would not: a socket address must be as long as this endpoint's own and
   * an {@code FI_SOCKADDR_IN}/{@code IN6} address must carry {@code AF_INET}/{@code AF_INET6}; an
   * {@code FI_ADDR_STR} address must be a printable, NUL-terminated {@code scheme://} string of at
   * most {@code FI_NAME_MAX} (64) bytes, whatever its length (shm's grows with the pid). The
   * identity is every byte, or the policy's {@link EndpointPolicy#identityLength()} leading bytes.
   */
  @Override
  public byte[] peerIdentity(byte[] address) {
    return peers.identity(address);
  }

  /**
   * {@inheritDoc}
   *
   * @throws DmaException of kind FABRIC for a malformed address (see {@link #peerIdentity}) or a
   *     failed insert
   */
  @Override
  public long insertPeer(byte[] address) {
    ensureOpen();
    return peers.insert(address);
  }

  /**
   * {@inheritDoc}
   *
   * <p>On shm only the handle is dropped: shm would hand the freed slot to a later peer with this
   * one's stale id (see {@link Quirks#shmReusesSlotsWithStalePeerIds}), and {@code fi_av_remove} of
   * a closed shm peer of this process writes into its unmapped region; the slot is freed by the
   * reset the endpoint asks for ({@link #wantsQuietReset}) or by its close.
   */
  @Override
  public int removePeer(long handle) {
    ensureOpen();
    return peers.remove(handle);
  }

  /**
   * {@inheritDoc}
   *
   * <p>shm, once {@link AddressVector#RECYCLE_GUARD} peers were added since the address vector
   * opened: see {@link Quirks#shmReusesSlotsWithStalePeerIds}.
   */
  @Override
  public boolean wantsQuietReset() {
    return !closed && peers.wantsQuietReset();
  }

  /**
   * Removals that sockets answered with {@code -FI_EINVAL} although they happened, reported as
   * success ({@link Quirks#socketsRemovalAnswersEinval}). For tests.
   *
   * @return the count since the endpoint opened
   */
  int quirkRemovals() {
    return peers.quirkRemovals();
  }

  /**
   * The API version libfabric recorded for this endpoint: in the {@code fi_info} it returned
   * ({@code fabric_attr->api_version}) and in the open fabric ({@code fid_fabric->api_version}),
   * which is what the providers' version gates read. For tests.
   *
   * @return {info's, fabric's}
   */
  int[] recordedApiVersions() {
    ensureOpen();
    long fabricAttr = Native.word(objects.info + Abi.INFO_FABRIC_ATTR);
    return new int[] {
      Native.MEMORY.get(JAVA_INT, fabricAttr + Abi.FABRIC_ATTR_API_VERSION),
      Native.MEMORY.get(JAVA_INT, objects.fabric + Abi.FABRIC_API_VERSION)
    };
  }

  // ---------------------------------------------------------------------------------------------
  // Registrations

  /** {@inheritDoc} */
  @Override
  public long register(long address, long lengthBytes) {
    ensureOpen();
    return registrations.register(
        address, lengthBytes, Abi.FI_READ | Abi.FI_WRITE, "fi_mr_reg(operand)");
  }

  /** {@inheritDoc} */
  @Override
  public long descriptor(long registration) {
    return Native.word(registration + Abi.MR_MEM_DESC);
  }

  /**
   * {@inheritDoc}
   *
   * <p>Harmless for a registration already closed, including every registration after {@link
   * #close()}; it never calls libfabric once the domain is closed.
   */
  @Override
  public void deregister(long registration) {
    registrations.deregister(registration);
  }

  /**
   * {@inheritDoc}
   *
   * <p>The region is registered with {@code FI_READ|FI_WRITE} plus {@code FI_REMOTE_READ} and
   * {@code FI_REMOTE_WRITE} as asked. Its remote address is the segment's address under {@code
   * FI_MR_VIRT_ADDR}, otherwise 0 (an offset); its key is {@code fi_mr_key}.
   */
  @Override
  public ExposedRegion expose(MemorySegment segment, RemoteAccess access) {
    if (!segment.isNative()) {
      throw new IllegalArgumentException(
          "only native memory can be exposed: the provider keeps its address");
    }
    ensureOpen();
    return registrations.expose(segment, access);
  }

  // ---------------------------------------------------------------------------------------------
  // Data path

  /** {@inheritDoc} */
  @Override
  public void openSlots(int count) {
    ensureOpen();
    if (count < 1) {
      throw new IllegalArgumentException("at least one slot is needed, not " + count);
    }
    if (slots != 0) {
      throw new IllegalStateException("openSlots was already called");
    }
    // Each slot is an fi_context2 the provider may write until the operation completes; the slab
    // lives in the endpoint's arena, freed only after fi_close(ep), so it outlives every operation.
    // On shm 2.5+ each slot has a second context, for its write's check (ShmWriteCheck), right
    // after the slots' own: both operations are in flight at once.
    boolean checked =
        Quirks.shmReportsRefusedRmaAsDone(objects.facts.providerName(), Libfabric.version());
    contexts = checked ? 2 * count : count;
    slabBase = arena.allocate(contexts * Abi.CONTEXT2_SIZE, 64).address();
    slots = count;
    if ("shm".equals(objects.facts.providerName())) {
      bounce = new ShmBounce(count);
      refuseFirstPage = objects.facts.virtualAddressing();
      if (refuseFirstPage && Libfabric.version() < Abi.FI_VERSION_2_5) {
        failedReads = new ShmFailedReads(count, Libfabric.version() < Abi.FI_VERSION_2_0);
      }
    }
    if (checked) {
      ShmWriteCheck writeCheck = new ShmWriteCheck(count, arena);
      if (objects.facts.requiresLocalMr()) {
        long mr =
            registrations.register(
                writeCheck.nativeBase,
                writeCheck.nativeBytes,
                Abi.FI_READ | Abi.FI_WRITE,
                "fi_mr_reg(shm write check)");
        writeCheck.descriptor(descriptor(mr));
      }
      check = writeCheck;
    }
    queuedSlot = new int[count];
    queuedErrno = new int[count];
    queuedProviderErrno = new int[count];
    queuedMessage = new String[count];
  }

  // On shm, the buffers the peer sees instead of the caller's operands (see ShmBounce); null
  // elsewhere.
  private @Nullable ShmBounce bounce;

  // On shm from libfabric 2.5, the check that a write shm reports done did land (ShmWriteCheck);
  // null elsewhere, which costs the data path one field read.
  private @Nullable ShmWriteCheck check;

  // On shm with virtual addresses: a remote address in the first page is refused before posting.
  private boolean refuseFirstPage;

  // On shm up to 2.4, which read shm failed to copy (ShmFailedReads); null elsewhere.
  private @Nullable ShmFailedReads failedReads;

  // Inside failedCopy: an error entry naming no operation is the post's, not one to warn about.
  private boolean takingFailedCopy;

  /** The first page, which no process maps (Linux's {@code vm.mmap_min_addr} is at least this). */
  private static final long FIRST_PAGE = 4096;

  private boolean postable(int slot, long peer) {
    return slot >= 0 && slot < slots && peers.isLive(peer);
  }

  /**
   * {@inheritDoc}
   *
   * <p>Returns {@code -FI_EINVAL} without calling libfabric for a slot outside {@code [0, slots)}
   * or a peer handle that is not live: libfabric would use either blindly; {@code -FI_ENOTCONN} for
   * a peer that is an shm endpoint of this process and closed (shm would write into its unmapped
   * region).
   */
  @Override
  public int postWrite(
      int slot,
      long peer,
      long localAddress,
      long lengthBytes,
      long descriptor,
      long remoteAddress,
      long remoteKey) {
    if (!postable(slot, peer)) {
      return -Abi.FI_EINVAL;
    }
    if (refuseFirstPage && Long.compareUnsigned(remoteAddress, FIRST_PAGE) < 0) {
      return -Errno.FI_EFAULT;
    }
    ShmWriteCheck writeCheck = check;
    if (writeCheck != null && writeCheck.deferred() > 0) {
      // A check still owed goes first; no later write to its peer may overtake it (ShmWriteCheck).
      postDeferredChecks();
      if (writeCheck.owes(peer)) {
        return -Abi.FI_EAGAIN;
      }
    }
    ShmBounce shm = bounce;
    // The copy into the bounce buffer comes first, outside the peer's lock below.
    long from =
        shm != null && descriptor == 0 ? shm.source(slot, localAddress, lengthBytes) : localAddress;
    ShmNames.Local local = peers.local(peer);
    int code;
    if (local == null) {
      code = writemsg(slot, peer, from, lengthBytes, descriptor, remoteAddress, remoteKey);
    } else {
      // A peer endpoint of this process: it must not close (and unmap) inside the post.
      synchronized (local) {
        if (!local.open) {
          return -Abi.FI_ENOTCONN;
        }
        code = writemsg(slot, peer, from, lengthBytes, descriptor, remoteAddress, remoteKey);
      }
    }
    if (shm != null && descriptor == 0) {
      shm.posted(slot, from, code == POSTED);
    }
    if (writeCheck != null && code == POSTED) {
      writeCheck.posted(slot, peer, localAddress, lengthBytes, remoteAddress, remoteKey);
      checkBehind(writeCheck, slot);
    }
    return code;
  }

  private int writemsg(
      int slot,
      long peer,
      long localAddress,
      long lengthBytes,
      long descriptor,
      long remoteAddress,
      long remoteKey) {
    long s = scratch;
    Native.MEMORY.set(JAVA_LONG, s + SCRATCH_IOV + Abi.IOVEC_BASE, localAddress);
    Native.MEMORY.set(JAVA_LONG, s + SCRATCH_IOV + Abi.IOVEC_LEN, lengthBytes);
    Native.MEMORY.set(JAVA_LONG, s + SCRATCH_DESC, descriptor);
    Native.MEMORY.set(JAVA_LONG, s + SCRATCH_RMA_IOV + Abi.RMA_IOV_ADDR, remoteAddress);
    Native.MEMORY.set(JAVA_LONG, s + SCRATCH_RMA_IOV + Abi.RMA_IOV_LEN, lengthBytes);
    Native.MEMORY.set(JAVA_LONG, s + SCRATCH_RMA_IOV + Abi.RMA_IOV_KEY, remoteKey);
    Native.MEMORY.set(JAVA_LONG, s + SCRATCH_MSG + Abi.MSG_RMA_ADDR, peer);
    Native.MEMORY.set(
        JAVA_LONG, s + SCRATCH_MSG + Abi.MSG_RMA_CONTEXT, slabBase + slot * Abi.CONTEXT2_SIZE);
    try {
      return (int)
          (long)
              Native.L_LLL_CRITICAL.invokeExact(
                  objects.fnWritemsg, objects.ep, s + SCRATCH_MSG, WRITE_FLAGS);
    } catch (Throwable impossible) {
      throw new AssertionError(impossible);
    }
  }

  /**
   * {@inheritDoc}
   *
   * <p>Returns {@code -FI_EINVAL} without calling libfabric for a bad slot or peer, as {@link
   * #postWrite}.
   */
  @Override
  public int postRead(
      int slot,
      long peer,
      long localAddress,
      long lengthBytes,
      long descriptor,
      long remoteAddress,
      long remoteKey) {
    if (!postable(slot, peer)) {
      return -Abi.FI_EINVAL;
    }
    if (refuseFirstPage && Long.compareUnsigned(remoteAddress, FIRST_PAGE) < 0) {
      return -Errno.FI_EFAULT;
    }
    // No bounce for reads, on shm either: a read's landing buffer was never written after its
    // failure was delivered, on any provider (OperandSafetyTest checks every one, every run).
    ShmNames.Local local = peers.local(peer);
    int rc;
    if (local == null) {
      rc = read(slot, peer, localAddress, lengthBytes, descriptor, remoteAddress, remoteKey);
    } else {
      // A peer endpoint of this process: it must not close (and unmap) inside the post.
      synchronized (local) {
        if (!local.open) {
          return -Abi.FI_ENOTCONN;
        }
        rc = read(slot, peer, localAddress, lengthBytes, descriptor, remoteAddress, remoteKey);
      }
    }
    ShmFailedReads reads = failedReads;
    if (reads != null) {
      if (rc == POSTED) {
        if (reads.reportsAfterThePost) {
          reads.posted(slot, peers.shmPid(peer), remoteAddress, lengthBytes);
        }
      } else if (rc == -Abi.FI_EAGAIN
          && reads.refusedUnmapped(slot, peers.shmPid(peer), remoteAddress, lengthBytes)) {
        return -Abi.FI_EIO;
      }
      return rc;
    }
    return rc == -Abi.FI_EAGAIN && refuseFirstPage ? failedCopy(rc) : rc;
  }

  /**
   * shm copies a read itself with CMA ({@code smr_rma_fast}, {@code process_vm_readv}); when the
   * copy fails (the remote address is not mapped in the target), the post answers {@code
   * -FI_EAGAIN} and shm writes an error entry naming no operation. Retried, the read would fail the
   * same way at every pass until a deadline. So after an {@code -FI_EAGAIN} from a read on shm the
   * queue is read at once: an error entry naming no operation that appeared there is this post's
   * (the worker posts from one thread, and shm writes the entry inside the post), and the post
   * fails with its errno. A genuine {@code -FI_EAGAIN} (a full queue) leaves no such entry. That is
   * 2.5 and later; 2.0 to 2.4 write no entry, and 1.x accepts the post and writes the entry with no
   * operation: there {@link ShmFailedReads} tells which read failed. {@code ShmRefusalTest} pins
   * all three.
   */
  private int failedCopy(int rc) {
    long before = orphanErrors;
    // The entry may sit behind completions not yet reaped: read on until it or the queue's end (a
    // bound as well: the queue holds at most one entry per slot, plus this one).
    takingFailedCopy = true;
    try {
      for (int reads = 0; reads <= slots / BATCH + 1 && orphanErrors == before; reads++) {
        if (progressOnce() == -Abi.FI_EAGAIN) {
          break;
        }
      }
    } finally {
      takingFailedCopy = false;
    }
    return orphanErrors > before ? -orphanErrno : rc;
  }

  private int read(
      int slot,
      long peer,
      long localAddress,
      long lengthBytes,
      long descriptor,
      long remoteAddress,
      long remoteKey) {
    try {
      return (int)
          (long)
              Native.L_LLLLLLLL_CRITICAL.invokeExact(
                  objects.fnRead,
                  objects.ep,
                  localAddress,
                  lengthBytes,
                  descriptor,
                  peer,
                  remoteAddress,
                  remoteKey,
                  slabBase + slot * Abi.CONTEXT2_SIZE);
    } catch (Throwable impossible) {
      throw new AssertionError(impossible);
    }
  }

  /** The slot an op_context names, or -1 when it names none (NULL, or not from the slab). */
  private int slotOf(long context) {
    long offset = context - slabBase;
    if (context == 0 || offset < 0 || (offset & (Abi.CONTEXT2_SIZE - 1)) != 0) {
      return -1;
    }
    long slot = offset / Abi.CONTEXT2_SIZE;
    return slot < contexts ? (int) slot : -1;
  }

  private long cqRead(int count) {
    try {
      return (long)
          Native.L_LLL_CRITICAL.invokeExact(objects.fnCqRead, objects.cq, entries, (long) count);
    } catch (Throwable impossible) {
      throw new AssertionError(impossible);
    }
  }

  /**
   * {@inheritDoc}
   *
   * <p>Fails with a {@link DmaException} once the endpoint is closed. Completions that {@link
   * #progress()} read first are delivered first. Each {@code fi_cq_read} asks for at most {@code
   * min(16, max - delivered)} entries, so nothing is read that cannot be delivered. An error
   * entry's {@code err} is reported positive even where the provider wrote it negative (shm); an
   * error entry naming no slot (shm's NULL context) is dropped and counted in {@link
   * #orphanCompletions()}. A success entry naming no slot ends the call with {@code completion
   * carried a null op_context}, after the valid entries of its batch were delivered.
   */
  @Override
  public int reap(CompletionSink sink, int max) {
    ensureOpen(); // a CQ read after fi_close(cq) would crash inside libfabric
    if (check != null && check.deferred() > 0) {
      postDeferredChecks();
    }
    int delivered = 0;
    while (queueSize > 0 && delivered < max) {
      int i = queueHead;
      queueHead = i + 1 == queuedSlot.length ? 0 : i + 1;
      queueSize--;
      String message = queuedMessage[i];
      if (message == null) {
        settle(queuedSlot[i], true);
        sink.completed(queuedSlot[i]);
      } else {
        queuedMessage[i] = null;
        settle(queuedSlot[i], false);
        sink.failed(
            queuedSlot[i],
            CompletionErrors.reason(objects.facts.providerName(), queuedErrno[i]),
            queuedErrno[i],
            queuedProviderErrno[i],
            message);
      }
      delivered++;
    }
    while (delivered < max) {
      long n = cqRead(Math.min(BATCH, max - delivered));
      if (n > 0) {
        int unknown = 0;
        for (int i = 0; i < n; i++) {
          int slot = slotOf(Native.word(entries + i * Abi.CQ_ENTRY_SIZE + Abi.CQ_ENTRY_OP_CONTEXT));
          if (slot < 0) {
            unknown++;
            continue;
          }
          ShmWriteCheck writeCheck = check;
          if (writeCheck != null) {
            slot = checkedSuccess(writeCheck, slot);
            if (slot < 0) {
              continue; // held: the slot's other operation is still open
            }
            String failure = writeCheck.failMessage[slot];
            if (failure != null) {
              writeCheck.failMessage[slot] = null;
              int errno = writeCheck.failErrno[slot];
              settle(slot, !writeCheck.writeErrored[slot]);
              sink.failed(
                  slot,
                  CompletionErrors.reason(objects.facts.providerName(), errno),
                  errno,
                  writeCheck.failProviderErrno[slot],
                  failure);
              delivered++;
              continue;
            }
          }
          settle(slot, true);
          sink.completed(slot);
          delivered++;
        }
        if (unknown != 0) {
          orphanCompletions += unknown;
          throw DmaException.fabric("completion carried a null op_context");
        }
      } else if (n == -Abi.FI_EAGAIN) {
        break;
      } else if (n == -Abi.FI_EAVAIL) {
        if (!readError()) {
          break;
        }
        if (errorSlot >= 0) {
          int slot = errorSlot;
          int errno = errorErrno;
          int providerErrno = errorProviderErrno;
          String message = errorMessage;
          ShmWriteCheck writeCheck = check;
          if (writeCheck != null) {
            slot = checkedError(writeCheck, slot, errno, providerErrno, message);
            if (slot < 0) {
              continue; // held: the slot's other operation is still open
            }
            errno = writeCheck.failErrno[slot];
            providerErrno = writeCheck.failProviderErrno[slot];
            String failure = writeCheck.failMessage[slot];
            writeCheck.failMessage[slot] = null;
            message = failure != null ? failure : message;
          }
          settle(slot, false);
          sink.failed(
              slot,
              CompletionErrors.reason(objects.facts.providerName(), errno),
              errno,
              providerErrno,
              message);
          delivered++;
        }
      } else {
        throw new DmaException(
            DmaException.Kind.FABRIC, Native.failure("fi_cq_read", n), (int) -n, 0, null);
      }
    }
    return delivered;
  }

  // ---------------------------------------------------------------------------------------------
  // The write check on shm 2.5+ (ShmWriteCheck): the owner thread, inside reap and progress.

  /**
   * Posts the check of the write just posted on {@code slot}, right behind it (ShmWriteCheck says
   * why the target then handles it after the write's bytes landed). One that meets -FI_EAGAIN is
   * owed: posted by the next reap, progress or write, before any later write to that peer.
   */
  private void checkBehind(ShmWriteCheck writeCheck, int slot) {
    int code = postCheck(writeCheck, slot);
    if (code == POSTED) {
      writeCheck.state[slot] |= ShmWriteCheck.CHECK_OPEN;
    } else if (code == AGAIN) {
      writeCheck.defer(slot);
    } else {
      // The write's own completion delivers this failure.
      writeCheck.fail(slot, Math.abs(code), 0, uncheckedMessage(code));
    }
  }

  /**
   * A success entry of context {@code index} (a slot's own, or at {@code slots} and up its write's
   * check): the slot whose outcome is now due ({@link ShmWriteCheck#failMessage} says which), or -1
   * while the slot's other operation is still open.
   */
  private int checkedSuccess(ShmWriteCheck writeCheck, int index) {
    if (index < slots) {
      // A read, or a write whose check is over or still to come.
      writeCheck.state[index] &= (byte) ~ShmWriteCheck.WRITE_OPEN;
      return writeCheck.state[index] == 0 ? index : -1;
    }
    int slot = index - slots;
    byte state = writeCheck.state[slot];
    if ((state & ShmWriteCheck.CHECK_OPEN) == 0) {
      return -1; // no check of this slot is open: nothing to deliver
    }
    writeCheck.state[slot] = (byte) (state & ~ShmWriteCheck.CHECK_OPEN);
    if (!writeCheck.accepted(slot)) {
      writeCheck.fail(slot, Abi.FI_EACCES, 0, refusedMessage());
    }
    return writeCheck.state[slot] == 0 ? slot : -1;
  }

  /**
   * An error entry of context {@code index}: as {@link #checkedSuccess}, with the failure recorded.
   * The write's own error wins over whatever its check found.
   */
  private int checkedError(
      ShmWriteCheck writeCheck, int index, int errno, int providerErrno, String message) {
    if (index < slots) {
      writeCheck.state[index] &= (byte) ~ShmWriteCheck.WRITE_OPEN;
      writeCheck.failMessage[index] = null;
      writeCheck.fail(index, errno, providerErrno, message);
      writeCheck.writeErrored[index] = true;
      return writeCheck.state[index] == 0 ? index : -1;
    }
    int slot = index - slots;
    byte state = writeCheck.state[slot];
    if ((state & ShmWriteCheck.CHECK_OPEN) == 0) {
      return -1;
    }
    writeCheck.state[slot] = (byte) (state & ~ShmWriteCheck.CHECK_OPEN);
    writeCheck.fail(
        slot, errno, providerErrno, "the check that shm's write landed failed: " + message);
    return writeCheck.state[slot] == 0 ? slot : -1;
  }

  /** Queues a slot's due outcome for the next reap. */
  private void enqueueOutcome(ShmWriteCheck writeCheck, int slot) {
    String failure = writeCheck.failMessage[slot];
    writeCheck.failMessage[slot] = null;
    enqueue(slot, writeCheck.failErrno[slot], writeCheck.failProviderErrno[slot], failure);
  }

  /** Posts the checks that met -FI_EAGAIN, oldest first, until one meets it again. */
  private void postDeferredChecks() {
    ShmWriteCheck writeCheck = check;
    if (writeCheck == null) {
      return;
    }
    while (writeCheck.deferred() > 0) {
      int slot = writeCheck.takeDeferred();
      int code = postCheck(writeCheck, slot);
      if (code == AGAIN) {
        writeCheck.keepDeferred(slot);
        return;
      }
      byte state = (byte) (writeCheck.state[slot] & ~ShmWriteCheck.CHECK_OWED);
      if (code == POSTED) {
        writeCheck.state[slot] = (byte) (state | ShmWriteCheck.CHECK_OPEN);
      } else {
        writeCheck.state[slot] = state;
        writeCheck.fail(slot, Math.abs(code), 0, uncheckedMessage(code));
        if (state == 0 && queueSize < queuedSlot.length) {
          // The write completed already; delivered by the next reap, from the queue.
          enqueueOutcome(writeCheck, slot);
        }
      }
    }
  }

  /** Posts the slot's check, under the peer's lock when the peer is an endpoint of this process. */
  private int postCheck(ShmWriteCheck writeCheck, int slot) {
    long peer = writeCheck.peer[slot];
    if (!peers.isLive(peer)) {
      return -Abi.FI_ENOTCONN;
    }
    ShmNames.Local local = peers.local(peer);
    if (local == null) {
      return fetchAtomic(writeCheck, slot);
    }
    synchronized (local) {
      if (!local.open) {
        return -Abi.FI_ENOTCONN;
      }
      return fetchAtomic(writeCheck, slot);
    }
  }

  private int fetchAtomic(ShmWriteCheck writeCheck, int slot) {
    writeCheck.prepare(slot, slabBase + (long) (slots + slot) * Abi.CONTEXT2_SIZE);
    try {
      return (int)
          (long)
              Native.L_LLLLLL_CRITICAL.invokeExact(
                  objects.fnFetchAtomicmsg,
                  objects.ep,
                  writeCheck.message,
                  writeCheck.resultIoc,
                  writeCheck.resultDesc,
                  1L,
                  Abi.FI_COMPLETION);
    } catch (Throwable impossible) {
      throw new AssertionError(impossible);
    }
  }

  private static String refusedMessage() {
    return CompletionMessages.of(Abi.FI_EACCES, Native.strerror(Abi.FI_EACCES))
        + "; shm reported the write done, but the target refused its remote key, address range"
        + " or access (found by a fetching atomic on the write's first and last bytes: shm on"
        + " libfabric 2.5+ reports refused writes as done)";
  }

  private String uncheckedMessage(int code) {
    return "shm took the write, but the check that it landed could not be posted: "
        + errorText(code)
        + " ("
        + code
        + ")";
  }

  /**
   * Before a slot's completion is delivered: on shm, settles its bounce buffer and, up to 2.4, ends
   * its read's watch (ShmFailedReads).
   */
  private void settle(int slot, boolean succeeded) {
    ShmFailedReads reads = failedReads;
    if (reads != null) {
      reads.ended(slot);
    }
    ShmBounce shm = bounce;
    if (shm != null) {
      if (succeeded) {
        shm.succeeded(slot);
      } else {
        shm.failed(slot);
      }
    }
  }

  /**
   * Reads one error entry into the error fields.
   *
   * @return false when the queue turned out empty
   */
  private boolean readError() {
    // A zeroed entry: with err_data_size 0 the provider hands back its own buffer instead of
    // memcpy'ing into a stale err_data pointer from the previous call.
    Native.MEMORY.asSlice(errorEntry, errorEntryBytes).fill((byte) 0);
    if (errorEntryBytes > Abi.ERR_SRC_ADDR_1_20) {
      // What the 2.x inline fi_cq_readerr does before the call.
      Native.MEMORY.set(JAVA_LONG, errorEntry + Abi.ERR_SRC_ADDR_1_20, Abi.FI_ADDR_NOTAVAIL);
    }
    long rc;
    try {
      rc =
          (long) Native.L_LLL_CRITICAL.invokeExact(objects.fnCqReaderr, objects.cq, errorEntry, 0L);
    } catch (Throwable impossible) {
      throw new AssertionError(impossible);
    }
    if (rc == -Abi.FI_EAGAIN) {
      return false;
    }
    if (rc <= 0) {
      throw new DmaException(
          DmaException.Kind.FABRIC, Native.failure("fi_cq_readerr", rc), (int) -rc, 0, null);
    }
    long context = Native.word(errorEntry + Abi.ERR_OP_CONTEXT);
    int err = Math.abs(Native.int32(errorEntry + Abi.ERR_ERR));
    int providerErrno = Native.int32(errorEntry + Abi.ERR_PROV_ERRNO);
    long errData = Native.word(errorEntry + Abi.ERR_ERR_DATA);
    Native.MEMORY.set(java.lang.foreign.ValueLayout.JAVA_BYTE, strerrorBuffer, (byte) 0);
    String providerText;
    try {
      long text =
          (long)
              Native.L_LILLL.invokeExact(
                  objects.fnCqStrerror, objects.cq, providerErrno, errData, strerrorBuffer, 256L);
      providerText = text == 0 ? "" : Native.string(text);
    } catch (Throwable impossible) {
      throw new AssertionError(impossible);
    }
    errorSlot = slotOf(context);
    errorErrno = err;
    errorProviderErrno = providerErrno;
    errorMessage =
        CompletionErrors.message(objects.facts.providerName(), err, providerErrno, providerText);
    if (errorSlot < 0) {
      orphanCompletions++;
      orphanErrors++;
      orphanErrno = err == 0 ? Abi.FI_EIO : err;
      ShmFailedReads reads = failedReads;
      int owner = reads == null ? -1 : reads.ownerOfOrphan();
      if (reads != null && owner >= 0) {
        // 1.x: the read shm could not copy, matched (ShmFailedReads); its failure is delivered.
        errorSlot = owner;
        // The reason tcp gives a range its target refuses; shm's own errno is in the text.
        errorErrno = Abi.FI_EACCES;
        errorMessage =
            reads.unmappedText(owner) + " (" + errorMessage + ", an error naming no operation)";
        return true;
      }
      if (!takingFailedCopy) {
        LOG.log(
            System.Logger.Level.WARNING,
            "dropped a completion error naming no operation: " + errorMessage);
      }
    }
    return true;
  }

  /**
   * {@inheritDoc}
   *
   * @return true for a target's endpoint on tcp (net on 1.x), whose completion queue has a wait fd
   *     that the provider's sockets make readable
   */
  @Override
  public boolean canAwaitIncoming() {
    return !closed && objects.waitFd >= 0 && wakeFd >= 0;
  }

  /**
   * {@inheritDoc}
   *
   * <p>libfabric's wait protocol: {@code fi_trywait} first (it answers {@code -FI_EAGAIN} when
   * there is progress to make now, and the wait would miss it), then {@code ppoll} on the queue's
   * fd and on the eventfd {@link #wakeup()} writes.
   */
  @Override
  public boolean awaitIncoming(long timeoutNanos) {
    ensureOpen();
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
   * {@inheritDoc}
   *
   * <p>A {@code ppoll} of the completion queue's wait fd with no timeout: readable while a socket
   * has bytes the provider has not read.
   */
  @Override
  public boolean incomingPending() {
    int fd = objects.waitFd;
    if (closed || fd < 0) {
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
   * {@inheritDoc}
   *
   * <p>Reads the counter a passive target without a wait object binds to its endpoint (shm); util
   * counters progress their endpoints on each read.
   */
  @Override
  public long incomingServed() {
    MemorySegment read = objects.fnCntrRead;
    if (closed || objects.cntr == 0) {
      return -1;
    }
    try {
      return (long) Native.L_L.invokeExact(read, objects.cntr);
    } catch (Throwable impossible) {
      throw new AssertionError(impossible);
    }
  }

  /**
   * {@inheritDoc}
   *
   * <p>Writes the eventfd {@link #awaitIncoming} polls besides the queue's wait fd; a no-op once
   * closed.
   */
  @Override
  public void wakeup() {
    synchronized (wakeLock) {
      if (wakeFd >= 0) {
        Native.write(wakeFd, wakeValue.address(), 8);
      }
    }
  }

  /**
   * {@inheritDoc}
   *
   * <p>Fails with a {@link DmaException} once the endpoint is closed. Reads the completion queue
   * once (which is what drives tcp's and shm's progress); any completions of this endpoint's own
   * operations are kept, in order, for the next {@link #reap}, so an endpoint used both as
   * initiator and target loses nothing.
   */
  @Override
  public void progress() {
    progressOnce();
  }

  /** {@link #progress}: returns what the queue read returned ({@code -FI_EAGAIN}: it was empty). */
  private long progressOnce() {
    ensureOpen(); // a CQ read after fi_close(cq) would crash inside libfabric
    if (check != null && check.deferred() > 0) {
      postDeferredChecks();
    }
    int room = queuedSlot.length - queueSize;
    // A pure target has no slots and no completions of its own; a read of one entry still drives
    // progress, and anything it returns cannot name an operation of ours.
    long n = cqRead(Math.max(1, Math.min(BATCH, room)));
    if (n > 0) {
      for (int i = 0; i < n; i++) {
        int slot = slotOf(Native.word(entries + i * Abi.CQ_ENTRY_SIZE + Abi.CQ_ENTRY_OP_CONTEXT));
        if (slot < 0 || queueSize == queuedSlot.length) {
          orphanCompletions++;
          continue;
        }
        ShmWriteCheck writeCheck = check;
        if (writeCheck != null) {
          slot = checkedSuccess(writeCheck, slot);
          if (slot >= 0) {
            enqueueOutcome(writeCheck, slot);
          }
        } else {
          enqueue(slot, 0, 0, null);
        }
      }
    } else if (n == -Abi.FI_EAVAIL) {
      if (readError() && errorSlot >= 0 && queueSize < queuedSlot.length) {
        ShmWriteCheck writeCheck = check;
        if (writeCheck != null) {
          int slot =
              checkedError(writeCheck, errorSlot, errorErrno, errorProviderErrno, errorMessage);
          if (slot >= 0) {
            enqueueOutcome(writeCheck, slot);
          }
        } else {
          enqueue(errorSlot, errorErrno, errorProviderErrno, errorMessage);
        }
      }
    } else if (n != -Abi.FI_EAGAIN) {
      throw new DmaException(
          DmaException.Kind.FABRIC, Native.failure("fi_cq_read", n), (int) -n, 0, null);
    }
    return n;
  }

  private void enqueue(int slot, int errno, int providerErrno, @Nullable String message) {
    int tail = queueHead + queueSize;
    if (tail >= queuedSlot.length) {
      tail -= queuedSlot.length;
    }
    queuedSlot[tail] = slot;
    queuedErrno[tail] = errno;
    queuedProviderErrno[tail] = providerErrno;
    queuedMessage[tail] = message;
    queueSize++;
  }

  private void ensureOpen() {
    if (closed) {
      throw DmaException.fabric("the endpoint is closed");
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Close

  /**
   * {@inheritDoc}
   *
   * <p>Order: registrations, endpoint, CQ, AV, domain, fabric, then the duplicated info; each only
   * if it was opened. A failed close is logged and the next object is still closed, but a parent is
   * never closed again: tcp;ofi_rxm frees part of a domain before returning {@code -FI_EBUSY}, and
   * a retry aborts the process. Native memory (slots, scratch) is freed last, after {@code
   * fi_close(ep)}, because the provider may write an operation's context until then.
   */
  // The failure of fi_close(ep) in a reset, which close() then reports (and keeps the slab for).
  private @Nullable String resetCloseFailure;

  @Override
  public void close() {
    if (closed) {
      return;
    }
    closed = true;
    synchronized (wakeLock) {
      if (wakeFd >= 0) {
        Native.closeFd(wakeFd);
        wakeFd = -1;
      }
    }
    // Before fi_close(ep) unmaps the region: from now on no endpoint of this process removes,
    // inserts or posts to this name.
    objects.markSelfClosed();
    if (liveness != null) {
      liveness.close();
    }
    registrations.closeAll();
    String endpointFailure = objects.closeTransport();
    if (endpointFailure == null) {
      endpointFailure = resetCloseFailure;
    }
    objects.closeDomain();
    if (bounce != null) {
      bounce.close();
    }
    slots = 0;
    contexts = 0;
    peers.clear();
    if (endpointFailure != null) {
      // The provider may still write op contexts into the slab: leave it to the arena's owner
      // (the slab is shared-arena memory kept alive rather than freed under a live provider).
      throw closeFailed(endpointFailure);
    }
    arena.close();
  }

  /**
   * The failure of a close or reset whose {@code fi_close(ep)} failed: everything else was still
   * closed, but the provider may be working on what was posted.
   */
  private static DmaException closeFailed(String endpointFailure) {
    return new DmaException(
        DmaException.Kind.FABRIC,
        DmaException.Reason.PROVIDER,
        endpointFailure
            + ": the endpoint was closed with everything under it, but the provider may still"
            + " touch the operands of what was posted",
        0,
        0,
        null);
  }

  /**
   * {@inheritDoc}
   *
   * <p>Closes the endpoint, then its completion queue and address vector (children before parents,
   * as {@link #close()} does), and opens all three again on the same domain with the same {@code
   * fi_info}. Registrations belong to the domain and stay valid; the op-slot slab stays (the
   * provider stopped writing contexts at {@code fi_close(ep)}); completions read but not yet
   * delivered are dropped with the operations they name. tcp and sockets bind a new ephemeral port,
   * so the local address changes.
   *
   * <p>Why not {@code fi_av_remove} instead ({@link #removalFlushes()} is false on every provider
   * here), per provider:
   *
   * <ul>
   *   <li>measured (dma-libfabric {@code ResetTest}, libfabric 1.17 and 2.1): with 8
   *       delivery-complete writes posted to a target that does not progress, {@code fi_av_remove}
   *       flushed none of them within 300 ms on tcp;ofi_rxm, net (1.17), tcp (2.1: the same
   *       protocol), shm and udp;ofi_rxd; sockets completes them by itself before, having its own
   *       progress thread. After a reset none of them completed and no discarded read wrote its
   *       landing buffer, on all five;
   *   <li>LIBFABRIC-FFM.md sections 8-10: sockets and shm keep using the old connection after a
   *       removal; tcp;ofi_rxm crashes on a later post to the removed address; shm and udp;ofi_rxd
   *       lose a bad write's completion altogether;
   *   <li>EFA.md: on {@code efa} the removal releases the peer's entries, so its operations never
   *       complete; on efa-direct it destroys the address handle under posted work requests;
   *   <li>the libfabric man page ({@code fi_av}) leaves removal with operations outstanding
   *       undefined.
   * </ul>
   *
   * Closing the endpoint is the one state in which no provider can still touch an operand. So when
   * {@code fi_close(ep)} fails the endpoint is not reopened: it is closed whole (domain and fabric
   * too) and the reset throws, and the worker shuts the service down, failing what was posted with
   * a text that says the provider may still touch their operands.
   *
   * @throws DmaException when closing the endpoint or reopening it fails; the endpoint is then
   *     closed
   */
  @Override
  public void reset() {
    ensureOpen();
    // As in close(): the old endpoint's region goes with fi_close(ep); the reopened endpoint
    // registers its own (new) name.
    objects.markSelfClosed();
    String endpointFailure = objects.closeTransport();
    if (endpointFailure != null) {
      resetCloseFailure = endpointFailure;
      // Throws closeFailed, after closing everything but the slab.
      close();
    }
    queueHead = 0;
    queueSize = 0;
    Arrays.fill(queuedMessage, null);
    if (bounce != null) {
      bounce.discardPosted("resetting the endpoint");
    }
    if (check != null) {
      check.clear();
    }
    peers.clear();
    try {
      objects.openTransport();
    } catch (Throwable reopenFailure) {
      close();
      throw new DmaException(
          DmaException.Kind.FABRIC,
          DmaException.Reason.PROVIDER,
          "resetting the endpoint failed reopening it: " + reopenFailure.getMessage(),
          reopenFailure instanceof DmaException dma ? dma.fabricErrno() : 0,
          0,
          reopenFailure);
    }
  }

  /**
   * {@inheritDoc}
   *
   * <p>True on shm up to libfabric 2.4 ({@code Quirks.shmCompletesInPostOrder}).
   */
  @Override
  public boolean completesInPostOrder() {
    return Quirks.shmCompletesInPostOrder(objects.facts.providerName(), Libfabric.version());
  }

  /**
   * {@inheritDoc}
   *
   * <p>On net, tcp, their rxm variants and sockets: a connection attempt to the address that is
   * refused (nothing listens there any more). On shm: a closed endpoint of this process, an exited
   * process, or a region file that is gone. Elsewhere (udp;ofi_rxd, efa) never. See {@link
   * PeerLiveness}.
   */
  @Override
  public @Nullable String peerGone(byte[] address) {
    if (closed) {
      return null;
    }
    if (liveness == null) {
      liveness = new PeerLiveness(objects.facts.providerName());
    }
    return liveness.gone(address);
  }

  /**
   * {@inheritDoc}
   *
   * <p>True on shm, every version: a write to a peer that closed or died waits in its command queue
   * for ever, neither completing nor failing.
   */
  @Override
  public boolean strandsOperationsOfGonePeers() {
    return PeerLiveness.strandsOperations(objects.facts.providerName());
  }

  @Override
  public String toString() {
    return "LibfabricEndpoint["
        + objects.facts.providerName()
        + " on "
        + objects.facts.domainName()
        + "]";
  }
}
