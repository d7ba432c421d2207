package dev.dma.api;

/**
 * A kind of memory a transfer's local operand lives in, and what dma must know about it: whether
 * the CPU can read it (a checksum is taken on a CPU thread) and which libfabric {@code
 * fi_hmem_iface} registers it.
 *
 * <p>The kinds dma ships are the constants of {@link Builtin}; adding one is one constant there,
 * which the intake checks and the registration path ask instead of naming kinds. The interface is
 * open so that tests and integrators can describe a kind of their own.
 *
 * <p>A caller's context says which kind its operands are ({@link Operands#memoryKind()}). Today
 * only {@link #HOST} registers with the shipped providers; a provider that cannot register a kind
 * refuses it with a {@link DmaException} failing that transfer only.
 *
 * <p>Threads: implementations must be immutable and answer the same values on every thread.
 */
public interface MemoryKind {

  /** libfabric's {@code FI_HMEM_SYSTEM} ({@code enum fi_hmem_iface} in {@code fi_domain.h}). */
  int FI_HMEM_SYSTEM = 0;

  /** Host memory: native segments in this process's address space, readable by the CPU. */
  MemoryKind HOST = Builtin.HOST;

  /**
   * The kind's name, as failure texts show it.
   *
   * @return the name, for example {@code HOST}
   */
  String name();

  /**
   * Whether a CPU thread can read this memory through its segment: a checksummed transfer needs
   * that, since its CRC is taken on a checksum-pool thread.
   *
   * @return true when the CPU can read it
   */
  boolean cpuReadable();

  /**
   * The libfabric {@code fi_hmem_iface} value a provider registers this memory with ({@code
   * fi_mr_attr.iface}).
   *
   * @return {@link #FI_HMEM_SYSTEM} for host memory, else the device interface's value
   */
  int hmemIface();

  /**
   * Whether this is system memory ({@link #hmemIface()} is {@link #FI_HMEM_SYSTEM}): memory a
   * provider that needs no local registration ({@code FI_MR_LOCAL} unset) can use unregistered.
   * Device memory is registered whatever the provider's mode says ({@code FI_MR_HMEM}).
   *
   * @return whether the memory is system memory
   */
  default boolean systemMemory() {
    return hmemIface() == FI_HMEM_SYSTEM;
  }

  /** The kinds dma ships. A new kind is one constant here. */
  enum Builtin implements MemoryKind {
    /** See {@link MemoryKind#HOST}. */
    HOST(true, FI_HMEM_SYSTEM);

    private final boolean cpuReadable;
    private final int hmemIface;

    Builtin(boolean cpuReadable, int hmemIface) {
      this.cpuReadable = cpuReadable;
      this.hmemIface = hmemIface;
    }

    @Override
    public boolean cpuReadable() {
      return cpuReadable;
    }

    @Override
    public int hmemIface() {
      return hmemIface;
    }
  }
}
