package io.sparkcomms.examples;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.awt.image.BufferedImage;
import java.nio.file.Files;
import java.nio.file.Path;
import javax.imageio.ImageIO;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Plots renders headless: the image has the asked size and is not blank; the PNG is written and decodes. */
class PlotsTest {
  static {
    System.setProperty("java.awt.headless", "true");
  }

  static Plots twoLines() {
    double[] x = Plots.range1(20);
    double[] a = new double[20];
    double[] b = new double[20];
    for (int i = 0; i < 20; i++) {
      a[i] = 1.0 / x[i];
      b[i] = 2.0 / Math.sqrt(x[i]);
    }
    return new Plots("loss", "epoch", "loss").line("a", x, a).line("b", x, b).logY();
  }

  /** Distinct colours among a sparse grid of pixels: a blank image has one. */
  static long colours(BufferedImage img) {
    java.util.Set<Integer> seen = new java.util.HashSet<>();
    for (int y = 0; y < img.getHeight(); y += 3) {
      for (int x = 0; x < img.getWidth(); x += 3) seen.add(img.getRGB(x, y));
    }
    return seen.size();
  }

  @Test void renderHasTheAskedSizeAndIsNotBlank() {
    BufferedImage img = twoLines().render(640, 360);
    assertEquals(640, img.getWidth());
    assertEquals(360, img.getHeight());
    assertTrue(colours(img) > 10, "the chart drew something");
  }

  @Test void writePngWritesADecodablePngOf720x420(@TempDir Path dir) throws Exception {
    Path file = dir.resolve("chart.png");
    assertEquals(file, twoLines().logX().writePng(file));
    byte[] head = java.util.Arrays.copyOf(Files.readAllBytes(file), 8);
    assertEquals("\u0089PNG\r\n\u001a\n", new String(head, java.nio.charset.StandardCharsets.ISO_8859_1));
    BufferedImage img = ImageIO.read(file.toFile());
    assertEquals(720, img.getWidth());
    assertEquals(420, img.getHeight());
    assertTrue(colours(img) > 10, "the chart drew something");
  }

  @Test void aNameWithoutPngExtensionIsKept(@TempDir Path dir) {
    Path file = dir.resolve("chart");
    assertEquals(file, twoLines().writePng(file));
    assertTrue(Files.isRegularFile(file));
  }

  @Test void nonPositiveValuesOnALogAxisAndLengthMismatchAreRefused() {
    double[] x = {1, 2, 3};
    assertThrows(IllegalArgumentException.class, () -> new Plots("t", "x", "y").line("s", x, new double[] {1, 0, 2}).logY().render(100, 100));
    assertThrows(IllegalArgumentException.class, () -> new Plots("t", "x", "y").line("s", x, new double[] {1, 2}));
  }

  @Test void linearAxesAcceptZeroAndNegativeValues() {
    BufferedImage img = new Plots("t", "x", "y").line("s", new double[] {-1, 0, 1}, new double[] {0, -2, 3}).render(300, 200);
    assertEquals(300, img.getWidth());
  }
}
