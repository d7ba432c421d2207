package dev.dma.api;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.util.List;
import org.junit.jupiter.api.Test;

class AdvertisementTest {
  @Test
  void parsesTheWireFields() {
    Advertisement ad = Advertisement.fromFields(List.of("01007fffab", "42", "139638282147448"));
    assertArrayEquals(new byte[] {0x01, 0x00, 0x7f, (byte) 0xff, (byte) 0xab}, ad.address());
    assertEquals(42, ad.remoteKey());
    assertEquals(0x7f0012345678L, ad.remoteAddress());
  }

  @Test
  void acceptsUppercaseHexAndWritesLowercase() {
    Advertisement ad = Advertisement.fromFields(List.of("01007FFFAB", "42", "7"));
    assertEquals(List.of("01007fffab", "42", "7"), ad.toFields());
    assertEquals("01007fffab 42 7", ad.toString());
  }

  @Test
  void roundTripsUnsignedNumbers() {
    Advertisement ad = new Advertisement(new byte[] {2, 0, 0, 1}, -1L, Long.MIN_VALUE);
    List<String> fields = ad.toFields();
    assertEquals("18446744073709551615", fields.get(1));
    assertEquals("9223372036854775808", fields.get(2));
    assertEquals(ad, Advertisement.fromFields(fields));
    assertEquals(ad.hashCode(), Advertisement.fromFields(fields).hashCode());
  }

  private static AdvertisementException.Reason reasonOf(List<String> fields) {
    return assertThrows(AdvertisementException.class, () -> Advertisement.fromFields(fields))
        .reason();
  }

  @Test
  void rejectsMalformedFields() {
    assertEquals(AdvertisementException.Reason.ARITY, reasonOf(List.of("01", "42")));
    assertEquals(AdvertisementException.Reason.ARITY, reasonOf(List.of("01", "42", "1", "2")));
    assertEquals(AdvertisementException.Reason.HEX, reasonOf(List.of("abc", "42", "1")));
    assertEquals(AdvertisementException.Reason.HEX, reasonOf(List.of("zz", "42", "1")));
    assertEquals(AdvertisementException.Reason.INTEGER, reasonOf(List.of("01", "nope", "1")));
    assertEquals(AdvertisementException.Reason.INTEGER, reasonOf(List.of("01", "42", "-1")));
    assertEquals(AdvertisementException.Reason.INTEGER, reasonOf(List.of("01", "+4", "1")));
    assertEquals(AdvertisementException.Reason.INTEGER, reasonOf(List.of("01", "42", "")));
    assertEquals(
        AdvertisementException.Reason.INTEGER,
        reasonOf(List.of("01", "18446744073709551616", "1")));
  }

  @Test
  void errorTextsAreTheProtocols() {
    assertEquals(
        "expected: address rkey remote-address",
        assertThrows(AdvertisementException.class, () -> Advertisement.fromFields(List.of()))
            .getMessage());
    assertEquals(
        "invalid hex in address",
        assertThrows(
                AdvertisementException.class,
                () -> Advertisement.fromFields(List.of("abc", "1", "1")))
            .getMessage());
    assertEquals(
        "invalid integer in advertisement",
        assertThrows(
                AdvertisementException.class,
                () -> Advertisement.fromFields(List.of("ab", "nope", "1")))
            .getMessage());
  }

  @Test
  void rawFieldsParseLikeText() {
    Advertisement ad =
        Advertisement.fromRawFields(List.of("ab".getBytes(), "1".getBytes(), "2".getBytes()));
    assertEquals(new Advertisement(new byte[] {(byte) 0xab}, 1, 2), ad);
  }

  @Test
  void addressIsCopiedBothWays() {
    byte[] bytes = {1, 2};
    Advertisement ad = new Advertisement(bytes, 1, 2);
    bytes[0] = 9;
    ad.address()[1] = 9;
    assertArrayEquals(new byte[] {1, 2}, ad.address());
  }
}
