package dev.dma.bench;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;

/**
 * The geometry of the throughput chart, shared by the SVG and PNG renderers: sizes on a log axis,
 * MB/s on a linear axis from 0, one series per operation.
 *
 * @param title the chart's title
 * @param series one line per operation, in pixel coordinates
 * @param xTicks size labels
 * @param yTicks MB/s labels
 */
record ChartData(String title, List<Series> series, List<Tick> xTicks, List<Tick> yTicks) {
  static final int WIDTH = 720;
  static final int HEIGHT = 420;
  static final int LEFT = 70;
  static final int RIGHT = 20;
  static final int TOP = 35;
  static final int BOTTOM = 45;
  private static final String[] COLORS = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd"};

  /** A labelled position on an axis, in pixels. */
  record Tick(double position, String label) {}

  /** One operation's points, {x, y} in pixels. */
  record Series(String name, String color, List<double[]> points) {}

  static ChartData of(List<Result> results) {
    TreeSet<Long> sizes = new TreeSet<>();
    double maxRate = 1;
    for (Result r : results) {
      sizes.add(r.sizeBytes());
      maxRate = Math.max(maxRate, r.megabytesPerSecond());
    }
    double top = niceCeiling(maxRate);
    double minLog = sizes.isEmpty() ? 0 : Math.log(sizes.first()) / Math.log(2);
    double maxLog = sizes.isEmpty() ? 1 : Math.log(sizes.last()) / Math.log(2);
    if (maxLog - minLog < 1) {
      minLog -= 0.5;
      maxLog += 0.5;
    }
    double plotWidth = WIDTH - LEFT - RIGHT;
    double plotHeight = HEIGHT - TOP - BOTTOM;
    List<Tick> xTicks = new ArrayList<>();
    for (long size : sizes) {
      xTicks.add(new Tick(x(size, minLog, maxLog, plotWidth), Sizes.format(size)));
    }
    List<Tick> yTicks = new ArrayList<>();
    for (int i = 0; i <= 5; i++) {
      double value = top * i / 5;
      yTicks.add(new Tick(TOP + plotHeight * (1 - value / top), String.format("%,.0f", value)));
    }
    List<Series> series = new ArrayList<>();
    int color = 0;
    for (Map.Entry<String, List<Result>> entry : Report.byOp(results).entrySet()) {
      List<double[]> points = new ArrayList<>();
      List<Result> sorted = new ArrayList<>(entry.getValue());
      sorted.sort((a, b) -> Long.compare(a.sizeBytes(), b.sizeBytes()));
      for (Result r : sorted) {
        points.add(
            new double[] {
              x(r.sizeBytes(), minLog, maxLog, plotWidth),
              TOP + plotHeight * (1 - r.megabytesPerSecond() / top)
            });
      }
      series.add(new Series(entry.getKey(), COLORS[color++ % COLORS.length], points));
    }
    Result first = results.isEmpty() ? null : results.getFirst();
    String title =
        first == null
            ? "dma-bench"
            : String.format(
                "dma-bench: %s (%s), window %d, %d process%s",
                first.provider(),
                first.fabric(),
                first.window(),
                first.processes(),
                first.processes() == 1 ? "" : "es");
    return new ChartData(title, series, xTicks, yTicks);
  }

  private static double x(long size, double minLog, double maxLog, double plotWidth) {
    double log = Math.log(size) / Math.log(2);
    return LEFT + plotWidth * (log - minLog) / (maxLog - minLog);
  }

  /** 1, 2 or 5 times a power of ten, at least {@code value}. */
  static double niceCeiling(double value) {
    double magnitude = Math.pow(10, Math.floor(Math.log10(value)));
    for (double step : new double[] {1, 2, 5, 10}) {
      if (step * magnitude >= value) {
        return step * magnitude;
      }
    }
    return 10 * magnitude;
  }
}
