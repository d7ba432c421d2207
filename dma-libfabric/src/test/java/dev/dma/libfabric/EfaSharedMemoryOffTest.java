package dev.dma.libfabric;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.dma.libfabric.internal.Native;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Loading the binding turns efa's same-host shm path off in this process ({@link
 * Native#EFA_SHM_ENVIRONMENT}), unless the environment set it: efa would otherwise post same-host
 * writes to shm, whose peer copies a write's source whenever it gets to it, after a failure too.
 * libfabric reads the variable from the C environment, which {@code System.getenv} does not see
 * change, so the test asks libc.
 */
class EfaSharedMemoryOffTest {
  @Test
  @Timeout(30)
  @SuppressWarnings("restricted")
  void theBindingSetsEfaShmTransferOffBeforeLibfabricReadsIt() throws Throwable {
    assumeTrue(
        System.getenv(Native.EFA_SHM_ENVIRONMENT) == null,
        "the environment sets " + Native.EFA_SHM_ENVIRONMENT + " itself, which dma leaves alone");
    Libfabric.availability(); // loads the binding
    Linker linker = Linker.nativeLinker();
    MethodHandle getenv =
        linker.downcallHandle(
            linker.defaultLookup().find("getenv").orElseThrow(),
            FunctionDescriptor.of(ValueLayout.ADDRESS, ValueLayout.ADDRESS));
    try (Arena arena = Arena.ofConfined()) {
      MemorySegment value =
          (MemorySegment) getenv.invokeExact(arena.allocateFrom(Native.EFA_SHM_ENVIRONMENT));
      assertEquals(false, value.equals(MemorySegment.NULL), "the variable is not set");
      assertEquals("0", value.reinterpret(16).getString(0));
    }
  }
}
