package dev.dma.bench;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * Renders results: a table per operation for people, CSV and JSON for machines, an SVG chart of
 * throughput against size. Stateless; every method returns the whole text.
 */
public final class Report {
  /**
   * The CSV header. The first nine columns are exactly the C anchor's ({@code rma_bench}), so the
   * same tools read both; the rest are what only dma-bench measures.
   */
  public static final String CSV_HEADER =
      "provider,op,size,window,ops,seconds,MB/s,Mops/s,avg_latency_us,"
          + "p50_us,p99_us,max_us,errors,dma_provider,processes";

  private Report() {}

  /**
   * One table per operation: size, transfers, MB/s, transfers/s, p50/p99/max latency and errors.
   *
   * @param results the results, in run order
   * @return the tables, each preceded by a title line
   */
  public static String table(List<Result> results) {
    StringBuilder out = new StringBuilder();
    for (Map.Entry<String, List<Result>> entry : byOp(results).entrySet()) {
      List<Result> rows = entry.getValue();
      Result first = rows.getFirst();
      out.append(
          String.format(
              Locale.ROOT,
              "%s, provider %s (%s), window %d, %d process%s%n",
              entry.getKey(),
              first.provider(),
              first.fabric(),
              first.window(),
              first.processes(),
              first.processes() == 1 ? "" : "es"));
      String[] header = {
        "size", "transfers", "MB/s", "transfers/s", "p50 us", "p99 us", "max us", "errors"
      };
      List<String[]> cells = new ArrayList<>();
      cells.add(header);
      for (Result r : rows) {
        cells.add(
            new String[] {
              Sizes.format(r.sizeBytes()),
              String.format(Locale.ROOT, "%,d", r.transfers()),
              String.format(Locale.ROOT, "%,.1f", r.megabytesPerSecond()),
              String.format(Locale.ROOT, "%,.0f", r.transfersPerSecond()),
              micros(r.p50Nanos()),
              micros(r.p99Nanos()),
              micros(r.maxNanos()),
              Long.toString(r.errors())
            });
      }
      int[] widths = new int[header.length];
      for (String[] row : cells) {
        for (int i = 0; i < row.length; i++) {
          widths[i] = Math.max(widths[i], row[i].length());
        }
      }
      for (int line = 0; line < cells.size(); line++) {
        String[] row = cells.get(line);
        StringBuilder text = new StringBuilder("  ");
        for (int i = 0; i < row.length; i++) {
          String cell = row[i];
          // Sizes read left-aligned; numbers right-aligned so their digits line up.
          String padded =
              i == 0
                  ? cell + " ".repeat(widths[i] - cell.length())
                  : " ".repeat(widths[i] - cell.length()) + cell;
          text.append(padded).append(i + 1 < row.length ? "  " : "");
        }
        out.append(text).append(System.lineSeparator());
        if (line == 0) {
          int total = 2;
          for (int w : widths) {
            total += w + 2;
          }
          out.append("  ").append("-".repeat(total - 4)).append(System.lineSeparator());
        }
      }
      for (Result r : rows) {
        if (!r.firstError().isEmpty()) {
          out.append("  first error at ")
              .append(Sizes.format(r.sizeBytes()))
              .append(": ")
              .append(r.firstError())
              .append(System.lineSeparator());
        }
      }
      out.append(System.lineSeparator());
    }
    return out.toString();
  }

  /**
   * CSV with {@link #CSV_HEADER} and one line per result.
   *
   * @param results the results
   * @param header whether to start with the header line
   * @return the text, ending with a newline
   */
  public static String csv(List<Result> results, boolean header) {
    StringBuilder out = new StringBuilder();
    if (header) {
      out.append(CSV_HEADER).append('\n');
    }
    for (Result r : results) {
      out.append(
          String.format(
              Locale.ROOT,
              "%s,%s,%d,%d,%d,%.3f,%.1f,%.4f,%.2f,%.2f,%.2f,%.2f,%d,%s,%d%n",
              csvField(r.fabric()),
              r.op(),
              r.sizeBytes(),
              r.window(),
              r.transfers(),
              r.seconds(),
              r.megabytesPerSecond(),
              r.transfersPerSecond() / 1e6,
              r.meanNanos() / 1e3,
              r.p50Nanos() / 1e3,
              r.p99Nanos() / 1e3,
              r.maxNanos() / 1e3,
              r.errors(),
              csvField(r.provider()),
              r.processes()));
    }
    return out.toString().replace(System.lineSeparator(), "\n");
  }

  /**
   * A JSON document: {@code {"results": [ {...}, ... ]}} with one object per result.
   *
   * @param results the results
   * @return the text
   */
  public static String json(List<Result> results) {
    StringBuilder out = new StringBuilder("{\"results\":[");
    for (int i = 0; i < results.size(); i++) {
      Result r = results.get(i);
      out.append(i == 0 ? "\n  " : ",\n  ")
          .append(
              String.format(
                  Locale.ROOT,
                  "{\"provider\":%s,\"fabric\":%s,\"op\":\"%s\",\"size_bytes\":%d,\"window\":%d,"
                      + "\"processes\":%d,\"transfers\":%d,\"errors\":%d,\"seconds\":%.6f,"
                      + "\"mb_per_s\":%.3f,\"transfers_per_s\":%.1f,\"latency_ns\":{\"p50\":%d,"
                      + "\"p99\":%d,\"max\":%d,\"mean\":%.1f},\"first_error\":%s}",
                  jsonString(r.provider()),
                  jsonString(r.fabric()),
                  r.op(),
                  r.sizeBytes(),
                  r.window(),
                  r.processes(),
                  r.transfers(),
                  r.errors(),
                  r.seconds(),
                  r.megabytesPerSecond(),
                  r.transfersPerSecond(),
                  r.p50Nanos(),
                  r.p99Nanos(),
                  r.maxNanos(),
                  r.meanNanos(),
                  r.firstError().isEmpty() ? "null" : jsonString(r.firstError())));
    }
    return out.append("\n]}\n").toString();
  }

  /**
   * An SVG line chart of MB/s against size (log scale), one line per operation.
   *
   * @param results the results
   * @return the SVG document
   */
  public static String svg(List<Result> results) {
    ChartData data = ChartData.of(results);
    StringBuilder svg = new StringBuilder();
    svg.append(
        String.format(
            Locale.ROOT,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
                + "font-family=\"sans-serif\" font-size=\"12\">%n",
            ChartData.WIDTH,
            ChartData.HEIGHT));
    svg.append("<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n");
    svg.append(
        String.format(
            Locale.ROOT,
            "<text x=\"%d\" y=\"20\" font-size=\"14\">%s</text>%n",
            ChartData.LEFT,
            xml(data.title())));
    // Axes, grid and tick labels.
    for (ChartData.Tick tick : data.yTicks()) {
      svg.append(
          String.format(
              Locale.ROOT,
              "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#ddd\"/>"
                  + "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%s</text>%n",
              ChartData.LEFT,
              tick.position(),
              ChartData.WIDTH - ChartData.RIGHT,
              tick.position(),
              ChartData.LEFT - 6,
              tick.position() + 4,
              xml(tick.label())));
    }
    for (ChartData.Tick tick : data.xTicks()) {
      svg.append(
          String.format(
              Locale.ROOT,
              "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%s</text>%n",
              tick.position(),
              ChartData.HEIGHT - ChartData.BOTTOM + 18,
              xml(tick.label())));
    }
    svg.append(
        String.format(
            Locale.ROOT,
            "<line x1=\"%1$d\" y1=\"%2$d\" x2=\"%1$d\" y2=\"%3$d\" stroke=\"black\"/>"
                + "<line x1=\"%1$d\" y1=\"%3$d\" x2=\"%4$d\" y2=\"%3$d\" stroke=\"black\"/>%n",
            ChartData.LEFT,
            ChartData.TOP,
            ChartData.HEIGHT - ChartData.BOTTOM,
            ChartData.WIDTH - ChartData.RIGHT));
    svg.append(
        String.format(
            Locale.ROOT,
            "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">transfer size</text>%n"
                + "<text x=\"14\" y=\"%d\" transform=\"rotate(-90 14 %d)\" "
                + "text-anchor=\"middle\">MB/s</text>%n",
            (ChartData.LEFT + ChartData.WIDTH - ChartData.RIGHT) / 2,
            ChartData.HEIGHT - 8,
            ChartData.HEIGHT / 2,
            ChartData.HEIGHT / 2));
    int legend = 0;
    for (ChartData.Series series : data.series()) {
      StringBuilder points = new StringBuilder();
      for (double[] p : series.points()) {
        points.append(String.format(Locale.ROOT, "%.1f,%.1f ", p[0], p[1]));
      }
      svg.append(
          String.format(
              Locale.ROOT,
              "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"%s\"/>%n",
              series.color(),
              points.toString().strip()));
      for (double[] p : series.points()) {
        svg.append(
            String.format(
                Locale.ROOT,
                "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"/>%n",
                p[0],
                p[1],
                series.color()));
      }
      int y = ChartData.TOP + 14 + 16 * legend++;
      svg.append(
          String.format(
              Locale.ROOT,
              "<rect x=\"%d\" y=\"%d\" width=\"12\" height=\"3\" fill=\"%s\"/>"
                  + "<text x=\"%d\" y=\"%d\">%s</text>%n",
              ChartData.LEFT + 12,
              y - 4,
              series.color(),
              ChartData.LEFT + 30,
              y,
              xml(series.name())));
    }
    return svg.append("</svg>\n").toString();
  }

  static Map<String, List<Result>> byOp(List<Result> results) {
    Map<String, List<Result>> byOp = new LinkedHashMap<>();
    for (Result r : results) {
      byOp.computeIfAbsent(r.op(), op -> new ArrayList<>()).add(r);
    }
    return byOp;
  }

  private static String micros(long nanos) {
    return String.format(Locale.ROOT, nanos < 100_000 ? "%.1f" : "%,.0f", nanos / 1e3);
  }

  private static String csvField(String text) {
    // Provider names such as "tcp;ofi_rxm" hold no commas, but a quoted field costs nothing.
    return text.contains(",") || text.contains("\"")
        ? "\"" + text.replace("\"", "\"\"") + "\""
        : text;
  }

  static String jsonString(String text) {
    StringBuilder out = new StringBuilder("\"");
    for (int i = 0; i < text.length(); i++) {
      char c = text.charAt(i);
      switch (c) {
        case '"' -> out.append("\\\"");
        case '\\' -> out.append("\\\\");
        case '\n' -> out.append("\\n");
        case '\r' -> out.append("\\r");
        case '\t' -> out.append("\\t");
        default -> {
          if (c < 0x20) {
            out.append(String.format(Locale.ROOT, "\\u%04x", (int) c));
          } else {
            out.append(c);
          }
        }
      }
    }
    return out.append('"').toString();
  }

  private static String xml(String text) {
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;");
  }
}
