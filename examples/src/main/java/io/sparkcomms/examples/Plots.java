package io.sparkcomms.examples;

import java.awt.image.BufferedImage;
import java.io.IOException;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.knowm.xchart.BitmapEncoder;
import org.knowm.xchart.XYChart;
import org.knowm.xchart.XYChartBuilder;
import org.knowm.xchart.XYSeries;
import org.knowm.xchart.style.Styler;
import org.knowm.xchart.style.markers.SeriesMarkers;

/**
 * Small line charts for the notebooks and the examples, drawn by XChart (works headless): a
 * {@link BufferedImage} that a Java notebook displays, or a PNG file. A thin builder over
 * {@link XYChart}; {@link #chart(int, int)} gives the chart itself for further styling.
 */
public final class Plots {
  /** One line of a chart. */
  public record Series(String name, double[] x, double[] y) {}

  /** Margin on a logarithmic axis: the range is [min / LOG_PAD, max * LOG_PAD]. */
  private static final double LOG_PAD = 1.2;

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

  /** Adds a line; x and y are copied. On a logarithmic axis, every value of it must be positive. */
  public Plots line(String name, double[] x, double[] y) {
    if (x.length != y.length) throw new IllegalArgumentException("x and y differ in length");
    if (x.length == 0) throw new IllegalArgumentException("series " + name + " is empty");
    series.add(new Series(name, x.clone(), y.clone()));
    return this;
  }

  public Plots logX() { logX = true; return this; }

  public Plots logY() { logY = true; return this; }

  /** The lines added so far. */
  public List<Series> series() { return List.copyOf(series); }

  /** 1, 2, ..., n. */
  public static double[] range1(int n) {
    double[] x = new double[n];
    for (int i = 0; i < n; i++) x[i] = i + 1;
    return x;
  }

  /** The XChart chart of these lines, width x height pixels. */
  public XYChart chart(int width, int height) {
    XYChart chart = new XYChartBuilder().width(width).height(height)
        .title(title).xAxisTitle(xLabel).yAxisTitle(yLabel).build();
    chart.getStyler()
        .setXAxisLogarithmic(logX)
        .setYAxisLogarithmic(logY)
        .setLegendPosition(Styler.LegendPosition.OutsideS)  // below the plot: never over a point
        .setLegendLayout(Styler.LegendLayout.Horizontal)
        .setChartTitleVisible(true);
    for (Series s : series) {
      check(s, logX, s.x(), "x");
      check(s, logY, s.y(), "y");
      XYSeries xs = chart.addSeries(s.name(), s.x(), s.y());
      xs.setMarker(SeriesMarkers.CIRCLE);
    }
    // XChart's automatic range on a logarithmic axis can end inside the data (the largest point
    // drawn outside the plot); a range of the data's extent, padded by a factor, keeps every point in.
    if (logX && !series.isEmpty()) {
      chart.getStyler().setXAxisMin(min(true) / LOG_PAD).setXAxisMax(max(true) * LOG_PAD);
    }
    if (logY && !series.isEmpty()) {
      chart.getStyler().setYAxisMin(min(false) / LOG_PAD).setYAxisMax(max(false) * LOG_PAD);
    }
    return chart;
  }

  /** The chart drawn into an image of width x height pixels. */
  public BufferedImage render(int width, int height) {
    return BitmapEncoder.getBufferedImage(chart(width, height));
  }

  /** Renders 720x420 and writes it to file as a PNG (the name is used as given). */
  public Path writePng(Path file) {
    try (OutputStream out = Files.newOutputStream(file)) {
      BitmapEncoder.saveBitmap(chart(720, 420), out, BitmapEncoder.BitmapFormat.PNG);
      return file;
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  private double min(boolean x) {
    double m = Double.POSITIVE_INFINITY;
    for (Series s : series) for (double v : x ? s.x() : s.y()) m = Math.min(m, v);
    return m;
  }

  private double max(boolean x) {
    double m = Double.NEGATIVE_INFINITY;
    for (Series s : series) for (double v : x ? s.x() : s.y()) m = Math.max(m, v);
    return m;
  }

  private static void check(Series s, boolean log, double[] v, String axis) {
    if (!log) return;
    for (double d : v) {
      if (!(d > 0)) {
        throw new IllegalArgumentException("series " + s.name() + ": " + axis + " = " + d
            + " on a logarithmic " + axis + " axis (every value must be positive)");
      }
    }
  }
}
