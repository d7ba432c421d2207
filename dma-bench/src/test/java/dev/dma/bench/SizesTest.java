package dev.dma.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import org.junit.jupiter.api.Test;

class SizesTest {
  @Test
  void suffixesAreBinary() {
    assertEquals(64, Sizes.parse("64"));
    assertEquals(4096, Sizes.parse("4k"));
    assertEquals(4096, Sizes.parse("4K"));
    assertEquals(65536, Sizes.parse("64KiB"));
    assertEquals(65536, Sizes.parse("64kb"));
    assertEquals(1 << 20, Sizes.parse("1m"));
    assertEquals(1 << 30, Sizes.parse("1g"));
    assertEquals(100, Sizes.parse("100b"));
    assertEquals(8192, Sizes.parse(" 8 k "));
  }

  @Test
  void listKeepsOrderAndDropsRepeats() {
    assertEquals(List.of(64L, 4096L, 65536L, 1L << 20), Sizes.parseList("64,4k,64k,1m"));
    assertEquals(List.of(4096L, 64L), Sizes.parseList("4k,64,4096"));
  }

  @Test
  void badSizesSayWhatASizeLooksLike() {
    for (String bad :
        new String[] {"", "k", "-1", "1.5k", "4x", "0", "2g", "64ib", "99999999999"}) {
      IllegalArgumentException e =
          assertThrows(IllegalArgumentException.class, () -> Sizes.parse(bad), bad);
      assertTrue(e.getMessage().contains("invalid size"), e.getMessage());
    }
    assertThrows(IllegalArgumentException.class, () -> Sizes.parseList("64,,4k"));
  }

  @Test
  void formatsWholeUnits() {
    assertEquals("64 B", Sizes.format(64));
    assertEquals("4 KiB", Sizes.format(4096));
    assertEquals("1 MiB", Sizes.format(1 << 20));
    assertEquals("1000 B", Sizes.format(1000));
    assertEquals("1 GiB", Sizes.format(1 << 30));
  }
}
