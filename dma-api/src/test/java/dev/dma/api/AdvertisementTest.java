package dev.dma.api;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

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
    assertEquals(AdvertisementException.Reason.ARITY, reasonOf(List.of("01", "42", "1", "2", "3")));
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

  private static String messageOf(List<String> fields) {
    return assertThrows(AdvertisementException.class, () -> Advertisement.fromFields(fields))
        .getMessage();
  }

  @Test
  void errorTextsAreTheProtocols() {
    assertEquals(
        "expected: address rkey remote-address",
        assertThrows(AdvertisementException.class, () -> Advertisement.fromFields(List.of()))
            .reason()
            .message());
    // The message starts with the protocol's text and goes on to name the field.
    assertTrue(messageOf(List.of()).startsWith("expected: address rkey remote-address"));
    assertTrue(messageOf(List.of("abc", "1", "1")).startsWith("invalid hex in address"));
    assertTrue(
        messageOf(List.of("ab", "nope", "1")).startsWith("invalid integer in advertisement"));
  }

  @Test
  void theFieldCountMessageSaysTheAcceptedFormsOnce() {
    String message = messageOf(List.of("01", "42"));
    assertEquals(
        "expected: address rkey remote-address: got 2 fields, not 3 (or 4 with the exposed length"
            + " last)",
        message);
    assertEquals(
        message.indexOf("address rkey remote-address"),
        message.lastIndexOf("address rkey remote-address"),
        "the field names appear once");
  }

  @Test
  void messagesNameTheBadField() {
    assertTrue(messageOf(List.of("ab", "nope", "1")).contains("remote key"), "key named");
    assertTrue(messageOf(List.of("ab", "1", "x")).contains("remote address"), "address named");
    assertTrue(messageOf(List.of("ab", "1", "1", "-3")).contains("length"), "length named");
    assertTrue(messageOf(List.of("", "4660", "0")).contains("address"), "address named");
  }

  @Test
  void refusesAnEmptyAddress() {
    assertEquals(AdvertisementException.Reason.ADDRESS, reasonOf(List.of("", "4660", "0")));
    assertEquals(AdvertisementException.Reason.ADDRESS, reasonOf(List.of("", "4660", "0", "8")));
    assertThrows(
        AdvertisementException.class,
        () -> Advertisement.fromRawFields(List.of(new byte[0], "1".getBytes(), "0".getBytes())));
    assertThrows(AdvertisementException.class, () -> new Advertisement(new byte[0], 1, 0));
  }

  @Test
  void refusesImpossibleLengths() {
    assertEquals(AdvertisementException.Reason.LENGTH, reasonOf(List.of("01", "42", "0", "-1")));
    assertEquals(AdvertisementException.Reason.LENGTH, reasonOf(List.of("01", "42", "0", "0")));
    assertEquals(AdvertisementException.Reason.LENGTH, reasonOf(List.of("01", "42", "0", "x")));
    assertEquals(AdvertisementException.Reason.LENGTH, reasonOf(List.of("01", "42", "0", "")));
    // Longer than a signed 64-bit count: no segment is that long.
    assertEquals(
        AdvertisementException.Reason.LENGTH,
        reasonOf(List.of("01", "42", "0", "9223372036854775808")));
    // A region that would wrap past the top of the address space.
    assertEquals(
        AdvertisementException.Reason.LENGTH,
        reasonOf(List.of("01", "42", "18446744073709551615", "2")));
    assertThrows(AdvertisementException.class, () -> new Advertisement(new byte[] {1}, 1, 0, -5));
  }

  @Test
  void aThreeFieldAdvertisementHasNoKnownLength() {
    Advertisement ad = Advertisement.fromFields(List.of("ab", "1", "2"));
    assertEquals(Advertisement.UNKNOWN_LENGTH, ad.lengthBytes());
    assertFalse(ad.lengthKnown());
    assertEquals(List.of("ab", "1", "2"), ad.toFields());
    assertEquals(
        Advertisement.UNKNOWN_LENGTH, new Advertisement(new byte[] {1}, 1, 2).lengthBytes());
  }

  @Test
  void aKnownLengthIsTheFourthField() {
    Advertisement ad = Advertisement.fromFields(List.of("ab", "1", "4096", "65536"));
    assertEquals(65536, ad.lengthBytes());
    assertTrue(ad.lengthKnown());
    assertEquals(List.of("ab", "1", "4096", "65536"), ad.toFields());
    assertEquals("ab 1 4096 65536", ad.toString());
    assertEquals(ad, Advertisement.fromFields(ad.toFields()));
    assertEquals(new Advertisement(new byte[] {(byte) 0xab}, 1, 4096, 65536), ad);
    assertNotEquals(new Advertisement(new byte[] {(byte) 0xab}, 1, 4096), ad);
    assertEquals(
        ad,
        Advertisement.fromRawFields(
            List.of("ab".getBytes(), "1".getBytes(), "4096".getBytes(), "65536".getBytes())));
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
