package dev.dma.bench;

import java.awt.BasicStroke;
import java.awt.Color;
import java.awt.Font;
import java.awt.Graphics2D;
import java.awt.RenderingHints;
import java.awt.geom.AffineTransform;
import java.awt.image.BufferedImage;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.List;
import javax.imageio.ImageIO;

/** The throughput chart as a PNG, drawn headless with Java2D from the same {@link ChartData}. */
final class PngChart {
  private PngChart() {}

  static byte[] render(List<Result> results) {
    // Headless: no display is needed (or wanted) on a benchmark host.
    System.setProperty("java.awt.headless", "true");
    ChartData data = ChartData.of(results);
    BufferedImage image =
        new BufferedImage(ChartData.WIDTH, ChartData.HEIGHT, BufferedImage.TYPE_INT_RGB);
    Graphics2D g = image.createGraphics();
    try {
      g.setRenderingHint(RenderingHints.KEY_ANTIALIASING, RenderingHints.VALUE_ANTIALIAS_ON);
      g.setColor(Color.WHITE);
      g.fillRect(0, 0, ChartData.WIDTH, ChartData.HEIGHT);
      g.setFont(new Font(Font.SANS_SERIF, Font.PLAIN, 12));
      int bottom = ChartData.HEIGHT - ChartData.BOTTOM;
      int right = ChartData.WIDTH - ChartData.RIGHT;
      for (ChartData.Tick tick : data.yTicks()) {
        int y = (int) Math.round(tick.position());
        g.setColor(new Color(0xdd, 0xdd, 0xdd));
        g.drawLine(ChartData.LEFT, y, right, y);
        g.setColor(Color.BLACK);
        int w = g.getFontMetrics().stringWidth(tick.label());
        g.drawString(tick.label(), ChartData.LEFT - 6 - w, y + 4);
      }
      for (ChartData.Tick tick : data.xTicks()) {
        int w = g.getFontMetrics().stringWidth(tick.label());
        g.drawString(tick.label(), (int) Math.round(tick.position()) - w / 2, bottom + 18);
      }
      g.drawLine(ChartData.LEFT, ChartData.TOP, ChartData.LEFT, bottom);
      g.drawLine(ChartData.LEFT, bottom, right, bottom);
      g.drawString("transfer size", (ChartData.LEFT + right) / 2 - 35, ChartData.HEIGHT - 8);
      AffineTransform saved = g.getTransform();
      g.rotate(-Math.PI / 2, 18, ChartData.HEIGHT / 2.0);
      g.drawString("MB/s", 0, ChartData.HEIGHT / 2 + 4);
      g.setTransform(saved);
      g.setFont(new Font(Font.SANS_SERIF, Font.PLAIN, 14));
      g.drawString(data.title(), ChartData.LEFT, 20);
      g.setFont(new Font(Font.SANS_SERIF, Font.PLAIN, 12));
      int legend = 0;
      for (ChartData.Series series : data.series()) {
        Color color = Color.decode(series.color());
        g.setColor(color);
        g.setStroke(new BasicStroke(2));
        double[] last = null;
        for (double[] p : series.points()) {
          if (last != null) {
            g.drawLine(
                (int) Math.round(last[0]), (int) Math.round(last[1]),
                (int) Math.round(p[0]), (int) Math.round(p[1]));
          }
          g.fillOval((int) Math.round(p[0]) - 3, (int) Math.round(p[1]) - 3, 6, 6);
          last = p;
        }
        int y = ChartData.TOP + 14 + 16 * legend++;
        g.fillRect(ChartData.LEFT + 12, y - 4, 12, 3);
        g.setColor(Color.BLACK);
        g.drawString(series.name(), ChartData.LEFT + 30, y);
      }
    } finally {
      g.dispose();
    }
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    try {
      ImageIO.write(image, "png", out);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return out.toByteArray();
  }
}
