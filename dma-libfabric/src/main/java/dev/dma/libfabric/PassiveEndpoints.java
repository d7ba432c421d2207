package dev.dma.libfabric;

import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import dev.dma.api.Advertisement;
import dev.dma.api.DmaConfiguration;
import dev.dma.api.DmaException;
import dev.dma.api.RemoteAccess;
import dev.dma.libfabric.internal.Abi;
import dev.dma.libfabric.internal.Native;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;

/**
 * Many passive endpoints at the cost of one: a single fabric, domain, address vector and completion
 * queue, one registration of one buffer, and any number of endpoints bound to them, each with its
 * own fabric address. This is how a process that stands for thousands of clients (a benchmark's or
 * a test's passive side) keeps them all progressed with one {@code fi_cq_read} per pass: the
 * providers this serves (tcp and net, whose progress engine belongs to the domain; tcp;ofi_rxm and
 * shm, whose completion queue progresses every endpoint bound to it) move incoming RMA for every
 * endpoint while that one queue is read. A {@link dev.dma.core.PassiveTarget} per client instead
 * costs a fabric, a domain, a queue and a thread each.
 *
 * <p>Every endpoint advertises a window of the one registration ({@link #advertisement}), so each
 * client can be given bytes of its own. Providers that bind registrations to endpoints ({@code
 * FI_MR_ENDPOINT}, efa-direct) are refused when opening, like {@link LibfabricEndpoint} refuses
 * them.
 *
 * <p>Threads: not thread-safe; one thread opens it, adds and removes endpoints, progresses and
 * closes it (libfabric objects are used by one thread, as everywhere in dma). Ownership: the caller
 * owns the buffer and keeps it alive until {@link #close()} returns; {@link #close()} closes every
 * endpoint still open, then the queue, the address vector, the registration, the domain and the
 * fabric.
 */
public final class PassiveEndpoints implements AutoCloseable {
  /** Completion entries read per progress call; passive endpoints post nothing, so rarely any. */
  private static final int ENTRIES = 16;

  /** Attribute structs grow in newer versions: allocate with slack (as {@link FabricObjects}). */
  private static final long ATTR_BYTES = 128;

  private final Arena arena = Arena.ofConfined();
  private final MemorySegment out = arena.allocate(JAVA_LONG);
  private final MemorySegment entries = arena.allocate(Abi.CQ_ENTRY_SIZE * ENTRIES, 8);
  private final MemorySegment errorEntry = arena.allocate(256, 8);
  private final MemorySegment nameLength = arena.allocate(JAVA_LONG);
  private final MemorySegment name = arena.allocate(256, 8);
  private final List<Long> endpoints = new ArrayList<>();
  private final List<byte[]> addresses = new ArrayList<>();
  private final MemorySegment memory;
  private InfoFacts facts = new InfoFacts("", "", "", 0, 0, 0, 0, 0, 0, 0, 0, 0);
  private long info;
  private long fabric;
  private long domain;
  private long av;
  private long cq;
  private long mr;
  private long key;
  private int open;
  private long errors;
  private MemorySegment fnCqRead = MemorySegment.NULL;
  private MemorySegment fnCqReaderr = MemorySegment.NULL;

  private PassiveEndpoints(MemorySegment memory) {
    this.memory = memory;
  }

  /**
   * Opens the shared objects and registers {@code memory} for remote access; no endpoint yet.
   *
   * @param policy the provider's choices, as the provider that serves the clients' dma provider
   *     makes them ({@code TcpProvider.policy()}, {@link LibfabricProvider#policyFor})
   * @param configuration the bind address and interfaces
   * @param memory native memory every endpoint advertises a window of
   * @param access what peers may do to it
   * @return the open set
   * @throws DmaException of kind FABRIC naming the step that failed, or for a provider whose
   *     registrations are bound to endpoints
   */
  public static PassiveEndpoints open(
      EndpointPolicy policy,
      DmaConfiguration configuration,
      MemorySegment memory,
      RemoteAccess access) {
    Native.require();
    if (!memory.isNative()) {
      throw DmaException.fabric(
          "only native memory can be exposed: the provider keeps its address");
    }
    PassiveEndpoints set = new PassiveEndpoints(memory);
    try {
      set.openShared(policy, configuration, access);
      return set;
    } catch (RuntimeException | Error failed) {
      try {
        set.close();
      } catch (RuntimeException suppressed) {
        failed.addSuppressed(suppressed);
      }
      throw failed;
    }
  }

  private void openShared(
      EndpointPolicy policy, DmaConfiguration configuration, RemoteAccess access) {
    // shm names endpoints after the pid (see FabricObjects.sourceNode)
    String node = FabricObjects.sourceNode(policy, configuration);
    long list = FabricQuery.query(policy, node);
    try {
      info =
          Native.dupinfo(
              FabricQuery.choose(list, configuration.interfaces(), policy.providerName()));
      if (info == 0) {
        throw DmaException.fabric("fi_dupinfo failed");
      }
    } finally {
      Native.freeinfo(list);
    }
    facts = InfoFacts.read(info);
    // Refuses FI_MR_ENDPOINT too: one registration serves every endpoint here.
    facts.requireSupported();
    try {
      int rc;
      try (var _ = Native.SignalGuard.save()) {
        rc =
            (int)
                Native.I_LLL.invokeExact(
                    Native.FI_FABRIC, Native.word(info + Abi.INFO_FABRIC_ATTR), out.address(), 0L);
      }
      FabricObjects.check("fi_fabric", rc);
      fabric = out.get(JAVA_LONG, 0);
      MemorySegment fnDomain =
          Native.function(Native.word(fabric + Abi.FABRIC_OPS), Abi.OPS_FABRIC_DOMAIN, "fi_domain");
      try (var _ = Native.SignalGuard.save()) {
        rc = (int) Native.I_LLLL.invokeExact(fnDomain, fabric, info, out.address(), 0L);
      }
      FabricObjects.check("fi_domain", rc);
      domain = out.get(JAVA_LONG, 0);
      long domainOps = Native.word(domain + Abi.DOMAIN_OPS);

      MemorySegment avAttr = arena.allocate(ATTR_BYTES, 8);
      avAttr.set(JAVA_INT, Abi.AV_ATTR_TYPE, Abi.FI_AV_TABLE);
      av = openOnDomain(domainOps, Abi.OPS_DOMAIN_AV_OPEN, "fi_av_open", avAttr);
      MemorySegment cqAttr = arena.allocate(ATTR_BYTES, 8);
      cqAttr.set(JAVA_INT, Abi.CQ_ATTR_FORMAT, Abi.FI_CQ_FORMAT_CONTEXT);
      cq = openOnDomain(domainOps, Abi.OPS_DOMAIN_CQ_OPEN, "fi_cq_open", cqAttr);
      long cqOps = Native.word(cq + Abi.CQ_OPS);
      fnCqRead = Native.function(cqOps, Abi.OPS_CQ_READ, "fi_cq_read");
      fnCqReaderr = Native.function(cqOps, Abi.OPS_CQ_READERR, "fi_cq_readerr");

      long flags =
          Abi.FI_READ
              | Abi.FI_WRITE
              | (access.allowsRead() ? Abi.FI_REMOTE_READ : 0)
              | (access.allowsWrite() ? Abi.FI_REMOTE_WRITE : 0);
      MemorySegment fnMrReg =
          Native.function(Native.word(domain + Abi.DOMAIN_MR), Abi.OPS_MR_REG, "fi_mr_reg");
      out.set(JAVA_LONG, 0, 0L);
      rc =
          (int)
              Native.I_LLLLLLLLL.invokeExact(
                  fnMrReg,
                  domain,
                  memory.address(),
                  memory.byteSize(),
                  flags,
                  0L,
                  facts.providerKeys() ? 0L : 1L,
                  0L,
                  out.address(),
                  0L);
      FabricObjects.check("fi_mr_reg(expose)", rc);
      mr = out.get(JAVA_LONG, 0);
      key = Native.word(mr + Abi.MR_KEY);
    } catch (RuntimeException | Error rethrown) {
      throw rethrown;
    } catch (Throwable impossible) {
      throw new AssertionError(impossible);
    }
  }

  private long openOnDomain(long domainOps, long opOffset, String step, MemorySegment attr)
      throws Throwable {
    int rc =
        (int)
            Native.I_LLLL.invokeExact(
                Native.function(domainOps, opOffset, step),
                domain,
                attr.address(),
                out.address(),
                0L);
    FabricObjects.check(step, rc);
    return out.get(JAVA_LONG, 0);
  }

  /**
   * The libfabric provider the endpoints run on, for example {@code net} or {@code tcp;ofi_rxm}.
   *
   * @return its name
   */
  public String provider() {
    return facts.providerName();
  }

  /**
   * Opens one more endpoint on the shared domain, bound to the shared address vector and queue.
   *
   * @return its index, for {@link #address}, {@link #advertisement} and {@link #remove}
   * @throws DmaException of kind FABRIC naming the step that failed (for example {@code
   *     fi_endpoint: Too many open files (24)} at the process's file limit)
   */
  public int add() {
    long ep = 0;
    try {
      int rc;
      MemorySegment fnEndpoint =
          Native.function(
              Native.word(domain + Abi.DOMAIN_OPS), Abi.OPS_DOMAIN_ENDPOINT, "fi_endpoint");
      try (var _ = Native.SignalGuard.save()) {
        rc = (int) Native.I_LLLL.invokeExact(fnEndpoint, domain, info, out.address(), 0L);
      }
      FabricObjects.check("fi_endpoint", rc);
      ep = out.get(JAVA_LONG, 0);
      long epOps = Native.word(ep + Abi.FID_OPS);
      MemorySegment fnBind = Native.function(epOps, Abi.OPS_BIND, "fi_ep_bind");
      rc = (int) Native.I_LLL.invokeExact(fnBind, ep, av, 0L);
      FabricObjects.check("fi_ep_bind(av)", rc);
      rc = (int) Native.I_LLL.invokeExact(fnBind, ep, cq, Abi.FI_TRANSMIT | Abi.FI_RECV);
      FabricObjects.check("fi_ep_bind(cq)", rc);
      rc =
          (int)
              Native.I_LIL.invokeExact(
                  Native.function(epOps, Abi.OPS_CONTROL, "fi_enable"), ep, Abi.FI_ENABLE, 0L);
      FabricObjects.check("fi_enable", rc);
      MemorySegment fnGetname =
          Native.function(Native.word(ep + Abi.EP_CM), Abi.OPS_CM_GETNAME, "fi_getname");
      nameLength.set(JAVA_LONG, 0, name.byteSize());
      rc = (int) Native.I_LLL.invokeExact(fnGetname, ep, name.address(), nameLength.address());
      FabricObjects.check("fi_getname", rc);
      long length = Math.min(name.byteSize(), nameLength.get(JAVA_LONG, 0));
      byte[] address = name.asSlice(0, length).toArray(java.lang.foreign.ValueLayout.JAVA_BYTE);
      endpoints.add(ep);
      addresses.add(address);
      open++;
      return endpoints.size() - 1;
    } catch (RuntimeException | Error failed) {
      FabricObjects.closeLogged("fi_close(ep)", ep);
      throw failed;
    } catch (Throwable impossible) {
      throw new AssertionError(impossible);
    }
  }

  /**
   * An endpoint's fabric address.
   *
   * @param index from {@link #add()}
   * @return a copy
   */
  public byte[] address(int index) {
    return addresses.get(index).clone();
  }

  /**
   * What a server needs to reach {@code lengthBytes} of the buffer at {@code offset} through one
   * endpoint: its address, the shared key, and the window's remote address ({@code
   * FI_MR_VIRT_ADDR}: the virtual address; otherwise the offset).
   *
   * @param index from {@link #add()}
   * @param offset the window's first byte in the buffer
   * @param lengthBytes the window's length
   * @return the advertisement
   * @throws IndexOutOfBoundsException for a window outside the buffer
   */
  public Advertisement advertisement(int index, long offset, long lengthBytes) {
    java.util.Objects.checkFromIndexSize(offset, lengthBytes, memory.byteSize());
    return new Advertisement(
        addresses.get(index),
        key,
        facts.virtualAddressing() ? memory.address() + offset : offset,
        lengthBytes);
  }

  /**
   * Closes one endpoint (a client leaving); its index is not reused. Harmless for one closed
   * already.
   *
   * @param index from {@link #add()}
   */
  public void remove(int index) {
    long ep = endpoints.get(index);
    if (ep != 0) {
      endpoints.set(index, 0L);
      open--;
      FabricObjects.closeLogged("fi_close(ep)", ep);
    }
  }

  /**
   * Endpoints open now.
   *
   * @return the count
   */
  public int size() {
    return open;
  }

  /**
   * Error completions read so far (passive endpoints post nothing, so normally none).
   *
   * @return the count
   */
  public long errors() {
    return errors;
  }

  /**
   * Reads the shared completion queue once: the call in which the provider moves incoming RMA for
   * every endpoint. Error entries are read and counted.
   *
   * @return entries read, normally 0
   */
  public int progress() {
    try {
      long n =
          (long) Native.L_LLL_CRITICAL.invokeExact(fnCqRead, cq, entries.address(), (long) ENTRIES);
      if (n == -Abi.FI_EAVAIL) {
        n = (long) Native.L_LLL_CRITICAL.invokeExact(fnCqReaderr, cq, errorEntry.address(), 0L);
        if (n > 0) {
          errors += n;
        }
        return 0;
      }
      return n > 0 ? (int) n : 0;
    } catch (Throwable impossible) {
      throw new AssertionError(impossible);
    }
  }

  /** Closes every endpoint, then the shared objects, children before parents. Idempotent. */
  @Override
  public void close() {
    for (int i = 0; i < endpoints.size(); i++) {
      remove(i);
    }
    cq = FabricObjects.closeLogged("fi_close(cq)", cq);
    av = FabricObjects.closeLogged("fi_close(av)", av);
    mr = FabricObjects.closeLogged("fi_close(mr)", mr);
    domain = FabricObjects.closeLogged("fi_close(domain)", domain);
    fabric = FabricObjects.closeLogged("fi_close(fabric)", fabric);
    if (info != 0) {
      Native.freeinfo(info);
      info = 0;
    }
    if (arena.scope().isAlive()) {
      arena.close();
    }
  }
}
