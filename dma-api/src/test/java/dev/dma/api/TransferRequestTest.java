package dev.dma.api;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;
import java.util.Arrays;
import org.junit.jupiter.api.Test;

class TransferRequestTest {
  private static final Operands CONTEXT = Operands.of(MemorySegment.NULL);
  private static final byte[] PEER = {1, 2, 3};

  private static TransferRequest<Operands> at(Advertisement ad, long offset) {
    return TransferRequest.builder(CONTEXT)
        .advertisement(ad)
        .remoteAddress(ad.remoteAddress() + offset)
        .build();
  }

  @Test
  void carriesTheAdvertisedRegion() {
    Advertisement ad = new Advertisement(PEER, 9, 0x10000, 4096);
    TransferRequest<Operands> viaBuilder = at(ad, 0);
    assertEquals(0x10000, viaBuilder.remoteBase());
    assertEquals(4096, viaBuilder.remoteLength());
    TransferRequest<Operands> viaTo = TransferRequest.write(1, ad, CONTEXT);
    assertEquals(0x10000, viaTo.remoteBase());
    assertEquals(4096, viaTo.remoteLength());
    assertEquals(
        TransferRequest.UNKNOWN_LENGTH,
        TransferRequest.builder(CONTEXT).peerAddress(PEER).build().remoteLength());
    assertEquals(
        TransferRequest.UNKNOWN_LENGTH, at(new Advertisement(PEER, 9, 0x10000), 0).remoteLength());
  }

  @Test
  void inBoundsOnVirtualAddresses() {
    Advertisement ad = new Advertisement(PEER, 9, 0x7f0000001000L, 4096);
    assertNull(at(ad, 0).outOfBoundsReason(4096));
    assertNull(at(ad, 1024).outOfBoundsReason(3072));
    assertNull(at(ad, 4095).outOfBoundsReason(1));
    assertNull(at(ad, 4096).outOfBoundsReason(0));
  }

  @Test
  void inBoundsOnOffsets() {
    // tcp advertises remote address 0: requests address offsets into the exposed buffer.
    Advertisement ad = new Advertisement(PEER, 9, 0, 1 << 20);
    assertNull(at(ad, 0).outOfBoundsReason(1 << 20));
    assertNull(at(ad, 512 << 10).outOfBoundsReason(512 << 10));
  }

  @Test
  void outOfBoundsIsNamed() {
    Advertisement ad = new Advertisement(PEER, 9, 0x10000, 4096);
    assertNotNull(at(ad, 0).outOfBoundsReason(4097), "one byte past the end");
    assertNotNull(at(ad, 4000).outOfBoundsReason(97), "tail past the end");
    assertNotNull(at(ad, 4096).outOfBoundsReason(1), "starts at the end");
    assertNotNull(at(ad, -1).outOfBoundsReason(1), "starts below the base");
    assertNotNull(at(ad, 8).outOfBoundsReason(-1), "negative length");
    assertNotNull(at(ad, 8).outOfBoundsReason(Long.MAX_VALUE), "huge length must not wrap");
    String reason = at(ad, 4000).outOfBoundsReason(97);
    assertTrue(reason.contains("4096"), reason);
  }

  @Test
  void outOfBoundsNearTheTopOfTheAddressSpace() {
    // Unsigned addresses: a base above Long.MAX_VALUE is a valid (if unusual) virtual address.
    long base = -8192L; // 0xffff_ffff_ffff_e000
    Advertisement ad = new Advertisement(PEER, 9, base, 4096);
    assertNull(at(ad, 0).outOfBoundsReason(4096));
    assertNotNull(at(ad, 4096).outOfBoundsReason(1));
    assertNotNull(at(ad, 0).outOfBoundsReason(Long.MAX_VALUE));
  }

  @Test
  void anUnknownLengthIsNeverOutOfBounds() {
    Advertisement ad = new Advertisement(PEER, 9, 0x10000);
    assertNull(at(ad, 1 << 30).outOfBoundsReason(1 << 30));
  }

  @Test
  void refusesAnImpossibleLength() {
    assertThrows(
        IllegalArgumentException.class,
        () ->
            new TransferRequest<>(1, PEER, 9, 0, Direction.TO_PEER, Checksum.NONE, CONTEXT, 0, -2));
  }

  @Test
  void theRegionTakesPartInEquality() {
    TransferRequest<Operands> known = at(new Advertisement(PEER, 9, 64, 4096), 0);
    TransferRequest<Operands> unknown = at(new Advertisement(PEER, 9, 64), 0);
    assertNotEquals(known, unknown);
    assertEquals(known, at(new Advertisement(PEER, 9, 64, 4096), 0));
    assertTrue(known.toString().contains("remoteLength=4096"), known.toString());
  }

  /** A peer as a service issues one: its own copy of the address. */
  private record TestPeer(long clientId, byte[] bytes) implements Peer {
    @Override
    public byte[] address() {
      return bytes.clone();
    }

    @Override
    public boolean hasAddress(byte[] address) {
      return Arrays.equals(bytes, address);
    }
  }

  @Test
  void aRequestBuiltFromAPeerCarriesItsClientAddressAndTheRegion() {
    Peer peer = new TestPeer(7, PEER);
    Advertisement ad = new Advertisement(PEER, 9, 0x10000, 4096);
    TransferRequest<Operands> write = TransferRequest.write(peer, ad, CONTEXT);
    assertSame(peer, write.peer());
    assertEquals(7, write.clientId());
    assertArrayEquals(PEER, write.peerAddress());
    assertEquals(9, write.remoteKey());
    assertEquals(0x10000, write.remoteBase());
    assertEquals(4096, write.remoteLength());
    assertEquals(Direction.TO_PEER, write.direction());
    TransferRequest<Operands> read = TransferRequest.read(peer, ad, 64, CONTEXT);
    assertSame(peer, read.peer());
    assertEquals(Direction.fromPeer(64), read.direction());
    assertSame(peer, write.withChecksum(Checksum.CRC32C).peer());
    assertSame(peer, write.withRetryWrite(true).peer());
    assertSame(peer, TransferRequest.builder(CONTEXT).peer(peer).advertisement(ad).build().peer());
    assertNull(TransferRequest.write(7, ad, CONTEXT).peer());
  }

  @Test
  void thePeerIsAShortcutNotPartOfWhatTheRequestMeans() {
    Advertisement ad = new Advertisement(PEER, 9, 0x10000, 4096);
    TransferRequest<Operands> withPeer = TransferRequest.write(new TestPeer(7, PEER), ad, CONTEXT);
    TransferRequest<Operands> without = TransferRequest.write(7, ad, CONTEXT);
    assertEquals(without, withPeer);
    assertEquals(without.hashCode(), withPeer.hashCode());
  }

  @Test
  void aPeerOfAnotherAddressOrClientIsRefusedWithWhatToDo() {
    Peer peer = new TestPeer(7, PEER);
    Advertisement moved = new Advertisement(new byte[] {4, 5, 6}, 9, 0x10000, 4096);
    IllegalArgumentException address =
        assertThrows(
            IllegalArgumentException.class, () -> TransferRequest.write(peer, moved, CONTEXT));
    assertTrue(address.getMessage().contains("040506"), address.getMessage());
    assertTrue(address.getMessage().contains("addPeer"), address.getMessage());
    IllegalArgumentException client =
        assertThrows(
            IllegalArgumentException.class,
            () ->
                TransferRequest.builder(CONTEXT)
                    .peer(peer)
                    .advertisement(new Advertisement(PEER, 9, 0))
                    .clientId(8)
                    .build());
    assertTrue(client.getMessage().contains("client 7"), client.getMessage());
  }
}
