package io.sparkcomms.examples.gpu;

import io.sparkcomms.collectives.math.Activation;
import io.sparkcomms.collectives.math.DenseMath;
import io.sparkcomms.collectives.math.Matrix;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;

/**
 * Every {@link DenseMath} operation against a float64 reference on fresh random inputs, outputs
 * poisoned (NaN) first where the operation only writes them: the device math on a GPU host, the host
 * math in the test suite. Returns the failures (empty: all passed).
 */
public final class MathCheck {
  private MathCheck() {}

  public static List<String> run(DenseMath m, long seed) {
    List<String> f = new ArrayList<>();
    Random r = new Random(seed);
    int[][] shapes = {{37, 19, 53}, {1, 1, 1}, {1, 65, 7}, {130, 3, 1}};
    for (int[] sh : shapes) {
      int mm = sh[0], n = sh[1], k = sh[2];
      for (int t = 0; t < 4; t++) {
        boolean ta = (t & 1) != 0, tb = (t & 2) != 0;
        for (float beta : new float[] {0f, 0.5f}) {
          float[] a = rand(r, mm * k), b = rand(r, k * n), c0 = beta == 0 ? nan(mm * n) : rand(r, mm * n);
          Matrix ma = m.upload(a, ta ? k : mm, ta ? mm : k), mb = m.upload(b, tb ? n : k, tb ? k : n), mc = m.upload(c0, mm, n);
          m.gemm(0.7f, ma, ta, mb, tb, beta, mc);
          float[] got = m.download(mc);
          for (int i = 0; i < mm; i++) {
            for (int j = 0; j < n; j++) {
              double s = 0, mag = 0;
              for (int p = 0; p < k; p++) {
                double x = ta ? a[p * mm + i] : a[i * k + p], y = tb ? b[j * k + p] : b[p * n + j];
                s += x * y;
                mag += Math.abs(x * y);
              }
              double ref = 0.7 * s + (beta == 0 ? 0 : beta * (double) c0[i * n + j]);
              if (!(Math.abs(got[i * n + j] - ref) <= 1e-5 * (mag + Math.abs(ref)) + 1e-6)) {
                f.add("gemm " + mm + "x" + n + "x" + k + " ta=" + ta + " tb=" + tb + " beta=" + beta + " at [" + i + "][" + j
                    + "]: " + got[i * n + j] + " vs " + ref);
                i = mm;
                break;
              }
            }
          }
        }
      }
    }
    // operands that are views at an offset of a larger allocation, as a model's layers are
    {
      float[] whole = rand(r, 300), b = rand(r, 5 * 4);
      Matrix mw = m.upload(whole, 1, 300), mb = m.upload(b, 5, 4), mc = m.upload(nan(3 * 4 + 7), 1, 3 * 4 + 7);
      Matrix a = mw.view(101, 3, 5), c = mc.view(7, 3, 4);
      m.gemm(1f, a, false, mb, false, 0f, c);
      float[] got = m.download(c);
      expect(f, "gemm of views at offsets", got, idx -> {
        int i = idx / 4, j = idx % 4;
        double s = 0;
        for (int p = 0; p < 5; p++) s += (double) whole[101 + i * 5 + p] * b[p * 4 + j];
        return s;
      }, 1e-5);
      float[] head = m.download(mc.view(0, 1, 7));
      for (float v : head) {
        if (!Float.isNaN(v)) {
          f.add("gemm into a view wrote before it");
          break;
        }
      }
    }
    // k = 0: c = beta c (alpha op(a) op(b) is an empty sum)
    {
      float[] c0 = rand(r, 6);
      Matrix mc = m.upload(c0, 2, 3);
      m.gemm(1f, m.zeros(2, 0), false, m.zeros(0, 3), false, 0.5f, mc);
      expect(f, "gemm with k = 0", m.download(mc), i -> 0.5 * c0[i], 1e-7);
    }
    int n = 1003;
    float[] x = rand(r, n), y = rand(r, n);
    Matrix mx = m.upload(x, 1, n), my = m.upload(y, 1, n);
    m.axpy(-1.5f, mx, my);
    expect(f, "axpy", m.download(my), i -> y[i] + -1.5 * x[i], 1e-6);
    m.scale(0.25f, mx);
    expect(f, "scale", m.download(mx), i -> 0.25 * x[i], 1e-7);
    int rows = 129, cols = 33;
    for (Activation act : Activation.values()) {
      for (boolean withBias : new boolean[] {true, false}) {
        float[] v = rand(r, rows * cols), bias = rand(r, cols);
        Matrix mv = m.upload(v, rows, cols);
        m.biasActivation(mv, withBias ? m.upload(bias, 1, cols) : null, act);
        float[] got = m.download(mv);
        expect(f, "biasActivation " + act + (withBias ? "" : " no bias"), got,
            i -> actRef(act, v[i] + (withBias ? bias[i % cols] : 0)), 2e-6);
        float[] g = rand(r, rows * cols);
        Matrix mg = m.upload(g, rows, cols);
        m.activationBackward(mg, mv, act);
        expect(f, "activationBackward " + act, m.download(mg), i -> g[i] * derivRef(act, got[i]), 2e-6);
      }
    }
    float[] v = rand(r, rows * cols);
    Matrix mv = m.upload(v, rows, cols), out = m.upload(nan(cols), 1, cols);
    m.columnSums(mv, 0.5f, out);
    expect(f, "columnSums", m.download(out), c -> {
      double s = 0;
      for (int i = 0; i < rows; i++) s += v[i * cols + c];
      return 0.5 * s;
    }, 1e-5);
    float[] z = new float[n], lab = new float[n];
    for (int i = 0; i < n; i++) {
      z[i] = (r.nextFloat() * 2 - 1) * (i % 10 == 0 ? 60 : 4);   // some large logits: the stable forms
      lab[i] = r.nextBoolean() ? 1 : 0;
    }
    Matrix mz = m.upload(z, n, 1), ml = m.upload(lab, n, 1), mgr = m.upload(nan(n), n, 1), loss = m.upload(nan(1), 1, 1);
    m.sigmoidCrossEntropy(mz, ml, mgr, loss);
    expect(f, "sigmoidCrossEntropy gradient", m.download(mgr), i -> (1 / (1 + Math.exp(-z[i])) - lab[i]) / n, 1e-6);
    double lref = 0;
    for (int i = 0; i < n; i++) lref += Math.max(z[i], 0) - z[i] * lab[i] + Math.log1p(Math.exp(-Math.abs(z[i])));
    double lossRef = lref / n;
    expect(f, "sigmoidCrossEntropy loss", m.download(loss), i -> lossRef, 1e-5);
    Matrix view = m.upload(new float[] {1, 2, 3, 4, 5, 6}, 2, 3).view(3, 1, 3);
    expect(f, "view", m.download(view), i -> 4 + i, 0);
    try {
      m.gemm(1f, m.zeros(2, 3), false, m.zeros(2, 3), false, 0f, m.zeros(2, 3));
      f.add("gemm of 2x3 by 2x3 was accepted");
    } catch (IllegalArgumentException expected) {
      // the shapes are checked before anything runs
    }
    try {
      m.upload(new float[5], 2, 3);
      f.add("upload of 5 elements into 2x3 was accepted");
    } catch (IllegalArgumentException expected) {
      // the length is checked
    }
    return f;
  }

  private static void expect(List<String> f, String what, float[] got, java.util.function.IntToDoubleFunction ref, double rel) {
    for (int i = 0; i < got.length; i++) {
      double e = ref.applyAsDouble(i);
      if (!(Math.abs(got[i] - e) <= rel * Math.max(1, Math.abs(e)) + 1e-7)) {
        f.add(what + " at " + i + ": " + got[i] + " vs " + e + " (" + Arrays.toString(Arrays.copyOf(got, Math.min(4, got.length))) + "...)");
        return;
      }
    }
  }

  static double actRef(Activation a, double v) {
    switch (a) {
      case RELU: return v > 0 ? v : 0;
      case TANH: return Math.tanh(v);
      case SIGMOID: return 1 / (1 + Math.exp(-v));
      default: return v;
    }
  }

  static double derivRef(Activation a, double out) {
    switch (a) {
      case RELU: return out > 0 ? 1 : 0;
      case TANH: return 1 - out * out;
      case SIGMOID: return out * (1 - out);
      default: return 1;
    }
  }

  private static float[] rand(Random r, int n) {
    float[] v = new float[n];
    for (int i = 0; i < n; i++) v[i] = r.nextFloat() * 2 - 1;
    return v;
  }

  private static float[] nan(int n) {
    float[] v = new float[n];
    Arrays.fill(v, Float.NaN);
    return v;
  }
}
