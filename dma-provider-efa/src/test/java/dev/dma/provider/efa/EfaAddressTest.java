package dev.dma.provider.efa;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dma.api.DmaConfiguration;
import dev.dma.api.DmaException;
import dev.dma.core.FabricService;
import dev.dma.fake.FakeEndpoint;
import dev.dma.fake.FakeFabric;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** The EFA address tests of SEED-SPEC section 11 ({@code peer_addresses}), without a device. */
class EfaAddressTest {
  /** A synthetic EFA address: GID 0xfe x 16, native-endian QPN at 16-17, QKEY at 20-23. */
  static byte[] address(int qpn, int qkey) {
    ByteBuffer bytes = ByteBuffer.allocate(32).order(ByteOrder.nativeOrder());
    for (int i = 0; i < 16; i++) {
      bytes.put((byte) 0xfe);
    }
    bytes.putShort(EfaAddresses.QPN_OFFSET, (short) qpn);
    bytes.putInt(EfaAddresses.QKEY_OFFSET, qkey);
    return bytes.array();
  }

  @Test
  void efaAddressesDifferingOnlyInQkeyAreOneSlot() {
    byte[] first = address(7, 0x1111);
    byte[] second = address(7, 0x2222);
    assertFalse(Arrays.equals(first, second), "the bytes differ");
    byte[] firstId = EfaAddresses.identity(first);
    byte[] secondId = EfaAddresses.identity(second);
    assertArrayEquals(firstId, secondId, "the identities are equal");
    assertEquals(18, firstId.length);
    Map<ByteBuffer, String> slots = new HashMap<>();
    slots.put(ByteBuffer.wrap(firstId), "slot");
    assertEquals(
        "slot", slots.get(ByteBuffer.wrap(secondId)), "a lookup by identity finds the slot");
  }

  @Test
  void efaAddressesWithDifferentQpnsAreDifferentSlots() {
    assertFalse(
        Arrays.equals(EfaAddresses.identity(address(7, 1)), EfaAddresses.identity(address(8, 1))));
  }

  @ParameterizedTest
  @ValueSource(ints = {0, 1, 16, 18, 31, 33, 64})
  void efaRejectsAnyLengthButThirtyTwo(int length) {
    DmaException error =
        assertThrows(DmaException.class, () -> EfaAddresses.identity(new byte[length]));
    assertEquals("efa address is " + length + " bytes, not 32", error.getMessage());
    assertEquals(DmaException.Kind.FABRIC, error.kind());
  }

  @Test
  void thirtyTwoBytesAreAccepted() {
    assertEquals(18, EfaAddresses.identity(new byte[32]).length);
    assertEquals(
        "peer address is missing",
        assertThrows(DmaException.class, () -> EfaAddresses.check(null)).getMessage());
  }

  @Test
  void aWrongLengthNeverReachesTheAddressVector() {
    try (FakeFabric fabric = FakeFabric.create("efa-address-length")) {
      fabric.script().likeEfaDirect();
      try (EfaEndpoint endpoint =
          ImitatedEfa.endpoint(fabric.openEndpoint(), EfaFabric.EFA_DIRECT)) {
        byte[] own = endpoint.localAddress();
        assertEquals(32, own.length);
        for (int length : new int[] {31, 33}) {
          byte[] bad = Arrays.copyOf(own, length);
          assertEquals(
              "efa address is " + length + " bytes, not 32",
              assertThrows(DmaException.class, () -> endpoint.peerIdentity(bad)).getMessage());
          assertEquals(
              "efa address is " + length + " bytes, not 32",
              assertThrows(DmaException.class, () -> endpoint.insertPeer(bad)).getMessage());
        }
        assertEquals(0, fabric.counters().inserts(), "nothing reached fi_av_insert");
        assertArrayEquals(Arrays.copyOf(own, 18), endpoint.peerIdentity(own));
        endpoint.insertPeer(own);
        assertEquals(1, fabric.counters().inserts());
      }
    }
  }

  @Test
  void opaqueAddressesCompareEveryByte() {
    try (FakeFabric fabric = FakeFabric.create("efa-address-opaque")) {
      try (FakeEndpoint endpoint = fabric.openEndpoint()) {
        byte[] own = endpoint.localAddress();
        assertArrayEquals(own, endpoint.peerIdentity(own), "the default identity is every byte");
      }
    }
  }

  /**
   * SEED-SPEC 11 "a recycled queue pair evicts its dead incarnation", ignored there for want of
   * EFA.
   */
  @Test
  void aRecycledQueuePairEvictsItsDeadIncarnation() {
    try (FakeFabric fabric = FakeFabric.create("efa-address-recycled")) {
      fabric.script().likeEfaDirect();
      DmaConfiguration configuration =
          DmaConfiguration.builder().providers("fake").interfaces(List.of(fabric.name())).build();
      try (FabricService<Buffer> service =
          FabricService.<Buffer>builder(configuration)
              .provider(new FakeEfaProvider(EfaFabric.EFA_DIRECT))
              .completer(batch -> {})
              .start()) {
        FakeEndpoint own = Objects.requireNonNull(fabric.endpoint(service.localAddress()));
        byte[] old = fabric.openEndpoint().localAddress();
        service.addPeer(1, old);
        service.addPeer(2, old);
        assertEquals(1, own.livePeers(), "clients sharing an address share one entry");
        byte[] recycled = old.clone();
        recycled[20] ^= 1; // a new QKEY on the same GID and QPN
        assertArrayEquals(EfaAddresses.identity(old), EfaAddresses.identity(recycled));
        assertNotEquals(ByteBuffer.wrap(old), ByteBuffer.wrap(recycled));
        service.addPeer(1, recycled);
        assertFalse(own.hasPeer(old), "the dead incarnation left the address vector");
        assertTrue(own.hasPeer(recycled));
        assertEquals(1, own.livePeers(), "only client 1's new entry remains");
        assertEquals(1, fabric.counters().removes());
      }
    }
  }
}
