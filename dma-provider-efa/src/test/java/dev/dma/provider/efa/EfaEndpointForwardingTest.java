package dev.dma.provider.efa;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dma.api.DmaException;
import dev.dma.api.MemoryKind;
import dev.dma.api.RemoteAccess;
import dev.dma.spi.CompletionSink;
import dev.dma.spi.EndpointInfo;
import dev.dma.spi.FabricEndpoint;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.reflect.InvocationHandler;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.lang.reflect.Proxy;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * {@link EfaEndpoint} forwards every method of the SPI to its delegate, or this test says why it
 * does not: a method added to {@link FabricEndpoint} later (with a default) fails here until EFA
 * forwards it or the list below names it, so no default applies to EFA silently.
 *
 * <p>Each method is called on an EFA endpoint over a recording delegate (a {@link Proxy} that
 * records the methods called on it and answers neutral values); the method counts as forwarded when
 * the delegate saw the same method called.
 */
@Timeout(value = 30, unit = TimeUnit.SECONDS)
class EfaEndpointForwardingTest {

  /**
   * The SPI methods EFA deliberately answers itself, each with why. Keep in step with {@link
   * EfaEndpoint}'s javadoc.
   */
  private static final Map<String, String> NOT_FORWARDED =
      Map.of(
          "peerIdentity(byte[])",
          "EFA's identity is its own: the first 18 bytes (GID and QPN), checked to be 32 bytes",
          "peerText(byte[])",
          "EFA addresses are GID and QPN bytes, shown in hex (the SPI's default), whatever the"
              + " delegate would read into them",
          "maxTx()",
          "the depth EFA decided (EfaDecisions.maxTx), which may be below the provider's",
          "register(long,long)",
          "the SPI's host-memory shorthand: it calls register(long,long,MemoryKind), which EFA"
              + " forwards");

  private static final class Recording implements InvocationHandler {
    final List<String> calls = new ArrayList<>();

    @Override
    public Object invoke(Object proxy, Method method, Object[] args) {
      calls.add(signature(method));
      return neutral(method.getReturnType());
    }
  }

  @Test
  void everySpiMethodIsForwardedOrListedWithItsReason() throws Exception {
    Recording recording = new Recording();
    FabricEndpoint delegate =
        (FabricEndpoint)
            Proxy.newProxyInstance(
                FabricEndpoint.class.getClassLoader(),
                new Class<?>[] {FabricEndpoint.class},
                recording);
    EfaEndpoint efa = ImitatedEfa.endpoint(delegate, EfaFabric.EFA);
    Set<String> spi = new TreeSet<>();
    Map<String, String> unforwarded = new TreeMap<>();
    for (Method method : FabricEndpoint.class.getMethods()) {
      if (Modifier.isStatic(method.getModifiers())) {
        continue;
      }
      String signature = signature(method);
      if (!spi.add(signature)) {
        continue; // close() from AutoCloseable too
      }
      recording.calls.clear();
      invoke(efa.getClass().getMethod(method.getName(), method.getParameterTypes()), efa);
      if (!recording.calls.contains(signature)) {
        unforwarded.put(signature, "called the delegate's " + recording.calls);
      }
    }
    assertTrue(spi.size() >= 20, () -> "reflection found too few SPI methods: " + spi);
    for (String listed : NOT_FORWARDED.keySet()) {
      assertTrue(spi.contains(listed), () -> listed + " is no SPI method any more: drop it here");
    }
    Map<String, String> unexplained = new TreeMap<>(unforwarded);
    unexplained.keySet().removeAll(NOT_FORWARDED.keySet());
    assertEquals(
        Map.of(),
        unexplained,
        "EfaEndpoint does not forward these SPI methods: forward them, or list each in"
            + " NOT_FORWARDED with why");
    assertEquals(
        new TreeSet<>(NOT_FORWARDED.keySet()),
        unforwarded.keySet(),
        "NOT_FORWARDED lists a method EfaEndpoint now forwards: drop it from the list");
  }

  /** Calls {@code method} on {@code target} with neutral arguments; what it throws is ignored. */
  private static void invoke(Method method, Object target) throws IllegalAccessException {
    Object[] args = Arrays.stream(method.getParameterTypes()).map(type -> argument(type)).toArray();
    try {
      method.invoke(target, args);
    } catch (InvocationTargetException thrown) {
      // The call reached as far as it did: whether the delegate saw it is what counts.
    }
  }

  private static String signature(Method method) {
    StringBuilder text = new StringBuilder(method.getName()).append('(');
    Class<?>[] types = method.getParameterTypes();
    for (int i = 0; i < types.length; i++) {
      text.append(i == 0 ? "" : ",").append(types[i].getSimpleName());
    }
    return text.append(')').toString();
  }

  private static Object argument(Class<?> type) {
    if (type == int.class) {
      return 1;
    }
    if (type == long.class) {
      // A descriptor that is not 0, so a post is not refused for the missing registration.
      return 1L;
    }
    if (type == byte[].class) {
      return new byte[EfaAddresses.ADDRESS_BYTES];
    }
    if (type == MemorySegment.class) {
      return Arena.ofAuto().allocate(64);
    }
    if (type == RemoteAccess.class) {
      return RemoteAccess.READ_WRITE;
    }
    if (type == MemoryKind.class) {
      return MemoryKind.HOST;
    }
    if (type == CompletionSink.class) {
      return new CompletionSink() {
        @Override
        public void completed(int slot) {}

        @Override
        public void failed(int slot, int errno, int providerErrno, String message) {}
      };
    }
    throw new AssertionError("no neutral argument of " + type + ": add one");
  }

  private static Object neutral(Class<?> type) {
    if (type == int.class) {
      return 0;
    }
    if (type == long.class) {
      return 1L;
    }
    if (type == boolean.class) {
      return false;
    }
    if (type == byte[].class) {
      return new byte[EfaAddresses.ADDRESS_BYTES];
    }
    if (type == String.class) {
      return "";
    }
    if (type == Set.class) {
      return Set.of();
    }
    if (type == EndpointInfo.class) {
      return new EndpointInfo("efa", 0, 0, 0, true, true);
    }
    if (type == DmaException.Reason.class) {
      return DmaException.Reason.PROVIDER;
    }
    return null; // void, or a region nothing here reads
  }
}
