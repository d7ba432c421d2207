package dev.dma.libfabric;

import static java.lang.foreign.ValueLayout.JAVA_INT;

import dev.dma.api.DmaConfiguration;
import dev.dma.api.DmaException;
import dev.dma.api.Errno;
import dev.dma.api.MemoryKind;
import dev.dma.api.RemoteAccess;
import dev.dma.libfabric.internal.Abi;
import dev.dma.libfabric.internal.Native;
import dev.dma.spi.CompletionSink;
import dev.dma.spi.EndpointInfo;
import dev.dma.spi.ExposedRegion;
import dev.dma.spi.FabricEndpoint;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.Collections;
import java.util.EnumSet;
import java.util.List;
import java.util.Set;
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
 *   <li>This class: the per-transfer data path, top to bottom: a post checks its slot and peer and
 *       goes to the provider's {@link EndpointQuirks} (chosen at open), which posts through {@link
 *       DataPath}: writes with {@code fi_writemsg(FI_COMPLETION|FI_DELIVERY_COMPLETE)}, so a
 *       completion means the peer holds the bytes (tcp;ofi_rxm otherwise completes before the data
 *       lands), reads with {@code fi_read}, each operation's {@code op_context} its 64-byte slot in
 *       one native slab ({@link #openSlots}). Reap and progress read the queue through one {@link
 *       CompletionDecoder}. Posting and reaping allocate nothing, take no locks (but shm's, below)
 *       and use no lambdas.
 *   <li>{@code FabricQuery}: the {@code fi_getinfo} query and the choice of entry; {@code
 *       FabricObjects}: opening, resetting and closing the libfabric objects (a failure names its
 *       step, {@code "fi_domain: <fi_strerror> (<code>)"}) and the JVM's signal handlers kept
 *       across the calls that would replace them.
 *   <li>{@code AddressVector}: peer addresses checked before {@code fi_av_insert} and the live
 *       handles a post may name (libfabric checks neither, and tcp;ofi_rxm dies with SIGSEGV on a
 *       bad {@code fi_addr}); {@code Registrations}: memory registrations and their serialization
 *       with {@link #close()}.
 *   <li>{@code CompletionErrors}: the message of a completion error entry.
 *   <li>{@link ShmQuirks}: every shm workaround on the data path (bounce buffers, the write check
 *       on 2.5+, failed-read matching, the first-page refusal, the locks around posts to peer
 *       endpoints of this process), with the table of what shm does with an operation its target
 *       refuses, per libfabric version; {@link PlainQuirks}: every other provider's.
 *   <li>{@code Quirks}: every decision taken on a provider's name and library version.
 * </ul>
 *
 * <h2>What a failure leaves behind</h2>
 *
 * dma delivers a posted transfer's failure only after the endpoint was reset or closed (or the
 * provider reported the operation over), and after that no provider below reads a write's source or
 * writes a read's landing buffer; a failed write may still land at the target. The package's
 * documentation ({@code package-info.java}) has the table, per provider.
 *
 * <h2>Threads and ownership</h2>
 *
 * One owner thread opens, uses and closes it (the contract of {@link FabricEndpoint}), except
 * {@link #deregister(long)} and {@link ExposedRegion#close()}, which any thread may call: they
 * serialize with {@link #close()} so no registration is closed after the domain. The caller owns
 * the endpoint and must close it; closing also closes every registration still open.
 */
public final class LibfabricEndpoint implements FabricEndpoint {
  /** Completions read per {@code fi_cq_read}. */
  private static final int BATCH = CompletionDecoder.BATCH;

  final Arena arena;
  private final EndpointPolicy policy;

  // The libfabric objects (the data path reads their handles and function pointers directly),
  // the peers and the registrations.
  final FabricObjects objects;
  final AddressVector peers;
  final Registrations registrations;
  // Made at the first question, once the provider is known; owner thread only.
  private @Nullable PeerLiveness liveness;

  /** The native calls and the op-slot slab. */
  final DataPath data;

  /** The provider's workarounds, chosen at open: {@link PlainQuirks} or {@link ShmQuirks}. */
  private final EndpointQuirks quirks;

  /** The one reading of the completion queue, for reap and progress. */
  final CompletionDecoder decoder;

  /** Completions read by progress() that belong to this endpoint's own operations, for reap(). */
  final OutcomeQueue queue = new OutcomeQueue();

  /** The capabilities this endpoint declares, fixed at open. */
  private final Set<Capability> capabilities;

  /** A passive target's wait for incoming RMA: the queue's wait fd and the wakeup eventfd. */
  private final IncomingWait incoming;

  // The failure of fi_close(ep) in a reset, which close() then reports (and keeps the slab for).
  private @Nullable String resetCloseFailure;

  private boolean closed;

  /** An endpoint over objects that opened; its eventfd is made by {@link #open}. */
  private LibfabricEndpoint(EndpointPolicy policy, Arena arena, FabricObjects objects) {
    this.arena = arena;
    this.policy = policy;
    this.objects = objects;
    this.peers = new AddressVector(objects, policy, arena);
    this.registrations = new Registrations(objects, arena);
    this.data = new DataPath(objects, arena);
    this.incoming = new IncomingWait(objects, arena);
    this.quirks = EndpointQuirks.choose(this, objects.facts, Libfabric.version());
    this.decoder = new CompletionDecoder(data, objects, quirks, arena);
    this.capabilities = declare(objects);
  }

  /**
   * What this endpoint declares, from what libfabric returned: {@link Capability#AWAITS_INCOMING}
   * for a target's endpoint on tcp (net on 1.x), whose completion queue has a wait fd that the
   * provider's sockets make readable; {@link Capability#COMPLETES_IN_POST_ORDER} on shm up to
   * libfabric 2.4 ({@link Quirks#shmCompletesInPostOrder}); {@link
   * Capability#STRANDS_OPERATIONS_OF_GONE_PEERS} on shm, every version: a write to a peer that
   * closed or died waits in its command queue for ever, neither completing nor failing. Never
   * {@link Capability#REMOVAL_FLUSHES} (see {@link #reset()}).
   */
  private static Set<Capability> declare(FabricObjects objects) {
    String provider = objects.facts.providerName();
    EnumSet<Capability> declared = EnumSet.noneOf(Capability.class);
    if (objects.waitFd >= 0) {
      declared.add(Capability.AWAITS_INCOMING);
    }
    if (Quirks.shmCompletesInPostOrder(provider, Libfabric.version())) {
      declared.add(Capability.COMPLETES_IN_POST_ORDER);
    }
    if (Quirks.strandsOperationsOfGonePeers(provider)) {
      declared.add(Capability.STRANDS_OPERATIONS_OF_GONE_PEERS);
    }
    return Collections.unmodifiableSet(declared);
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
    Arena arena = Arena.ofShared();
    FabricObjects objects = new FabricObjects(policy, arena);
    objects.forTarget = forTarget;
    LibfabricEndpoint endpoint;
    try {
      objects.open(configuration);
      // The quirks are chosen from what libfabric returned, so the endpoint is made after it.
      endpoint = new LibfabricEndpoint(policy, arena, objects);
    } catch (RuntimeException | Error failed) {
      // What close() does for an endpoint that has nothing of its own yet.
      objects.markSelfClosed();
      String endpointFailure = objects.closeTransport();
      objects.closeDomain();
      if (endpointFailure != null) {
        failed.addSuppressed(closeFailed(endpointFailure));
      } else {
        arena.close();
      }
      throw failed;
    }
    try {
      endpoint.incoming.open();
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
    return decoder.orphanCompletions;
  }

  /** How many shm write checks met {@code -FI_EAGAIN} and were owed (0 without the check). */
  long shmChecksOwed() {
    return quirks instanceof ShmQuirks shm ? shm.checksOwed() : 0;
  }

  /**
   * Whether every write's success waits for the check that it landed ({@link ShmWriteCheck}: shm on
   * libfabric 2.5+, once slots are open). For tests.
   *
   * @return whether the check is on
   */
  boolean writeCheckActive() {
    return quirks instanceof ShmQuirks shm && shm.writeCheckActive();
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
   * <p>Where a post's code has a known cause on this provider, it is named after libfabric's text
   * ({@link EndpointQuirks#postErrorCause}): sockets answers {@code -FI_ENOENT} for a live peer
   * handle when it cannot connect to the peer ({@code sock_ep_get_conn}; this endpoint refuses
   * unknown handles before libfabric sees them); shm's first-page refusal and failed read copy.
   */
  @Override
  public String errorText(int code) {
    String text = Native.strerror(code);
    String cause = quirks.postErrorCause(code);
    if (cause != null) {
      return text + cause;
    }
    if (Math.abs(code) == Errno.FI_EMFILE) {
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
    DmaException.Reason reason = quirks.postFailureReason(code);
    return reason != null ? reason : DmaException.Reason.ofErrno(code);
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

  /**
   * {@inheritDoc}
   *
   * <p>Registers system memory only ({@code fi_mr_reg}, which carries no {@code fi_hmem_iface});
   * any other kind is refused ({@link #unsupportedKind}) until registration passes the iface
   * through {@code fi_mr_regattr} and the hints ask for {@code FI_HMEM}.
   */
  @Override
  public long register(long address, long lengthBytes, MemoryKind kind) {
    ensureOpen();
    if (!kind.systemMemory()) {
      throw unsupportedKind(kind, objects.facts.providerName());
    }
    return registrations.register(
        address, lengthBytes, Abi.FI_READ | Abi.FI_WRITE, "fi_mr_reg(operand)");
  }

  /**
   * The refusal of a kind of memory this endpoint cannot register: {@link
   * DmaException.Reason#BAD_REQUEST}, naming the kind, its iface and the provider.
   *
   * @param kind the kind refused
   * @param provider the provider's name
   * @return the exception, not thrown
   */
  static DmaException unsupportedKind(MemoryKind kind, String provider) {
    return DmaException.fabric(
        DmaException.Reason.BAD_REQUEST,
        "memory kind "
            + kind.name()
            + " (fi_hmem_iface "
            + kind.hmemIface()
            + ") is not supported by provider "
            + provider
            + ": dma registers host memory only; use host memory for this transfer");
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
    if (data.slots != 0) {
      throw new IllegalStateException("openSlots was already called");
    }
    // Each slot is an fi_context2 the provider may write until the operation completes; the slab
    // lives in the endpoint's arena, freed only after fi_close(ep), so it outlives every operation.
    quirks.openSlots(count);
    queue.open(count);
  }

  private boolean postable(int slot, long peer) {
    return slot >= 0 && slot < data.slots && peers.isLive(peer);
  }

  /**
   * {@inheritDoc}
   *
   * <p>Returns {@code -FI_EINVAL} without calling libfabric for a slot outside {@code [0, slots)}
   * or a peer handle that is not live: libfabric would use either blindly; on shm, {@code
   * -FI_ENOTCONN} for a peer that is an shm endpoint of this process and closed (shm would write
   * into its unmapped region), and {@code -FI_EFAULT} for a remote address in the first page
   * ({@link ShmQuirks}).
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
    return quirks.postWrite(
        slot, peer, localAddress, lengthBytes, descriptor, remoteAddress, remoteKey);
  }

  /**
   * {@inheritDoc}
   *
   * <p>Returns {@code -FI_EINVAL} without calling libfabric for a bad slot or peer, as {@link
   * #postWrite}; on shm, a read shm could not copy fails with shm's errno ({@link ShmQuirks}).
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
    return quirks.postRead(
        slot, peer, localAddress, lengthBytes, descriptor, remoteAddress, remoteKey);
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
    quirks.catchUp();
    int delivered = 0;
    OutcomeQueue queued = queue;
    while (queued.size() > 0 && delivered < max) {
      int i = queued.take();
      int slot = queued.slot(i);
      String message = queued.takeMessage(i);
      if (message == null) {
        quirks.settle(slot, true);
        sink.completed(slot);
      } else {
        quirks.settle(slot, false);
        int errno = queued.errno(i);
        sink.failed(
            slot,
            CompletionErrors.reason(objects.facts.providerName(), errno),
            errno,
            queued.providerErrno(i),
            message);
      }
      delivered++;
    }
    CompletionDecoder completions = decoder;
    while (delivered < max) {
      long n = completions.read(Math.min(BATCH, max - delivered));
      if (n > 0) {
        int unknown = 0;
        for (int i = 0; i < n; i++) {
          int slot = completions.success(i);
          if (slot >= 0) {
            deliver(sink, slot);
            delivered++;
          } else if (slot == CompletionDecoder.ORPHAN) {
            unknown++;
          }
        }
        if (unknown != 0) {
          completions.orphanCompletions += unknown;
          throw DmaException.fabric("completion carried a null op_context");
        }
      } else if (n == -Abi.FI_EAGAIN) {
        break;
      } else if (n == -Abi.FI_EAVAIL) {
        int slot = completions.error();
        if (slot == CompletionDecoder.EMPTY) {
          break;
        }
        if (slot >= 0) {
          deliver(sink, slot);
          delivered++;
        }
      } else {
        throw CompletionDecoder.readFailed(n);
      }
    }
    return delivered;
  }

  /** Delivers the outcome the decoder just decoded for {@code slot}. */
  private void deliver(CompletionSink sink, int slot) {
    CompletionDecoder outcome = decoder;
    quirks.settle(slot, outcome.settleAsDone);
    String message = outcome.message;
    if (message == null) {
      sink.completed(slot);
    } else {
      sink.failed(
          slot,
          CompletionErrors.reason(objects.facts.providerName(), outcome.errno),
          outcome.errno,
          outcome.providerErrno,
          message);
    }
  }

  /**
   * {@inheritDoc}
   *
   * <p>libfabric's wait protocol: {@code fi_trywait} first (it answers {@code -FI_EAGAIN} when
   * there is progress to make now, and the wait would miss it), then {@code ppoll} on the queue's
   * fd and on the eventfd {@link #wakeup()} writes ({@link IncomingWait}).
   */
  @Override
  public boolean awaitIncoming(long timeoutNanos) {
    ensureOpen();
    return incoming.await(timeoutNanos);
  }

  /**
   * {@inheritDoc}
   *
   * <p>A {@code ppoll} of the completion queue's wait fd with no timeout: readable while a socket
   * has bytes the provider has not read.
   */
  @Override
  public boolean incomingPending() {
    return !closed && incoming.pending();
  }

  /**
   * {@inheritDoc}
   *
   * <p>Reads the counter a passive target without a wait object binds to its endpoint (shm); util
   * counters progress their endpoints on each read.
   */
  @Override
  public long incomingServed() {
    return closed ? -1 : incoming.served();
  }

  /**
   * {@inheritDoc}
   *
   * <p>Writes the eventfd {@link #awaitIncoming} polls besides the queue's wait fd; a no-op once
   * closed.
   */
  @Override
  public void wakeup() {
    incoming.wakeup();
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
  long progressOnce() {
    ensureOpen(); // a CQ read after fi_close(cq) would crash inside libfabric
    quirks.catchUp();
    OutcomeQueue queued = queue;
    CompletionDecoder completions = decoder;
    // A pure target has no slots and no completions of its own; a read of one entry still drives
    // progress, and anything it returns cannot name an operation of ours.
    long n = completions.read(Math.max(1, Math.min(BATCH, queued.room())));
    if (n > 0) {
      for (int i = 0; i < n; i++) {
        int slot = queued.room() == 0 ? CompletionDecoder.ORPHAN : completions.success(i);
        if (slot == CompletionDecoder.ORPHAN) {
          completions.orphanCompletions++;
        } else if (slot >= 0) {
          queued.add(slot, completions.errno, completions.providerErrno, completions.message);
        }
      }
    } else if (n == -Abi.FI_EAVAIL) {
      int slot = completions.error();
      if (slot >= 0 && queued.room() > 0) {
        queued.add(slot, completions.errno, completions.providerErrno, completions.message);
      }
    } else if (n != -Abi.FI_EAGAIN) {
      throw CompletionDecoder.readFailed(n);
    }
    return n;
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
  @Override
  public void close() {
    if (closed) {
      return;
    }
    closed = true;
    incoming.close();
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
    quirks.close();
    data.slots = 0;
    data.contexts = 0;
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
   * <p>Why not {@code fi_av_remove} instead ({@link Capability#REMOVAL_FLUSHES} is declared by no
   * provider here), per provider:
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
    queue.clear();
    quirks.reset();
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
   * <p>Declared once, at open, from what libfabric returned: see {@link #declare}.
   */
  @Override
  public Set<Capability> capabilities() {
    return capabilities;
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

  @Override
  public String toString() {
    return "LibfabricEndpoint["
        + objects.facts.providerName()
        + " on "
        + objects.facts.domainName()
        + "]";
  }
}
