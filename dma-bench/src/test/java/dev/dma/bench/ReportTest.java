package dev.dma.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import org.junit.jupiter.api.Test;

class ReportTest {
  private static final List<Result> RESULTS =
      List.of(
          new Result(
              "tcp", "net", "write", 65536, 64, 1, 20_000, 0, 1.0, 50_000, 90_000, 120_000,
              51_234.5, ""),
          new Result(
              "tcp", "net", "write", 1 << 20, 64, 1, 3_000, 0, 1.0, 500_000, 900_000, 1_200_000,
              500_000, ""),
          new Result(
              "tcp",
              "net",
              "read",
              65536,
              64,
              1,
              10_000,
              2,
              0.5,
              60_000,
              99_000,
              150_000,
              61_000,
              "boom \"x\""));

  @Test
  void tableHasOneSectionPerOpWithAlignedRows() {
    String table = Report.table(RESULTS);
    String[] lines = table.split("\\R");
    assertTrue(lines[0].startsWith("write, provider tcp (net), window 64, 1 process"), lines[0]);
    assertTrue(
        lines[1].contains("size") && lines[1].contains("MB/s") && lines[1].contains("p99 us"));
    assertTrue(
        lines[3].contains("64 KiB") && lines[3].contains("1,310.7") && lines[3].contains("20,000"),
        lines[3]);
    assertTrue(lines[4].contains("1 MiB") && lines[4].contains("3,145.7"), lines[4]);
    assertEquals(lines[1].length(), lines[3].length(), "rows are as wide as the header");
    assertTrue(table.contains("read, provider tcp (net)"));
    assertTrue(table.contains("first error at 64 KiB: boom \"x\""));
  }

  @Test
  void csvStartsWithTheAnchorsColumns() {
    String[] lines = Report.csv(RESULTS, true).split("\n");
    assertEquals(Report.CSV_HEADER, lines[0]);
    assertTrue(
        lines[0].startsWith("provider,op,size,window,ops,seconds,MB/s,Mops/s,avg_latency_us,"));
    assertEquals(
        "net,write,65536,64,20000,1.000,1310.7,0.0200,51.23,50.00,90.00,120.00,0,tcp,1", lines[1]);
    assertEquals(
        "net,read,65536,64,10000,0.500,1310.7,0.0200,61.00,60.00,99.00,150.00,2,tcp,1", lines[3]);
    assertEquals(4, lines.length);
  }

  @Test
  void jsonIsWellFormedAndEscaped() {
    String json = Report.json(RESULTS);
    assertTrue(json.startsWith("{\"results\":["));
    assertTrue(json.contains("\"op\":\"write\",\"size_bytes\":65536"));
    assertTrue(json.contains("\"mb_per_s\":1310.720"));
    assertTrue(
        json.contains(
            "\"latency_ns\":{\"p50\":50000,\"p99\":90000,\"max\":120000,\"mean\":51234.5}"));
    assertTrue(json.contains("\"first_error\":\"boom \\\"x\\\"\""));
    assertTrue(json.contains("\"first_error\":null"));
    assertEquals(
        json.chars().filter(c -> c == '{').count(), json.chars().filter(c -> c == '}').count());
    assertEquals("\"a\\u0001\\n\"", Report.jsonString("a\u0001\n"));
  }

  @Test
  void svgHasALinePerOpAndAPointPerSize() {
    String svg = Report.svg(RESULTS);
    assertTrue(svg.startsWith("<svg"));
    assertEquals(2, svg.split("<polyline").length - 1);
    assertEquals(3, svg.split("<circle").length - 1);
    assertTrue(svg.contains(">64 KiB<") && svg.contains(">1 MiB<"));
    assertTrue(svg.trim().endsWith("</svg>"));
  }

  @Test
  void pngIsAPng() {
    byte[] png = PngChart.render(RESULTS);
    assertTrue(png.length > 100);
    assertEquals((byte) 0x89, png[0]);
    assertEquals('P', png[1]);
  }

  @Test
  void niceCeiling() {
    assertEquals(5000, ChartData.niceCeiling(3145.7));
    assertEquals(2000, ChartData.niceCeiling(1310));
    assertEquals(1, ChartData.niceCeiling(1));
  }
}
