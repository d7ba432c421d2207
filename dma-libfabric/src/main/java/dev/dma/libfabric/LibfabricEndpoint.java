package dev.dma.libfabric;

import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import dev.dma.api.Advertisement;
import dev.dma.api.DmaConfiguration;
import dev.dma.api.DmaException;
import dev.dma.libfabric.internal.Abi;
import dev.dma.libfabric.internal.Native;
import dev.dma.spi.CompletionSink;
import dev.dma.spi.EndpointInfo;
import dev.dma.spi.ExposedRegion;
import dev.dma.spi.FabricEndpoint;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Optional;
import java.util.Set;

/**
 * One libfabric RDM endpoint with its own fabric, domain, address vector and completion queue: the
 * generic {@link FabricEndpoint} every libfabric provider module uses. Provider policy (which
 * provider, fabric, mode bits, default source node) comes in an {@link EndpointPolicy}; everything
 * else is read back from what libfabric returned.
 *
 * <h2>What it does</h2>
 *
 * <ul>
 *   <li>Opens fabric, domain, AV ({@code FI_AV_TABLE}), CQ ({@code FI_CQ_FORMAT_CONTEXT}, no wait
 *       object), endpoint, binds AV and CQ ({@code FI_TRANSMIT|FI_RECV}) and enables it; a failure
 *       names its step: {@code "fi_domain: <fi_strerror> (<code>)"}.
 *   <li>Writes with {@code fi_writemsg(FI_COMPLETION|FI_DELIVERY_COMPLETE)}, so a completion means
 *       the peer holds the bytes (tcp;ofi_rxm otherwise completes before the data lands); reads
 *       with {@code fi_read}. Each operation's {@code op_context} is its 64-byte slot in one native
 *       slab ({@link #openSlots}).
 *   <li>Posting and reaping allocate nothing, take no locks and use no lambdas.
 *   <li>Refuses posts against peer handles it did not hand out or has removed, and refuses
 *       malformed peer addresses before {@code fi_av_insert}: libfabric validates neither, and
 *       tcp;ofi_rxm dies with SIGSEGV on a bad {@code fi_addr}.
 *   <li>Keeps the JVM's SIGSEGV/SIGBUS/SIGILL/SIGFPE handlers across {@code fi_getinfo}, {@code
 *       fi_fabric}, {@code fi_domain} and {@code fi_endpoint}: shm's first endpoint otherwise
 *       installs handlers that unlink its shared memory on the JVM's deliberate SIGSEGVs.
 * </ul>
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

  /** The shm provider's name. */
  private static final String SHM = "shm";

  /** Completions read per {@code fi_cq_read}. */
  private static final int BATCH = 16;

  /** The hint caps of every endpoint. */
  private static final long HINT_CAPS =
      Abi.FI_MSG
          | Abi.FI_RMA
          | Abi.FI_READ
          | Abi.FI_WRITE
          | Abi.FI_REMOTE_READ
          | Abi.FI_REMOTE_WRITE;

  /** Write flags: a completion only once the data is at the target. */
  private static final long WRITE_FLAGS = Abi.FI_COMPLETION | Abi.FI_DELIVERY_COMPLETE;

  /** Attribute structs grow in newer versions (fi_cq_attr gains xpu_ctx): allocate with slack. */
  private static final long ATTR_BYTES = 128;

  /** The scratch layout for one {@code fi_writemsg}: msg, iovec, rma_iov, desc. */
  private static final long SCRATCH_MSG = 0;

  private static final long SCRATCH_IOV = Abi.MSG_RMA_SIZE;
  private static final long SCRATCH_RMA_IOV = SCRATCH_IOV + Abi.IOVEC_SIZE;
  private static final long SCRATCH_DESC = SCRATCH_RMA_IOV + Abi.RMA_IOV_SIZE;
  private static final long SCRATCH_BYTES = SCRATCH_DESC + 8;

  /**
   * Largest {@code fi_addr} kept in the live-peer table ({@code FI_AV_TABLE} hands out indexes).
   */
  private static final long MAX_PEER_HANDLE = 1 << 24;

  private final Arena arena = Arena.ofShared();
  private final EndpointPolicy policy;

  // Native objects, 0 until opened; closed in reverse order by close().
  private long info;
  private long fabric;
  private long domain;
  private long av;
  private long cq;
  private long ep;

  // Function pointers, read once from the ops tables.
  private MemorySegment fnWritemsg;
  private MemorySegment fnRead;
  private MemorySegment fnCqRead;
  private MemorySegment fnCqReaderr;
  private MemorySegment fnCqStrerror;
  private MemorySegment fnAvInsert;
  private MemorySegment fnAvRemove;
  private MemorySegment fnMrReg;

  // What libfabric returned.
  private InfoFacts facts;
  private String providerName = "";
  private String domainName = "";
  private int addrFormat;
  private int mrMode;
  private long caps;
  private long mode;
  private int txSize;
  private long injectSize;
  private int threading;
  private int dataProgress;
  private boolean requiresLocalMr;
  private boolean virtualAddressing;
  private boolean providerKeys;
  private byte[] localAddress = new byte[0];

  // Preallocated native buffers for the data path.
  private final long scratch;
  private final long entries;
  private final long errorEntry;
  private final long errorEntryBytes;
  private final long strerrorBuffer;
  private final long addressOut;

  // Op slots.
  private long slabBase;
  private int slots;

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
  private String errorMessage;

  /** Entries whose op_context named no slot (shm reports some errors with a NULL context). */
  private long orphanCompletions;

  // Peers: live[fi_addr] is true between insertPeer and removePeer.
  private boolean[] livePeers = new boolean[64];

  // For shm: localPeers[fi_addr] is the record of a peer endpoint this process opened, else null.
  private ShmNames.Local[] localPeers = new ShmNames.Local[64];

  // For shm: this endpoint's own record, marked closed just before fi_close(ep).
  private ShmNames.Local shmSelf;

  // Registrations: guarded by registrations' monitor, because deregister runs on any thread.
  private final Set<Long> registrations = new HashSet<>();
  private boolean registrationsClosed;
  private long nextKey = 1;

  private boolean closed;

  private LibfabricEndpoint(EndpointPolicy policy) {
    this.policy = policy;
    this.scratch = arena.allocate(SCRATCH_BYTES, 64).address();
    this.entries = arena.allocate(BATCH * Abi.CQ_ENTRY_SIZE, 64).address();
    this.errorEntryBytes =
        Native.API_VERSION >= Abi.FI_VERSION_1_20
            ? Abi.ERR_ENTRY_SIZE_1_20
            : Abi.ERR_ENTRY_SIZE_1_0;
    // Twice the size the provider copies, so a provider newer than these headers cannot overrun.
    this.errorEntry = arena.allocate(2 * Abi.ERR_ENTRY_SIZE_1_20, 64).address();
    this.strerrorBuffer = arena.allocate(256, 8).address();
    this.addressOut = arena.allocate(64, 8).address();
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
   * {@code interfaces[0]} (or the first), and opens fabric, domain, AV, CQ and endpoint.
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
    Native.require();
    LibfabricEndpoint endpoint = new LibfabricEndpoint(policy);
    try {
      endpoint.openAll(configuration);
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
   * The domain names the policy's query returns with no source node (SEED-SPEC 2.14), in
   * libfabric's order without duplicates; null and non-UTF-8 names are skipped.
   *
   * @param policy the provider's choices
   * @param configuration the configuration (its {@code bind} is not used)
   * @return the names, possibly empty
   * @throws DmaException of kind FABRIC when the query fails
   */
  public static List<String> discoverDomains(
      EndpointPolicy policy, DmaConfiguration configuration) {
    Native.require();
    long list = query(policy, null);
    try {
      Set<String> names = new LinkedHashSet<>();
      for (long entry = list; entry != 0; entry = Native.word(entry + Abi.INFO_NEXT)) {
        String name = domainName(entry);
        if (name != null && !name.contains("\uFFFD")) {
          names.add(name);
        }
      }
      return new ArrayList<>(names);
    } finally {
      Native.freeinfo(list);
    }
  }

  /** SEED-SPEC 5.1: the {@code fi_getinfo} query; the caller frees the returned list. */
  static long query(EndpointPolicy policy, String sourceNode) {
    long hints = Native.dupinfo(0);
    if (hints == 0) {
      throw DmaException.fabric("fi_allocinfo failed");
    }
    try (Arena arena = Arena.ofConfined()) {
      Native.MEMORY.set(JAVA_LONG, hints + Abi.INFO_CAPS, HINT_CAPS);
      Native.MEMORY.set(JAVA_LONG, hints + Abi.INFO_MODE, policy.hintMode());
      Native.MEMORY.set(
          JAVA_INT, Native.word(hints + Abi.INFO_EP_ATTR) + Abi.EP_ATTR_TYPE, Abi.FI_EP_RDM);
      Native.MEMORY.set(
          JAVA_INT,
          Native.word(hints + Abi.INFO_DOMAIN_ATTR) + Abi.DOMAIN_ATTR_MR_MODE,
          policy.hintMrMode());
      long fabricAttr = Native.word(hints + Abi.INFO_FABRIC_ATTR);
      // fi_freeinfo free()s every string it finds in the hints, so they must come from malloc.
      Native.MEMORY.set(
          JAVA_LONG, fabricAttr + Abi.FABRIC_ATTR_PROV_NAME, Native.strdup(policy.providerName()));
      if (policy.fabricName().isPresent()) {
        Native.MEMORY.set(
            JAVA_LONG, fabricAttr + Abi.FABRIC_ATTR_NAME, Native.strdup(policy.fabricName().get()));
      }
      long node = sourceNode == null ? 0 : arena.allocateFrom(sourceNode).address();
      MemorySegment out = arena.allocate(JAVA_LONG);
      int rc = Native.getinfo(node, sourceNode == null ? 0 : Abi.FI_SOURCE, hints, out.address());
      if (rc != 0) {
        throw DmaException.fabric(Native.failure("fi_getinfo", rc));
      }
      long list = out.get(JAVA_LONG, 0);
      if (list == 0) {
        throw DmaException.fabric("no provider matched");
      }
      return list;
    } finally {
      Native.freeinfo(hints);
    }
  }

  private static String domainName(long entry) {
    long domainAttr = Native.word(entry + Abi.INFO_DOMAIN_ATTR);
    return domainAttr == 0 ? null : Native.string(Native.word(domainAttr + Abi.DOMAIN_ATTR_NAME));
  }

  static String providerName(long entry) {
    long fabricAttr = Native.word(entry + Abi.INFO_FABRIC_ATTR);
    return fabricAttr == 0
        ? null
        : Native.string(Native.word(fabricAttr + Abi.FABRIC_ATTR_PROV_NAME));
  }

  private void openAll(DmaConfiguration configuration) {
    String node =
        configuration.bind() != null
            ? configuration.bind()
            : policy.defaultSourceNode().orElse(null);
    if (SHM.equals(policy.providerName()) && node != null) {
      // shm names the endpoint after a source node instead of the pid (fi_shm://127.0.0.1:0:0),
      // so two processes binding the same address collide with EBUSY. Its names are local to
      // this host's /dev/shm anyway: leave the node out and get fi_shm://<pid>:<uid>:<index>.
      LOG.log(
          System.Logger.Level.DEBUG,
          "shm ignores the source node \"" + node + "\": its names carry the pid instead");
      node = null;
    }
    long list = query(policy, node);
    try {
      long chosen = choose(list, configuration.interfaces());
      info = Native.dupinfo(chosen);
      if (info == 0) {
        throw DmaException.fabric("fi_dupinfo failed");
      }
    } finally {
      Native.freeinfo(list);
    }
    readBack();

    MemorySegment out = arena.allocate(JAVA_LONG);
    long outAddress = out.address();
    try {
      int rc;
      try (var _ = Native.SignalGuard.save()) {
        rc =
            (int)
                Native.I_LLL.invokeExact(
                    Native.FI_FABRIC, Native.word(info + Abi.INFO_FABRIC_ATTR), outAddress, 0L);
      }
      check("fi_fabric", rc);
      fabric = out.get(JAVA_LONG, 0);

      MemorySegment fnDomain =
          Native.function(Native.word(fabric + Abi.FABRIC_OPS), Abi.OPS_FABRIC_DOMAIN, "fi_domain");
      try (var _ = Native.SignalGuard.save()) {
        rc = (int) Native.I_LLLL.invokeExact(fnDomain, fabric, info, outAddress, 0L);
      }
      check("fi_domain", rc);
      domain = out.get(JAVA_LONG, 0);
      fnMrReg = Native.function(Native.word(domain + Abi.DOMAIN_MR), Abi.OPS_MR_REG, "fi_mr_reg");

      openTransport();
    } catch (RuntimeException | Error rethrown) {
      throw rethrown;
    } catch (Throwable impossible) {
      throw new AssertionError(impossible);
    }
  }

  /**
   * Opens the address vector, the completion queue and the endpoint on the open domain, binds and
   * enables the endpoint and reads back its ops tables and name: the part of opening that {@link
   * #reset()} repeats.
   */
  private void openTransport() throws Throwable {
    MemorySegment out = arena.allocate(JAVA_LONG);
    long outAddress = out.address();
    int rc;
    long domainOps = Native.word(domain + Abi.DOMAIN_OPS);
    MemorySegment avAttr = arena.allocate(ATTR_BYTES, 8);
    avAttr.set(JAVA_INT, Abi.AV_ATTR_TYPE, Abi.FI_AV_TABLE);
    rc =
        (int)
            Native.I_LLLL.invokeExact(
                Native.function(domainOps, Abi.OPS_DOMAIN_AV_OPEN, "fi_av_open"),
                domain,
                avAttr.address(),
                outAddress,
                0L);
    check("fi_av_open", rc);
    av = out.get(JAVA_LONG, 0);
    long avOps = Native.word(av + Abi.AV_OPS);
    fnAvInsert = Native.function(avOps, Abi.OPS_AV_INSERT, "fi_av_insert");
    fnAvRemove = Native.function(avOps, Abi.OPS_AV_REMOVE, "fi_av_remove");

    // Zeroed apart from the format: default size, and no wait object (FI_WAIT_NONE is 0).
    MemorySegment cqAttr = arena.allocate(ATTR_BYTES, 8);
    cqAttr.set(JAVA_INT, Abi.CQ_ATTR_FORMAT, Abi.FI_CQ_FORMAT_CONTEXT);
    rc =
        (int)
            Native.I_LLLL.invokeExact(
                Native.function(domainOps, Abi.OPS_DOMAIN_CQ_OPEN, "fi_cq_open"),
                domain,
                cqAttr.address(),
                outAddress,
                0L);
    check("fi_cq_open", rc);
    cq = out.get(JAVA_LONG, 0);
    long cqOps = Native.word(cq + Abi.CQ_OPS);
    fnCqRead = Native.function(cqOps, Abi.OPS_CQ_READ, "fi_cq_read");
    fnCqReaderr = Native.function(cqOps, Abi.OPS_CQ_READERR, "fi_cq_readerr");
    fnCqStrerror = Native.function(cqOps, Abi.OPS_CQ_STRERROR, "fi_cq_strerror");

    // shm's first fi_endpoint installs SIGSEGV/SIGBUS handlers that unlink its shared memory.
    MemorySegment fnEndpoint = Native.function(domainOps, Abi.OPS_DOMAIN_ENDPOINT, "fi_endpoint");
    try (var _ = Native.SignalGuard.save()) {
      rc = (int) Native.I_LLLL.invokeExact(fnEndpoint, domain, info, outAddress, 0L);
    }
    check("fi_endpoint", rc);
    ep = out.get(JAVA_LONG, 0);
    long epOps = Native.word(ep + Abi.FID_OPS);
    MemorySegment fnBind = Native.function(epOps, Abi.OPS_BIND, "fi_ep_bind");
    rc = (int) Native.I_LLL.invokeExact(fnBind, ep, av, 0L);
    check("fi_ep_bind(av)", rc);
    rc = (int) Native.I_LLL.invokeExact(fnBind, ep, cq, Abi.FI_TRANSMIT | Abi.FI_RECV);
    check("fi_ep_bind(cq)", rc);
    rc =
        (int)
            Native.I_LIL.invokeExact(
                Native.function(epOps, Abi.OPS_CONTROL, "fi_enable"), ep, Abi.FI_ENABLE, 0L);
    check("fi_enable", rc);

    long rma = Native.word(ep + Abi.EP_RMA);
    fnWritemsg = Native.function(rma, Abi.OPS_RMA_WRITEMSG, "fi_writemsg");
    fnRead = Native.function(rma, Abi.OPS_RMA_READ, "fi_read");
    localAddress = fetchName();
    if (addrFormat == Abi.FI_ADDR_STR) {
      String name = ShmNames.nameOf(localAddress);
      if (name != null) {
        shmSelf = ShmNames.opened(name);
        ShmNames.reportLeftoversOnce(LOG);
      }
    }
  }

  /** The entry on {@code interfaces[0]} (or any), preferring the exact provider name asked for. */
  private long choose(long list, List<String> interfaces) {
    String wanted = interfaces.isEmpty() ? null : interfaces.getFirst();
    long first = 0;
    for (long entry = list; entry != 0; entry = Native.word(entry + Abi.INFO_NEXT)) {
      if (wanted != null && !wanted.equals(domainName(entry))) {
        continue;
      }
      if (policy.providerName().equals(providerName(entry))) {
        return entry;
      }
      if (first == 0) {
        first = entry;
      }
    }
    if (first == 0) {
      throw DmaException.fabric("no fabric domain named \"" + wanted + "\"");
    }
    return first;
  }

  private void readBack() {
    // One reading of the returned entry, and one place for the decisions taken from it, so the
    // provider modules' policy tests run exactly what the endpoint runs.
    facts = InfoFacts.read(info);
    providerName = facts.providerName();
    domainName = facts.domainName();
    caps = facts.caps();
    mode = facts.mode();
    addrFormat = facts.addrFormat();
    mrMode = facts.mrMode();
    threading = facts.threading();
    dataProgress = facts.dataProgress();
    txSize = facts.transmitDepth();
    injectSize = facts.injectSize();
    requiresLocalMr = facts.requiresLocalMr();
    virtualAddressing = facts.virtualAddressing();
    providerKeys = facts.providerKeys();
    facts.requireSupported();
  }

  /**
   * The facts of the {@code fi_info} entry this endpoint opened, and the decisions taken from them.
   *
   * @return the facts
   */
  public InfoFacts facts() {
    return facts;
  }

  private static void check(String step, int rc) {
    if (rc != 0) {
      throw new DmaException(DmaException.Kind.FABRIC, Native.failure(step, rc), -rc, 0, null);
    }
  }

  private byte[] fetchName() throws Throwable {
    MemorySegment fnGetname =
        Native.function(Native.word(ep + Abi.EP_CM), Abi.OPS_CM_GETNAME, "fi_getname");
    MemorySegment length = arena.allocate(JAVA_LONG);
    length.set(JAVA_LONG, 0, 0L);
    int rc = (int) Native.I_LLL.invokeExact(fnGetname, ep, 0L, length.address());
    long size = length.get(JAVA_LONG, 0);
    if (size == 0) {
      throw DmaException.fabric("fi_getname returned zero length");
    }
    MemorySegment buffer = arena.allocate(size, 8);
    rc = (int) Native.I_LLL.invokeExact(fnGetname, ep, buffer.address(), length.address());
    check("fi_getname", rc);
    long returned = Math.min(size, length.get(JAVA_LONG, 0));
    return buffer.asSlice(0, returned).toArray(java.lang.foreign.ValueLayout.JAVA_BYTE);
  }

  // ---------------------------------------------------------------------------------------------
  // Description

  /** {@inheritDoc} */
  @Override
  public byte[] localAddress() {
    return localAddress.clone();
  }

  /** {@inheritDoc} */
  @Override
  public EndpointInfo describe() {
    return new EndpointInfo(
        providerName, addrFormat, mrMode, caps, requiresLocalMr, virtualAddressing);
  }

  /**
   * The provider name libfabric returned, for example {@code tcp;ofi_rxm}.
   *
   * @return the name, or empty
   */
  public String providerName() {
    return providerName;
  }

  /**
   * The domain the endpoint opened, for example {@code lo}.
   *
   * @return the name, or empty
   */
  public String domainName() {
    return domainName;
  }

  /**
   * The returned {@code fi_info.mode} bits (context requirements).
   *
   * @return the bits
   */
  public long mode() {
    return mode;
  }

  /**
   * The returned {@code tx_attr.inject_size}.
   *
   * @return bytes
   */
  public long injectSize() {
    return injectSize;
  }

  /**
   * The returned {@code domain_attr.threading} ({@code FI_THREAD_SAFE} = 1).
   *
   * @return the threading model
   */
  public int threading() {
    return threading;
  }

  /**
   * The returned {@code domain_attr.data_progress} ({@code FI_PROGRESS_AUTO} = 1, {@code MANUAL} =
   * 2). tcp;ofi_rxm says MANUAL; {@code net} says AUTO but runs no thread without an EQ, so this
   * endpoint always progresses by reading its CQ.
   *
   * @return the progress model
   */
  public int dataProgress() {
    return dataProgress;
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

  /** {@inheritDoc} */
  @Override
  public int maxTx() {
    return txSize;
  }

  /** {@inheritDoc} */
  @Override
  public boolean requiresLocalRegistration() {
    return requiresLocalMr;
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
    if (Math.abs(code) == Abi.FI_ENOENT && "sockets".equals(providerName)) {
      return text
          + ": sockets could not connect to the peer (nothing accepts at its address: the peer"
          + " never started, exited, or closed its endpoint)";
    }
    return text;
  }

  // ---------------------------------------------------------------------------------------------
  // Peers

  /**
   * {@inheritDoc}
   *
   * <p>Checks what libfabric would not: a socket address must be as long as this endpoint's own
   * and an {@code FI_SOCKADDR_IN}/{@code IN6} address must carry {@code AF_INET}/{@code AF_INET6};
   * an {@code FI_ADDR_STR} address must be a printable, NUL-terminated {@code scheme://} string of
   * at most {@code FI_NAME_MAX} (64) bytes, whatever its length (shm's grows with the pid). The identity is every
   * byte, or the policy's {@link EndpointPolicy#identityLength()} leading bytes.
   */
  @Override
  public byte[] peerIdentity(byte[] address) {
    validate(address);
    int length = policy.identityLength();
    return length == 0 || length >= address.length
        ? address.clone()
        : Arrays.copyOf(address, length);
  }

  private void validate(byte[] address) {
    if (address == null) {
      throw DmaException.fabric("peer address is missing");
    }
    if (addrFormat == Abi.FI_ADDR_STR) {
      validateString(address);
      return;
    }
    if (address.length != localAddress.length) {
      throw DmaException.fabric(
          "peer address is "
              + address.length
              + " bytes, but "
              + providerName
              + " addresses are "
              + localAddress.length
              + " bytes");
    }
    if (addrFormat == Abi.FI_SOCKADDR_IN || addrFormat == Abi.FI_SOCKADDR_IN6) {
      int expected = addrFormat == Abi.FI_SOCKADDR_IN ? Abi.AF_INET : Abi.AF_INET6;
      // sin_family is a native-endian (little-endian on x86_64 and AArch64) 16-bit field.
      int family =
          (address[(int) Abi.SOCKADDR_FAMILY] & 0xff)
              | (address[(int) Abi.SOCKADDR_FAMILY + 1] & 0xff) << 8;
      if (family != expected) {
        throw DmaException.fabric(
            "peer address is not a socket address: family " + family + ", expected " + expected);
      }
    }
  }

  /**
   * An {@code FI_ADDR_STR} address: printable {@code scheme://...}, one NUL at the end, at most
   * {@code max(FI_NAME_MAX, own length)} bytes. Its length is not the local one: shm's {@code
   * fi_shm://<pid>:<uid>:<index>} grows with the pid's digits and the endpoint index, so a peer
   * with a 4-digit pid is one byte shorter than one with a 5-digit pid. The NUL matters: the
   * provider {@code strdup}s the address.
   */
  private void validateString(byte[] address) {
    int limit = Math.max(Abi.FI_NAME_MAX, localAddress.length);
    if (address.length < 2 || address.length > limit) {
      throw DmaException.fabric(
          "peer address is "
              + address.length
              + " bytes, but "
              + providerName
              + " address strings are 2 to "
              + limit
              + " bytes, NUL included");
    }
    int end = address.length - 1;
    if (address[end] != 0) {
      throw DmaException.fabric("peer address is not a NUL-terminated string");
    }
    for (int i = 0; i < end; i++) {
      if (address[i] < 0x20 || address[i] > 0x7e) {
        throw DmaException.fabric("peer address is not a printable address string");
      }
    }
    if (!new String(address, 0, end, StandardCharsets.US_ASCII).contains("://")) {
      throw DmaException.fabric("peer address is not an address string (scheme://...)");
    }
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
    validate(address);
    ShmNames.Local local =
        addrFormat == Abi.FI_ADDR_STR ? ShmNames.local(ShmNames.nameOf(address)) : null;
    if (local != null && !local.open) {
      // shm would map the closed endpoint's unmapped region: the insert or the first post is a
      // SIGSEGV.
      throw DmaException.fabric(
          "peer " + local.name + " is an shm endpoint of this process that was already closed");
    }
    try (Arena call = Arena.ofConfined()) {
      MemorySegment bytes = call.allocate(address.length, 8);
      MemorySegment.copy(
          address, 0, bytes, java.lang.foreign.ValueLayout.JAVA_BYTE, 0, address.length);
      Native.MEMORY.set(JAVA_LONG, addressOut, Abi.FI_ADDR_NOTAVAIL);
      int inserted =
          (int)
              Native.I_LLLLLL.invokeExact(fnAvInsert, av, bytes.address(), 1L, addressOut, 0L, 0L);
      if (inserted < 0) {
        throw new DmaException(
            DmaException.Kind.FABRIC, Native.failure("fi_av_insert", inserted), -inserted, 0, null);
      }
      if (inserted != 1) {
        throw DmaException.fabric("fi_av_insert inserted " + inserted + " of 1 addresses");
      }
      long handle = Native.word(addressOut);
      if (handle < 0 || handle >= MAX_PEER_HANDLE) {
        // Not an FI_AV_TABLE index: keep it out of the post path rather than trust it.
        throw DmaException.fabric(
            "fi_av_insert returned an unexpected fi_addr " + Long.toUnsignedString(handle));
      }
      if (handle >= livePeers.length) {
        livePeers = Arrays.copyOf(livePeers, (int) Math.max(handle + 1, 2L * livePeers.length));
        localPeers = Arrays.copyOf(localPeers, livePeers.length);
      }
      livePeers[(int) handle] = true;
      localPeers[(int) handle] = local;
      return handle;
    } catch (RuntimeException | Error rethrown) {
      throw rethrown;
    } catch (Throwable impossible) {
      throw new AssertionError(impossible);
    }
  }

  /**
   * {@inheritDoc}
   *
   * <p>For a peer that is an shm endpoint of this process and already closed, only the handle is
   * dropped: {@code fi_av_remove} would write into that endpoint's unmapped region (SIGSEGV in
   * {@code smr_unmap_region}); the address vector's close releases the entry safely.
   */
  @Override
  public int removePeer(long handle) {
    ensureOpen();
    if (handle < 0 || handle >= livePeers.length || !livePeers[(int) handle]) {
      return -Abi.FI_ENOENT;
    }
    // Invalidate first: a post against a removed fi_addr crashes tcp;ofi_rxm.
    livePeers[(int) handle] = false;
    ShmNames.Local local = localPeers[(int) handle];
    localPeers[(int) handle] = null;
    if (local != null && !local.open) {
      LOG.log(
          System.Logger.Level.DEBUG,
          "left the AV entry of closed local shm peer " + local.name + " to the AV's close");
      return 0;
    }
    Native.MEMORY.set(JAVA_LONG, addressOut, handle);
    try {
      return (int) Native.I_LLLL.invokeExact(fnAvRemove, av, addressOut, 1L, 0L);
    } catch (Throwable impossible) {
      throw new AssertionError(impossible);
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Registrations

  /** {@inheritDoc} */
  @Override
  public long register(long address, long lengthBytes) {
    return registerMemory(address, lengthBytes, Abi.FI_READ | Abi.FI_WRITE, "fi_mr_reg(operand)");
  }

  private long registerMemory(long address, long lengthBytes, long access, String step) {
    ensureOpen();
    if (lengthBytes <= 0) {
      throw DmaException.fabric("cannot register " + lengthBytes + " bytes");
    }
    synchronized (registrations) {
      // Without FI_MR_PROV_KEY the requested key is the key, and a duplicate in one domain fails
      // with -FI_ENOKEY: hand out unique keys.
      long key = providerKeys ? 0 : nextKey++;
      Native.MEMORY.set(JAVA_LONG, addressOut, 0L);
      int rc;
      try {
        rc =
            (int)
                Native.I_LLLLLLLLL.invokeExact(
                    fnMrReg, domain, address, lengthBytes, access, 0L, key, 0L, addressOut, 0L);
      } catch (Throwable impossible) {
        throw new AssertionError(impossible);
      }
      check(step, rc);
      long mr = Native.word(addressOut);
      registrations.add(mr);
      return mr;
    }
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
    synchronized (registrations) {
      if (registrationsClosed || !registrations.remove(registration)) {
        return;
      }
      int rc = Native.close(registration);
      if (rc != 0) {
        LOG.log(System.Logger.Level.WARNING, Native.failure("fi_close(mr)", rc));
      }
    }
  }

  /**
   * {@inheritDoc}
   *
   * <p>The region is registered with {@code FI_READ|FI_WRITE} plus {@code FI_REMOTE_READ} and
   * {@code FI_REMOTE_WRITE} as asked. Its remote address is the segment's address under {@code
   * FI_MR_VIRT_ADDR}, otherwise 0 (an offset); its key is {@code fi_mr_key}.
   */
  @Override
  public ExposedRegion expose(MemorySegment segment, boolean remoteRead, boolean remoteWrite) {
    if (!segment.isNative()) {
      throw new IllegalArgumentException(
          "only native memory can be exposed: the provider keeps its address");
    }
    long access =
        Abi.FI_READ
            | Abi.FI_WRITE
            | (remoteRead ? Abi.FI_REMOTE_READ : 0)
            | (remoteWrite ? Abi.FI_REMOTE_WRITE : 0);
    long mr = registerMemory(segment.address(), segment.byteSize(), access, "fi_mr_reg(expose)");
    long key = Native.word(mr + Abi.MR_KEY);
    Advertisement advertisement =
        new Advertisement(
            localAddress,
            key,
            virtualAddressing ? segment.address() : 0,
            segment.byteSize() > 0 ? segment.byteSize() : Advertisement.UNKNOWN_LENGTH);
    return new Exposed(mr, advertisement);
  }

  private final class Exposed implements ExposedRegion {
    private final long mr;
    private final Advertisement advertisement;

    Exposed(long mr, Advertisement advertisement) {
      this.mr = mr;
      this.advertisement = advertisement;
    }

    @Override
    public Advertisement advertisement() {
      return advertisement;
    }

    @Override
    public void close() {
      deregister(mr);
    }
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
    slabBase = arena.allocate(count * Abi.CONTEXT2_SIZE, 64).address();
    slots = count;
    queuedSlot = new int[count];
    queuedErrno = new int[count];
    queuedProviderErrno = new int[count];
    queuedMessage = new String[count];
  }

  private boolean postable(int slot, long peer) {
    return slot >= 0
        && slot < slots
        && peer >= 0
        && peer < livePeers.length
        && livePeers[(int) peer];
  }

  /** Whether a live peer is an shm endpoint of this process that has closed (a post: SIGSEGV). */
  private boolean localPeerClosed(long peer) {
    ShmNames.Local local = localPeers[(int) peer];
    return local != null && !local.open;
  }

  /**
   * {@inheritDoc}
   *
   * <p>Returns {@code -FI_EINVAL} without calling libfabric for a slot outside {@code [0, slots)}
   * or a peer handle that is not live: libfabric would use either blindly; {@code -FI_ENOTCONN}
   * for a peer that is an shm endpoint of this process and closed (shm would write into its
   * unmapped region).
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
    if (localPeerClosed(peer)) {
      return -Abi.FI_ENOTCONN;
    }
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
          (long) Native.L_LLL_CRITICAL.invokeExact(fnWritemsg, ep, s + SCRATCH_MSG, WRITE_FLAGS);
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
    if (localPeerClosed(peer)) {
      return -Abi.FI_ENOTCONN;
    }
    try {
      return (int)
          (long)
              Native.L_LLLLLLLL_CRITICAL.invokeExact(
                  fnRead,
                  ep,
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
    return slot < slots ? (int) slot : -1;
  }

  private long cqRead(int count) {
    try {
      return (long) Native.L_LLL_CRITICAL.invokeExact(fnCqRead, cq, entries, (long) count);
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
    int delivered = 0;
    while (queueSize > 0 && delivered < max) {
      int i = queueHead;
      queueHead = i + 1 == queuedSlot.length ? 0 : i + 1;
      queueSize--;
      String message = queuedMessage[i];
      if (message == null) {
        sink.completed(queuedSlot[i]);
      } else {
        queuedMessage[i] = null;
        sink.failed(queuedSlot[i], queuedErrno[i], queuedProviderErrno[i], message);
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
          sink.failed(errorSlot, errorErrno, errorProviderErrno, errorMessage);
          delivered++;
        }
      } else {
        throw new DmaException(
            DmaException.Kind.FABRIC, Native.failure("fi_cq_read", n), (int) -n, 0, null);
      }
    }
    return delivered;
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
      rc = (long) Native.L_LLL_CRITICAL.invokeExact(fnCqReaderr, cq, errorEntry, 0L);
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
                  fnCqStrerror, cq, providerErrno, errData, strerrorBuffer, 256L);
      providerText = text == 0 ? "" : Native.string(text);
    } catch (Throwable impossible) {
      throw new AssertionError(impossible);
    }
    errorSlot = slotOf(context);
    errorErrno = err;
    errorProviderErrno = providerErrno;
    errorMessage = completionMessage(providerName, err, providerErrno, providerText);
    if (errorSlot < 0) {
      orphanCompletions++;
      LOG.log(
          System.Logger.Level.WARNING,
          "dropped a completion error naming no operation: " + errorMessage);
    }
    return true;
  }

  /**
   * The text of a completion error: {@code completion error: <fi_strerror(err)> (err=N); provider:
   * <fi_cq_strerror> (prov_errno=M)}, except where the provider half would mislead:
   *
   * <ul>
   *   <li>{@code prov_errno} 0, or an empty provider text: the provider half is left out.
   *   <li>{@code FI_ECANCELED} on net, tcp and their rxm variants: xnet cancels every queued
   *       operation when the connection closes and stores whatever {@code errno} happened to hold
   *       ({@code ofi_sockerr()} in {@code xnet_report_error}), so its text ("No such file or
   *       directory", "Operation now in progress") is stale. The cause is named instead: the
   *       connection closed, which the target does on an invalid key, range or access.
   *   <li>A provider text equal to {@code fi_strerror(err)} (sockets: "Permission denied" twice):
   *       for {@code FI_EACCES} the cause is named (the target refused the key, range or access),
   *       otherwise the repetition is dropped.
   * </ul>
   *
   * @param provider the provider name, for example {@code net}
   * @param err the positive {@code err}
   * @param providerErrno {@code prov_errno}
   * @param providerText {@code fi_cq_strerror(prov_errno)}, or empty
   * @return the message
   */
  static String completionMessage(
      String provider, int err, int providerErrno, String providerText) {
    String head = "completion error: " + Native.strerror(err) + " (err=" + err + ")";
    if (err == Abi.FI_ECANCELED && cancelsOnConnectionLoss(provider)) {
      return head
          + "; provider: the connection to the peer closed with this operation outstanding, which"
          + " the target does when it refuses a remote key, address range or access, and which a"
          + " peer that closed or died causes too (prov_errno="
          + providerErrno
          + ", a stale errno, not the cause)";
    }
    if (providerErrno == 0 || providerText == null || providerText.isBlank()) {
      return head;
    }
    if (providerText.equals(Native.strerror(err))) {
      return err == Abi.FI_EACCES
          ? head
              + "; provider: the target refused the remote key, address range or access"
              + " (prov_errno="
              + providerErrno
              + ")"
          : head + " (prov_errno=" + providerErrno + ")";
    }
    return head + "; provider: " + providerText + " (prov_errno=" + providerErrno + ")";
  }

  /** xnet (net on 1.x, tcp from 1.18) and rxm over it or over tcpx. */
  private static boolean cancelsOnConnectionLoss(String provider) {
    return provider.equals("net")
        || provider.equals("tcp")
        || provider.startsWith("tcp;")
        || provider.startsWith("net;");
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
    ensureOpen(); // a CQ read after fi_close(cq) would crash inside libfabric
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
        enqueue(slot, 0, 0, null);
      }
    } else if (n == -Abi.FI_EAVAIL) {
      if (readError() && errorSlot >= 0 && queueSize < queuedSlot.length) {
        enqueue(errorSlot, errorErrno, errorProviderErrno, errorMessage);
      }
    } else if (n != -Abi.FI_EAGAIN) {
      throw new DmaException(
          DmaException.Kind.FABRIC, Native.failure("fi_cq_read", n), (int) -n, 0, null);
    }
  }

  private void enqueue(int slot, int errno, int providerErrno, String message) {
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
  @Override
  public void close() {
    if (closed) {
      return;
    }
    closed = true;
    if (shmSelf != null) {
      // Before fi_close(ep) unmaps the region: from now on no endpoint of this process removes,
      // inserts or posts to this name.
      shmSelf.open = false;
    }
    synchronized (registrations) {
      for (long mr : registrations) {
        closeLogged("fi_close(mr)", mr);
      }
      registrations.clear();
      registrationsClosed = true;
    }
    ep = closeLogged("fi_close(ep)", ep);
    cq = closeLogged("fi_close(cq)", cq);
    av = closeLogged("fi_close(av)", av);
    domain = closeLogged("fi_close(domain)", domain);
    fabric = closeLogged("fi_close(fabric)", fabric);
    Native.freeinfo(info);
    info = 0;
    slots = 0;
    Arrays.fill(livePeers, false);
    Arrays.fill(localPeers, null);
    arena.close();
  }

  /**
   * {@inheritDoc}
   *
   * <p>Closes the endpoint, then its completion queue and address vector (children before
   * parents, as {@link #close()} does), and opens all three again on the same domain with the same
   * {@code fi_info}. Registrations belong to the domain and stay valid; the op-slot slab stays
   * (the provider stopped writing contexts at {@code fi_close(ep)}); completions read but not yet
   * delivered are dropped with the operations they name. tcp and sockets bind a new ephemeral
   * port, so the local address changes.
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
   *       removal; tcp;ofi_rxm crashes on a later post to the removed address; shm and
   *       udp;ofi_rxd lose a bad write's completion altogether;
   *   <li>EFA.md: on {@code efa} the removal releases the peer's entries, so its operations never
   *       complete; on efa-direct it destroys the address handle under posted work requests;
   *   <li>the libfabric man page ({@code fi_av}) leaves removal with operations outstanding
   *       undefined.
   * </ul>
   *
   * Closing the endpoint is the one state in which no provider can still touch an operand.
   *
   * @throws DmaException when reopening fails; the endpoint is then closed
   */
  @Override
  public void reset() {
    ensureOpen();
    if (shmSelf != null) {
      // As in close(): the old endpoint's region goes with fi_close(ep); the reopened endpoint
      // registers its own (new) name.
      shmSelf.open = false;
      shmSelf = null;
    }
    ep = closeLogged("fi_close(ep)", ep);
    cq = closeLogged("fi_close(cq)", cq);
    av = closeLogged("fi_close(av)", av);
    queueHead = 0;
    queueSize = 0;
    Arrays.fill(queuedMessage, null);
    Arrays.fill(livePeers, false);
    Arrays.fill(localPeers, null);
    try {
      openTransport();
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

  private static long closeLogged(String what, long fid) {
    if (fid != 0) {
      int rc = Native.close(fid);
      if (rc != 0) {
        LOG.log(System.Logger.Level.WARNING, Native.failure(what, rc));
      }
    }
    return 0;
  }

  @Override
  public String toString() {
    return "LibfabricEndpoint[" + providerName + " on " + domainName + "]";
  }
}
