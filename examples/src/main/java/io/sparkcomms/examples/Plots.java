package io.sparkcomms.examples;

import java.awt.BasicStroke;
import java.awt.Color;
import java.awt.Font;
import java.awt.FontMetrics;
import java.awt.Graphics2D;
import java.awt.RenderingHints;
import java.awt.image.BufferedImage;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import javax.imageio.ImageIO;

/**
 * Small line charts drawn with Java2D (headless), for the notebooks and the examples: a
 * {@link BufferedImage} that a Java notebook displays, or a PNG file.
 */
public final class Plots {
  private static final Color[] COLORS = {new Color(31, 119, 180), new Color(214, 39, 40), new Color(44, 160, 44),
      new Color(255, 127, 14), new Color(148, 103, 189)};

  /** One line of a chart. */
  public record Series(String name, double[] x, double[] y) {}

  private final String title;
  private final String xLabel;
  private final String yLabel;
  private final List<Series> series = new ArrayList<>();
  private boolean logX;
  private boolean logY;

  public Plots(String title, String xLabel, String yLabel) {
    this.title = title;
    this.xLabel = xLabel;
    this.yLabel = yLabel;
  }

  public Plots line(String name, double[] x, double[] y) {
    if (x.length != y.length) throw new IllegalArgumentException("x and y differ in length");
    series.add(new Series(name, x.clone(), y.clone()));
    return this;
  }

  public Plots logX() { logX = true; return this; }

  public Plots logY() { logY = true; return this; }

  /** 1, 2, ..., n. */
  public static double[] range1(int n) {
    double[] x = new double[n];
    for (int i = 0; i < n; i++) x[i] = i + 1;
    return x;
  }

  private double tx(double v) { return logX ? Math.log10(v) : v; }

  private double ty(double v) { return logY ? Math.log10(v) : v; }

  public BufferedImage render(int width, int height) {
    BufferedImage img = new BufferedImage(width, height, BufferedImage.TYPE_INT_RGB);
    Graphics2D g = img.createGraphics();
    g.setRenderingHint(RenderingHints.KEY_ANTIALIASING, RenderingHints.VALUE_ANTIALIAS_ON);
    g.setColor(Color.WHITE);
    g.fillRect(0, 0, width, height);
    double x0 = Double.POSITIVE_INFINITY, x1 = Double.NEGATIVE_INFINITY, y0 = Double.POSITIVE_INFINITY, y1 = Double.NEGATIVE_INFINITY;
    for (Series s : series) {
      for (int i = 0; i < s.x().length; i++) {
        x0 = Math.min(x0, tx(s.x()[i]));
        x1 = Math.max(x1, tx(s.x()[i]));
        y0 = Math.min(y0, ty(s.y()[i]));
        y1 = Math.max(y1, ty(s.y()[i]));
      }
    }
    if (!(x1 > x0)) { x0 -= 1; x1 += 1; }
    if (!(y1 > y0)) { y0 -= 1; y1 += 1; }
    double pad = (y1 - y0) * 0.05;
    y0 -= pad;
    y1 += pad;
    int left = 80, right = 20, top = 40, bottom = 55;
    int pw = width - left - right, ph = height - top - bottom;
    g.setFont(new Font(Font.SANS_SERIF, Font.BOLD, 14));
    FontMetrics fm = g.getFontMetrics();
    g.setColor(Color.BLACK);
    g.drawString(title, (width - fm.stringWidth(title)) / 2, 24);
    g.setFont(new Font(Font.SANS_SERIF, Font.PLAIN, 12));
    fm = g.getFontMetrics();
    g.drawRect(left, top, pw, ph);
    for (int k = 0; k <= 5; k++) {
      double xv = x0 + (x1 - x0) * k / 5;
      double yv = y0 + (y1 - y0) * k / 5;
      int px = left + pw * k / 5;
      int py = top + ph - ph * k / 5;
      g.setColor(new Color(230, 230, 230));
      g.drawLine(px, top + 1, px, top + ph - 1);
      g.drawLine(left + 1, py, left + pw - 1, py);
      g.setColor(Color.BLACK);
      String xs = label(logX ? Math.pow(10, xv) : xv);
      String ys = label(logY ? Math.pow(10, yv) : yv);
      g.drawString(xs, px - fm.stringWidth(xs) / 2, top + ph + 16);
      g.drawString(ys, left - 6 - fm.stringWidth(ys), py + 4);
    }
    g.drawString(xLabel, left + (pw - fm.stringWidth(xLabel)) / 2, height - 12);
    Graphics2D gy = (Graphics2D) g.create();
    gy.rotate(-Math.PI / 2);
    gy.drawString(yLabel, -(top + (ph + fm.stringWidth(yLabel)) / 2), 16);
    gy.dispose();
    int legendY = top + 16;
    for (int si = 0; si < series.size(); si++) {
      Series s = series.get(si);
      Color c = COLORS[si % COLORS.length];
      g.setColor(c);
      g.setStroke(new BasicStroke(2f));
      int prevX = -1, prevY = -1;
      for (int i = 0; i < s.x().length; i++) {
        int px = left + (int) Math.round((tx(s.x()[i]) - x0) / (x1 - x0) * pw);
        int py = top + ph - (int) Math.round((ty(s.y()[i]) - y0) / (y1 - y0) * ph);
        if (prevX >= 0) g.drawLine(prevX, prevY, px, py);
        g.fillOval(px - 3, py - 3, 6, 6);
        prevX = px;
        prevY = py;
      }
      g.drawLine(left + pw - 150, legendY - 4, left + pw - 125, legendY - 4);
      g.setColor(Color.BLACK);
      g.drawString(s.name(), left + pw - 120, legendY);
      legendY += 16;
    }
    g.dispose();
    return img;
  }

  /** Renders 720x420 and writes a PNG. */
  public Path writePng(Path file) {
    try {
      ImageIO.write(render(720, 420), "png", file.toFile());
      return file;
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  private static String label(double v) {
    double a = Math.abs(v);
    if (a >= 1e6 || (a < 1e-3 && a > 0)) return String.format("%.1e", v);
    if (a >= 100) return String.format("%.0f", v);
    if (a >= 1) return String.format("%.2f", v);
    return String.format("%.3f", v);
  }
}
