package dev.dma.fake;

import dev.dma.api.DmaException;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.jspecify.annotations.Nullable;

/**
 * One named in-JVM fabric: its endpoints address each other, its {@link FakeScript} decides what
 * they do wrong, and its {@link FakeCounters} say what they were asked to do.
 *
 * <h2>Names</h2>
 *
 * Fabrics are registered process-wide by name, so a {@link dev.dma.api.DmaConfiguration} reaches
 * one: provider {@code fake} opens its endpoint on the fabric named by the first of {@code
 * interfaces}, or on the {@linkplain #defaultFabric() default fabric} {@value #DEFAULT_NAME} when
 * there is none. A test creates its own fabric under a unique name and closes it when done, so
 * tests running in one JVM never share a script:
 *
 * <pre>{@code
 * try (FakeFabric fabric = FakeFabric.create("orders-test")) {
 *   fabric.script().maxTx(4).failOp(OpMatcher.nth(2), FiErrno.EIO, -5, "Input/output error");
 *   DmaConfiguration configuration =
 *       DmaConfiguration.builder().providers("fake").interfaces(List.of("orders-test")).build();
 *   FakeEndpoint target = fabric.openEndpoint(); // a passive client, driven by the test
 *   ... // a FabricService on `configuration`, transfers to the target's exposed region
 *   assertEquals(0, fabric.counters().violations(), fabric.counters().lastViolation());
 * }
 * }</pre>
 *
 * <h2>Watched operands: nothing touched after delivery</h2>
 *
 * dma promises that once a transfer's completion reached the caller, success or failure, nothing
 * touches its local operand again. A test holds the fake to that with {@link
 * #watchOperand(MemorySegment)}: it allocates each operand from an arena of its own, watches it,
 * and closes that arena in its {@link dev.dma.api.BatchCompleter} when the completion arrives. The
 * fake then moves a watched operand's bytes through the segment itself, so an access after the
 * arena closed fails inside the fake instead of touching freed memory, and it records every such
 * access, and every op still owned by the provider when its operand was released, in {@link
 * #operandViolations()} (and in {@link FakeCounters#violations()}). The truth is the caller's: the
 * arena closes exactly when the completion is delivered, whichever worker, pool or group delivered
 * it, and the fake checks against that at every point where it touches or lets go of an operand (a
 * post's landing, a held or awaiting op released later, reap, reset and close).
 *
 * <h2>Threads and ownership</h2>
 *
 * A fabric is thread-safe: every endpoint, region and script operation takes its one lock, which is
 * never held while calling user code other than the script's conditions and matchers. Whoever
 * creates a fabric closes it; closing unregisters its name and closes every endpoint still open.
 */
public final class FakeFabric implements AutoCloseable {
  /** The fabric provider {@code fake} uses when the configuration names no interface. */
  public static final String DEFAULT_NAME = "fake0";

  private static final Object REGISTRY_LOCK = new Object();
  // Insertion-ordered, so discoverDomains lists fabrics in the order they were created.
  private static final Map<String, FakeFabric> REGISTRY = new LinkedHashMap<>();
  private static int nextSerial = 1;

  /** Guards all state of this fabric, its endpoints, registrations, regions and script. */
  final Object lock = new Object();

  final Counts counts = new Counts(null);
  private final String name;
  private final int serial;
  private final FakeScript script;
  private final List<FakeEndpoint> endpoints = new ArrayList<>();
  private final Map<ByteBuffer, FakeEndpoint> endpointsByAddress = new HashMap<>();
  // Live local registrations by id; ids are never reused, so an id below nextRegistrationId that
  // is absent here names a deregistered registration.
  private final Map<Long, Registration> registrations = new HashMap<>();
  // Exposed regions indexed by key - 1, null once closed; keys are never reused.
  private final List<Region> regions = new ArrayList<>();
  // Watched operands, kept after their arena closes so a late post into one is still recognised.
  private final List<MemorySegment> watchedOperands = new ArrayList<>();
  private final List<String> operandViolations = new ArrayList<>();
  private long nextRegistrationId = 1;
  private long nextEndpointSerial = 1;
  private long pinnedBytes;
  private long acceptedOps;
  private boolean closed;

  private FakeFabric(String name, int serial) {
    this.name = name;
    this.serial = serial;
    this.script = new FakeScript(this, lock);
  }

  /**
   * Creates and registers a fabric.
   *
   * @param name its name, unique among open fabrics; what a configuration's {@code interfaces}
   *     names
   * @return the fabric, owned by the caller, who closes it
   * @throws IllegalArgumentException if the name is blank
   * @throws IllegalStateException if an open fabric already has this name
   */
  public static FakeFabric create(String name) {
    if (name == null || name.isBlank()) {
      throw new IllegalArgumentException("a fake fabric needs a non-blank name");
    }
    synchronized (REGISTRY_LOCK) {
      if (REGISTRY.containsKey(name)) {
        throw new IllegalStateException(
            "a fake fabric named \"" + name + "\" is already open; close it or pick another name");
      }
      FakeFabric fabric = new FakeFabric(name, nextSerial++);
      REGISTRY.put(name, fabric);
      return fabric;
    }
  }

  /**
   * The open fabric with this name.
   *
   * @param name the name
   * @return the fabric
   * @throws DmaException of kind FABRIC naming the fabrics that are open, when none has the name
   */
  public static FakeFabric named(String name) {
    FakeFabric fabric = find(name);
    if (fabric == null) {
      throw DmaException.fabric(
          DmaException.Reason.PROVIDER_UNAVAILABLE,
          "no fabric domain named \""
              + name
              + "\"; open fake fabrics: "
              + names()
              + " (create one with FakeFabric.create(\""
              + name
              + "\"))");
    }
    return fabric;
  }

  /**
   * The open fabric with this name, if any.
   *
   * @param name the name
   * @return the fabric, or {@code null} when none is open with that name
   */
  public static @Nullable FakeFabric find(String name) {
    synchronized (REGISTRY_LOCK) {
      return REGISTRY.get(name);
    }
  }

  /**
   * The fabric named {@value #DEFAULT_NAME}, created if it is not open. Shared by everything in the
   * JVM that uses it, so a test that scripts it should close it afterwards (the next call then
   * creates a fresh one).
   *
   * @return the default fabric
   */
  public static FakeFabric defaultFabric() {
    synchronized (REGISTRY_LOCK) {
      FakeFabric fabric = REGISTRY.get(DEFAULT_NAME);
      return fabric != null ? fabric : create(DEFAULT_NAME);
    }
  }

  /**
   * The names of the open fabrics, in the order they were created.
   *
   * @return the names
   */
  public static List<String> names() {
    synchronized (REGISTRY_LOCK) {
      return List.copyOf(REGISTRY.keySet());
    }
  }

  /**
   * This fabric's name.
   *
   * @return the name
   */
  public String name() {
    return name;
  }

  /**
   * The script every endpoint of this fabric follows; thread-safe, changeable at any time.
   *
   * @return the script
   */
  public FakeScript script() {
    return script;
  }

  /**
   * Opens an endpoint on this fabric, for example a passive target a test drives itself.
   *
   * @return the endpoint, owned by the caller, who closes it (closing the fabric also does)
   * @throws DmaException of kind FABRIC if the fabric is closed
   */
  public FakeEndpoint openEndpoint() {
    synchronized (lock) {
      if (closed) {
        throw DmaException.fabric("fi_endpoint: fake fabric \"" + name + "\" is closed");
      }
      long endpointSerial = nextEndpointSerial++;
      byte[] address;
      int qpn = -1;
      if (script.efaAddresses) {
        qpn = lowestFreeQpn();
        address = FakeAddresses.efa(serial, qpn, endpointSerial);
      } else {
        address = FakeAddresses.plain(serial, endpointSerial);
      }
      FakeEndpoint endpoint = new FakeEndpoint(this, address, qpn);
      endpoints.add(endpoint);
      endpointsByAddress.put(ByteBuffer.wrap(address), endpoint);
      counts.increment(Counts.ENDPOINTS_OPENED);
      return endpoint;
    }
  }

  /**
   * The endpoints of this fabric that are open, in the order they were opened.
   *
   * @return a snapshot
   */
  public List<FakeEndpoint> endpoints() {
    synchronized (lock) {
      return List.copyOf(endpoints);
    }
  }

  /**
   * The open endpoint with this address, for example the one a fabric service opened (its local
   * address is what clients insert).
   *
   * @param address an endpoint's address
   * @return the endpoint, or {@code null} when no open endpoint of this fabric has it
   */
  public @Nullable FakeEndpoint endpoint(byte[] address) {
    synchronized (lock) {
      return endpointAt(address);
    }
  }

  /**
   * What every endpoint of this fabric, open or closed, was asked to do.
   *
   * @return a snapshot
   */
  public FakeCounters counters() {
    synchronized (lock) {
      return counts.snapshot();
    }
  }

  /**
   * Watches a local operand: from now on the fake moves the bytes of every op whose local range
   * lies inside {@code segment} through the segment, and treats the closing of its arena as the
   * delivery of that transfer's completion. Touching it afterwards (a write reading its source, a
   * read writing its landing buffer), or still owning an op on it when it closes (found at reap,
   * reset or close), is recorded in {@link #operandViolations()} and counted as a violation; the op
   * then fails with {@code FI_EIO} and moves nothing. Meant for tests: watch each operand from its
   * own shared arena, and close that arena in the completer, after copying out what must be
   * checked.
   *
   * @param segment a native segment of a shared, automatic or global arena (the fake touches it
   *     from the posting thread and from whichever thread releases a held completion)
   * @throws IllegalArgumentException for a heap segment, or one only its owner thread may access
   */
  public void watchOperand(MemorySegment segment) {
    if (!segment.isNative()) {
      throw new IllegalArgumentException("a watched operand must be native memory");
    }
    // A confined segment would throw WrongThreadException on the worker, not report a release.
    if (!segment.isAccessibleBy(Thread.ofPlatform().unstarted(() -> {}))) {
      throw new IllegalArgumentException(
          "a watched operand must be accessible from any thread: allocate it from Arena.ofShared()");
    }
    synchronized (lock) {
      watchedOperands.add(segment);
    }
  }

  /**
   * Every access to, or hold on, a {@linkplain #watchOperand watched operand} after its arena
   * closed, in the order found; a test asserts it is empty.
   *
   * @return a snapshot of the descriptions
   */
  public List<String> operandViolations() {
    synchronized (lock) {
      return List.copyOf(operandViolations);
    }
  }

  /**
   * Whether {@link #close()} ran.
   *
   * @return whether closed
   */
  public boolean isClosed() {
    synchronized (lock) {
      return closed;
    }
  }

  /**
   * Closes every endpoint still open and unregisters the name, which may then be created again.
   * Idempotent; any thread. Close the services using the fabric first: their endpoints' next calls
   * are violations.
   */
  @Override
  public void close() {
    synchronized (lock) {
      if (!closed) {
        for (FakeEndpoint endpoint : List.copyOf(endpoints)) {
          endpoint.close();
        }
        closed = true;
      }
    }
    synchronized (REGISTRY_LOCK) {
      REGISTRY.remove(name, this);
    }
  }

  @Override
  public String toString() {
    return "FakeFabric[" + name + "]";
  }

  // --------------------------------------------------- used by endpoints, with `lock` held

  List<FakeEndpoint> openEndpoints() {
    return endpoints;
  }

  FakeScript scriptUnlocked() {
    return script;
  }

  @Nullable FakeEndpoint endpointAt(byte[] address) {
    return endpointsByAddress.get(ByteBuffer.wrap(address));
  }

  void endpointClosed(FakeEndpoint endpoint) {
    endpoints.remove(endpoint);
    endpointsByAddress.remove(ByteBuffer.wrap(endpoint.addressUnsafe()));
  }

  /**
   * The watched operand holding {@code [address, address + length)}: a live one if any (an address
   * may be reused by a later arena), else one already closed, else null.
   */
  @Nullable MemorySegment watchedOperand(long address, long length) {
    if (watchedOperands.isEmpty() || length <= 0) {
      return null;
    }
    MemorySegment closed = null;
    for (MemorySegment segment : watchedOperands) {
      long start = segment.address();
      if (start <= address && address - start <= segment.byteSize() - length) {
        if (segment.scope().isAlive()) {
          return segment;
        }
        closed = segment;
      }
    }
    return closed;
  }

  void operandViolation(Counts counts, String description) {
    counts.violation(description);
    operandViolations.add(description);
  }

  long nextOpIndex() {
    return ++acceptedOps;
  }

  int serial() {
    return serial;
  }

  private int lowestFreeQpn() {
    int qpn = 1;
    while (true) {
      boolean taken = false;
      for (FakeEndpoint endpoint : endpoints) {
        taken |= endpoint.qpn() == qpn;
      }
      if (!taken) {
        return qpn;
      }
      qpn++;
    }
  }

  /** Adds a live registration, or returns null when it would exceed the pinnable bytes. */
  @Nullable Registration addRegistration(FakeEndpoint owner, long address, long lengthBytes) {
    if (lengthBytes > script.pinnableBytes - pinnedBytes) {
      return null;
    }
    Registration registration = new Registration(nextRegistrationId++, owner, address, lengthBytes);
    registrations.put(registration.id, registration);
    pinnedBytes += lengthBytes;
    return registration;
  }

  @Nullable Registration registration(long id) {
    return registrations.get(id);
  }

  boolean registrationWasIssued(long id) {
    return 0 < id && id < nextRegistrationId;
  }

  void removeRegistration(Registration registration) {
    registrations.remove(registration.id);
    pinnedBytes -= registration.lengthBytes;
  }

  List<Registration> registrationsOf(FakeEndpoint owner) {
    List<Registration> owned = new ArrayList<>();
    for (Registration registration : registrations.values()) {
      if (registration.owner == owner) {
        owned.add(registration);
      }
    }
    return owned;
  }

  long nextKey() {
    return regions.size() + 1L;
  }

  void addRegion(Region region) {
    regions.add(region);
  }

  @Nullable Region region(long key) {
    return 0 < key && key <= regions.size() ? regions.get((int) (key - 1)) : null;
  }

  void removeRegion(long key) {
    regions.set((int) (key - 1), null);
  }
}
