package dev.dma.libfabric;

import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import dev.dma.api.DmaConfiguration;
import dev.dma.api.DmaException;
import dev.dma.libfabric.internal.Abi;
import dev.dma.libfabric.internal.Native;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import org.jspecify.annotations.Nullable;

/**
 * The libfabric objects of one {@link LibfabricEndpoint}, from the duplicated {@code fi_info} down
 * to the endpoint, with the function pointers read from their ops tables and what libfabric
 * returned: it opens them, reopens the transport part for a reset and closes them.
 *
 * <ul>
 *   <li>Opens fabric, domain, AV ({@code FI_AV_TABLE}), CQ ({@code FI_CQ_FORMAT_CONTEXT}, no wait
 *       object), endpoint, binds AV and CQ ({@code FI_TRANSMIT|FI_RECV}) and enables it; a failure
 *       names its step: {@code "fi_domain: <fi_strerror> (<code>)"}.
 *   <li>Keeps the JVM's SIGSEGV/SIGBUS/SIGILL/SIGFPE handlers across {@code fi_fabric}, {@code
 *       fi_domain} and {@code fi_endpoint} ({@link Native#getinfo} does across {@code fi_getinfo}):
 *       shm's first endpoint otherwise installs handlers that unlink its shared memory on the JVM's
 *       deliberate SIGSEGVs.
 *   <li>For shm, keeps this endpoint's own {@link ShmNames} record and marks it closed before the
 *       endpoint is, so no endpoint of this process touches its unmapped region.
 * </ul>
 *
 * <p>Only the endpoint's owner thread calls it. The handles and function pointers are plain fields,
 * 0 or {@code MemorySegment.NULL} until opened, read directly by the endpoint's data path: the JIT
 * loads them as it would the endpoint's own fields. They change only in {@link #open}, {@link
 * #openTransport} and the closes, all on the owner thread. Memory it allocates (out-parameters,
 * attributes, the endpoint name) comes from the endpoint's arena, which the endpoint closes after
 * {@link #closeDomain()}.
 */
final class FabricObjects {
  /** Under the endpoint's name, as before these objects had a class of their own. */
  private static final System.Logger LOG = System.getLogger(LibfabricEndpoint.class.getName());

  /** Attribute structs grow in newer versions (fi_cq_attr gains xpu_ctx): allocate with slack. */
  private static final long ATTR_BYTES = 128;

  private final EndpointPolicy policy;
  private final Arena arena;

  // Native objects, 0 until opened; closed in reverse order by closeTransport() and closeDomain().
  long info;
  long fabric;
  long domain;
  long av;
  long cq;
  long ep;

  // Function pointers, read once from the ops tables (again by openTransport() after a reset).
  MemorySegment fnWritemsg = MemorySegment.NULL;
  MemorySegment fnRead = MemorySegment.NULL;
  MemorySegment fnFetchAtomicmsg = MemorySegment.NULL;
  MemorySegment fnCqRead = MemorySegment.NULL;
  MemorySegment fnCqReaderr = MemorySegment.NULL;
  MemorySegment fnCqStrerror = MemorySegment.NULL;
  MemorySegment fnAvInsert = MemorySegment.NULL;
  MemorySegment fnAvRemove = MemorySegment.NULL;
  MemorySegment fnAvLookup = MemorySegment.NULL;
  MemorySegment fnMrReg = MemorySegment.NULL;

  /**
   * What libfabric returned for the chosen entry. Until it is read back: empty names and zero bits,
   * which is what an endpoint that failed to open describes itself with.
   */
  InfoFacts facts = new InfoFacts("", "", "", 0, 0, 0, 0, 0, 0, 0, 0, 0);

  /**
   * Whether to open the completion queue with a wait object for a passive target ({@link
   * LibfabricEndpoint#awaitIncoming}); set before {@link #open}.
   */
  boolean forTarget;

  /** The completion queue's wait fd, or -1 when it has none (see {@link #forTarget}). */
  int waitFd = -1;

  /** {@code fi_trywait}, read with {@link #waitFd}. */
  MemorySegment fnTrywait = MemorySegment.NULL;

  /**
   * A passive target's counter of the peers' RMA it served ({@code FI_REMOTE_WRITE |
   * FI_REMOTE_READ} bound to the endpoint), or 0: opened only for a target without a {@link
   * #waitFd}, as its activity signal ({@link LibfabricEndpoint#incomingServed}).
   */
  long cntr;

  /** {@code fi_cntr_read}, with {@link #cntr}. */
  MemorySegment fnCntrRead = MemorySegment.NULL;

  /** The endpoint's name ({@code fi_getname}); a reset changes it (tcp binds a new port). */
  byte[] localAddress = new byte[0];

  // For shm: this endpoint's own record, marked closed just before fi_close(ep).
  private ShmNames.@Nullable Local shmSelf;

  /**
   * Creates the objects, none open yet.
   *
   * @param policy the provider's choices
   * @param arena the endpoint's arena, open until after {@link #closeDomain()}
   */
  FabricObjects(EndpointPolicy policy, Arena arena) {
    this.policy = policy;
    this.arena = arena;
  }

  /**
   * The node an endpoint's (and a domain listing's) {@code fi_getinfo} passes with {@code
   * FI_SOURCE}: the configuration's {@code bind}, else the policy's default; none for shm.
   *
   * @param policy the provider's choices
   * @param configuration the bind
   * @return the node, or null for none
   */
  static @Nullable String sourceNode(EndpointPolicy policy, DmaConfiguration configuration) {
    if (Quirks.takesNoSourceNode(policy.providerName())) {
      // shm names the endpoint after a source node instead of the pid (fi_shm://127.0.0.1:0:0),
      // so two processes binding the same address collide with EBUSY. Its names are local to
      // this host's /dev/shm anyway: leave the node out and get fi_shm://<pid>:<uid>:<index>.
      return null;
    }
    return configuration.bind() != null ? configuration.bind() : policy.defaultSourceNode();
  }

  /**
   * Opens everything (SEED-SPEC 5.2): queries with the policy's hints, picks the domain named by
   * {@code interfaces[0]} (or the first), reads back what libfabric returned, and opens fabric,
   * domain and the transport ({@link #openTransport}).
   *
   * @param configuration the interfaces and bind to use
   * @throws DmaException of kind FABRIC naming the step that failed; what was opened stays open for
   *     the caller to close
   */
  void open(DmaConfiguration configuration) {
    String node = sourceNode(policy, configuration);
    if (node == null
        && Quirks.takesNoSourceNode(policy.providerName())
        && configuration.bind() != null) {
      LOG.log(
          System.Logger.Level.DEBUG,
          "shm ignores the source node \""
              + configuration.bind()
              + "\": its names carry the pid instead");
    }
    long list = FabricQuery.query(policy, node);
    try {
      long chosen = FabricQuery.choose(list, configuration.interfaces(), policy.providerName());
      info = Native.dupinfo(chosen);
      if (info == 0) {
        throw DmaException.fabric("fi_dupinfo failed");
      }
    } finally {
      Native.freeinfo(list);
    }
    // One reading of the returned entry, and one place for the decisions taken from it, so the
    // provider modules' policy tests run exactly what the endpoint runs.
    facts = InfoFacts.read(info);
    facts.requireSupported();

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
   * Opens one object on the domain through its ops table ({@code fi_av_open}, {@code fi_cq_open}):
   * {@code op(domain, attr, &out, NULL)}, checked.
   *
   * @return the opened fid, read from {@code out}
   */
  private long openOnDomain(
      long domainOps, long opOffset, String step, MemorySegment attr, MemorySegment out)
      throws Throwable {
    int rc =
        (int)
            Native.I_LLLL.invokeExact(
                Native.function(domainOps, opOffset, step),
                domain,
                attr.address(),
                out.address(),
                0L);
    check(step, rc);
    return out.get(JAVA_LONG, 0);
  }

  /**
   * Opens the address vector, the completion queue and the endpoint on the open domain, binds and
   * enables the endpoint and reads back its ops tables and name: the part of opening that {@link
   * LibfabricEndpoint#reset()} repeats after {@link #closeTransport()}.
   *
   * @throws Throwable a {@link DmaException} of kind FABRIC naming the step that failed
   */
  void openTransport() throws Throwable {
    MemorySegment out = arena.allocate(JAVA_LONG);
    long outAddress = out.address();
    int rc;
    long domainOps = Native.word(domain + Abi.DOMAIN_OPS);
    MemorySegment avAttr = arena.allocate(ATTR_BYTES, 8);
    avAttr.set(JAVA_INT, Abi.AV_ATTR_TYPE, Abi.FI_AV_TABLE);
    av = openOnDomain(domainOps, Abi.OPS_DOMAIN_AV_OPEN, "fi_av_open", avAttr, out);
    long avOps = Native.word(av + Abi.AV_OPS);
    fnAvInsert = Native.function(avOps, Abi.OPS_AV_INSERT, "fi_av_insert");
    fnAvRemove = Native.function(avOps, Abi.OPS_AV_REMOVE, "fi_av_remove");
    // Optional here: only the sockets removal quirk asks it (AddressVector.remove).
    fnAvLookup = MemorySegment.ofAddress(Native.word(avOps + Abi.OPS_AV_LOOKUP));

    // Zeroed apart from the format: default size, and no wait object (FI_WAIT_NONE is 0).
    MemorySegment cqAttr = arena.allocate(ATTR_BYTES, 8);
    cqAttr.set(JAVA_INT, Abi.CQ_ATTR_FORMAT, Abi.FI_CQ_FORMAT_CONTEXT);
    waitFd = -1;
    if (forTarget && Quirks.wakesOnIncoming(facts.providerName())) {
      cqAttr.set(JAVA_INT, Abi.CQ_ATTR_WAIT_OBJ, Abi.FI_WAIT_FD);
      try {
        cq = openOnDomain(domainOps, Abi.OPS_DOMAIN_CQ_OPEN, "fi_cq_open", cqAttr, out);
        waitFd = fetchWaitFd();
      } catch (DmaException refused) {
        // A target that cannot sleep still works: it spins. Open the queue as an initiator does.
        LOG.log(
            System.Logger.Level.DEBUG,
            "no wait fd for a passive target's completion queue: " + refused.getMessage());
        if (cq != 0) {
          cq = closeLogged("fi_close(cq)", cq);
        }
        cqAttr.set(JAVA_INT, Abi.CQ_ATTR_WAIT_OBJ, 0);
      }
    }
    if (cq == 0) {
      cq = openOnDomain(domainOps, Abi.OPS_DOMAIN_CQ_OPEN, "fi_cq_open", cqAttr, out);
    }
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
    if (forTarget && waitFd < 0 && Quirks.countsServedRma(facts.providerName())) {
      bindServedCounter(domainOps, fnBind, out);
    }
    rc =
        (int)
            Native.I_LIL.invokeExact(
                Native.function(epOps, Abi.OPS_CONTROL, "fi_enable"), ep, Abi.FI_ENABLE, 0L);
    check("fi_enable", rc);

    long rma = Native.word(ep + Abi.EP_RMA);
    fnWritemsg = Native.function(rma, Abi.OPS_RMA_WRITEMSG, "fi_writemsg");
    fnRead = Native.function(rma, Abi.OPS_RMA_READ, "fi_read");
    // Only for the write check on shm 2.5+ (LibfabricEndpoint): other providers are not asked for
    // an atomic table they may not have.
    if (Quirks.shmReportsRefusedRmaAsDone(facts.providerName(), Libfabric.version())) {
      fnFetchAtomicmsg =
          Native.function(
              Native.word(ep + Abi.EP_ATOMIC), Abi.OPS_ATOMIC_READWRITEMSG, "fi_fetch_atomicmsg");
    }
    localAddress = fetchName();
    if (facts.addrFormat() == Abi.FI_ADDR_STR) {
      String name = ShmNames.nameOf(localAddress);
      if (name != null) {
        shmSelf = ShmNames.opened(name);
        ShmNames.reportLeftoversOnce(LOG);
      }
    }
  }

  /**
   * Opens a counter and binds it to the endpoint for the peers' writes and reads it serves, so a
   * target that has no wait object can still tell that traffic is flowing. shm counts them as its
   * progress handles each command (prov/shm/src/smr_comp.c, {@code smr_complete_rx}), and was seen
   * counting on 1.17, 2.1 and 2.6. shm only: a counter that a provider accepts but never moves
   * (efa's RDMA writes need no progress at the target, so may count nothing) would make a busy
   * target nap between transfers. A refusal leaves the target without the signal: it then spins and
   * yields as before.
   */
  private void bindServedCounter(long domainOps, MemorySegment fnBind, MemorySegment out)
      throws Throwable {
    MemorySegment attr = arena.allocate(Abi.CNTR_ATTR_BYTES, 8);
    try {
      cntr = openOnDomain(domainOps, Abi.OPS_DOMAIN_CNTR_OPEN, "fi_cntr_open", attr, out);
      int rc =
          (int)
              Native.I_LLL.invokeExact(fnBind, ep, cntr, Abi.FI_REMOTE_WRITE | Abi.FI_REMOTE_READ);
      check("fi_ep_bind(cntr, FI_REMOTE_WRITE | FI_REMOTE_READ)", rc);
      fnCntrRead =
          Native.function(Native.word(cntr + Abi.CNTR_OPS), Abi.OPS_CNTR_READ, "fi_cntr_read");
    } catch (DmaException refused) {
      LOG.log(
          System.Logger.Level.DEBUG,
          "no counter of served RMA for a passive target: " + refused.getMessage());
      fnCntrRead = MemorySegment.NULL;
      cntr = closeLogged("fi_close(cntr)", cntr);
    }
  }

  /** The completion queue's wait fd ({@code fi_control(FI_GETWAIT)}) and {@code fi_trywait}. */
  private int fetchWaitFd() throws Throwable {
    MemorySegment fd = arena.allocate(JAVA_INT);
    fd.set(JAVA_INT, 0, -1);
    int rc =
        (int)
            Native.I_LIL.invokeExact(
                Native.function(Native.word(cq + Abi.FID_OPS), Abi.OPS_CONTROL, "fi_control"),
                cq,
                Abi.FI_GETWAIT,
                fd.address());
    check("fi_control(cq, FI_GETWAIT)", rc);
    fnTrywait =
        Native.function(Native.word(fabric + Abi.FABRIC_OPS), Abi.OPS_FABRIC_TRYWAIT, "fi_trywait");
    int value = fd.get(JAVA_INT, 0);
    if (value < 0) {
      throw DmaException.fabric("fi_control(cq, FI_GETWAIT) returned no fd");
    }
    return value;
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

  /**
   * Marks this endpoint's own shm record closed, if it has one; called before {@code fi_close(ep)}
   * unmaps the region: from then on no endpoint of this process removes, inserts or posts to this
   * name. A reopened endpoint registers its own (new) name.
   */
  void markSelfClosed() {
    ShmNames.Local self = shmSelf;
    if (self != null) {
      // Under the record's monitor, which a post to it from another endpoint of this process
      // holds from its check of open to its return: the region is not unmapped inside a post.
      synchronized (self) {
        self.open = false;
      }
      shmSelf = null;
    }
  }

  /**
   * Closes the endpoint, then its completion queue and address vector (children before parents),
   * each only if it was opened; a failed close is logged and the next object is still closed.
   *
   * @return null, or the failure of {@code fi_close(ep)}: the provider may then still be working on
   *     the endpoint's posted operations
   */
  @Nullable String closeTransport() {
    String endpointFailure = null;
    if (ep != 0) {
      int rc = Native.close(ep);
      ep = 0;
      if (rc != 0) {
        endpointFailure = Native.failure("fi_close(ep)", rc);
        LOG.log(System.Logger.Level.ERROR, endpointFailure);
      }
    }
    fnCntrRead = MemorySegment.NULL;
    cntr = closeLogged("fi_close(cntr)", cntr);
    cq = closeLogged("fi_close(cq)", cq);
    av = closeLogged("fi_close(av)", av);
    return endpointFailure;
  }

  /**
   * Closes the domain, the fabric and frees the duplicated info, each only if it was opened; after
   * {@link #closeTransport()} and after every registration of the domain is closed. A parent is
   * never closed twice: tcp;ofi_rxm frees part of a domain before returning {@code -FI_EBUSY}, and
   * a retry aborts the process.
   */
  void closeDomain() {
    domain = closeLogged("fi_close(domain)", domain);
    fabric = closeLogged("fi_close(fabric)", fabric);
    Native.freeinfo(info);
    info = 0;
  }

  /**
   * Throws for a failed control-path call.
   *
   * @param step the call, named in the message
   * @param rc what it returned
   * @throws DmaException of kind FABRIC carrying {@code -rc} when {@code rc} is not 0
   */
  static void check(String step, int rc) {
    if (rc != 0) {
      throw new DmaException(DmaException.Kind.FABRIC, Native.failure(step, rc), -rc, 0, null);
    }
  }

  /**
   * Closes {@code fid} if it is open, logging a failure instead of throwing.
   *
   * @param what the call, named in the log
   * @param fid the object, or 0
   * @return 0, for the caller to store
   */
  static long closeLogged(String what, long fid) {
    if (fid != 0) {
      int rc = Native.close(fid);
      if (rc != 0) {
        LOG.log(System.Logger.Level.WARNING, Native.failure(what, rc));
      }
    }
    return 0;
  }
}
