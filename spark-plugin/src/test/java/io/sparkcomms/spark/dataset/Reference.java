package io.sparkcomms.spark.dataset;

import java.util.ArrayList;
import java.util.List;
import java.util.Random;

/** Plain-Java computations the helpers are checked against, test data, and the models they run. */
final class Reference {
  private Reference() {}

  /**
   * Binary logistic regression over labeled vectors (labels 0/1), parameters {@code [w, bias]}, mean
   * log loss plus {@code l2/2 * |w|^2}: the model the trainer is tested with.
   */
  static final class LogisticGradient implements GradientFunction<LabeledVector> {
    private static final long serialVersionUID = 1L;
    private final double l2;

    LogisticGradient(double l2) { this.l2 = l2; }

    LogisticGradient() { this(0); }

    @Override public double compute(float[] params, List<LabeledVector> batch, float[] gradient) {
      int d = params.length - 1;
      double[] g = new double[params.length];
      double loss = 0;
      for (LabeledVector r : batch) {
        float[] x = r.features();
        if (x.length != d) throw new IllegalArgumentException("row has " + x.length + " features, the model " + d);
        double z = params[d];
        for (int j = 0; j < d; j++) z += params[j] * x[j];
        double y = r.label();
        loss += (z > 0 ? z + Math.log1p(Math.exp(-z)) : Math.log1p(Math.exp(z))) - y * z;   // log(1 + e^z) - y z
        double err = 1 / (1 + Math.exp(-z)) - y;
        for (int j = 0; j < d; j++) g[j] += err * x[j];
        g[d] += err;
      }
      int n = Math.max(1, batch.size());
      double reg = 0;
      for (int j = 0; j < d; j++) {
        gradient[j] = (float) (g[j] / n + l2 * params[j]);
        reg += params[j] * (double) params[j];
      }
      gradient[d] = (float) (g[d] / n);
      return loss / n + l2 / 2 * reg;
    }
  }

  /** P(label = 1 | x) under logistic parameters {@code [w, bias]}. */
  static double predict(float[] params, float[] x) {
    double z = params[x.length];
    for (int j = 0; j < x.length; j++) z += params[j] * x[j];
    return 1 / (1 + Math.exp(-z));
  }

  /** A network for the inference tests, with its single-rank float32 reference. */
  record Net(List<DenseLayer> layers) implements DenseNetwork {
    /** Single-rank inference of one input, float32, sums in input order. */
    float[] forward(float[] x) {
      float[] a = x;
      for (DenseLayer l : layers) {
        float[] w = l.weights();
        float[] b = l.bias();
        float[] y = new float[l.outputs()];
        for (int o = 0; o < y.length; o++) {
          float s = 0;
          for (int i = 0; i < l.inputs(); i++) s += w[o * l.inputs() + i] * a[i];
          y[o] = l.activation().apply(s + b[o]);
        }
        a = y;
      }
      return a;
    }

    long parameterCount() {
      long n = 0;
      for (DenseLayer l : layers) n += (long) l.inputs() * l.outputs() + l.outputs();
      return n;
    }
  }

  /** Random weights (uniform, scaled by 1/sqrt(fan-in)) of the given widths, ReLU between layers, {@code last} at the end. */
  static Net randomNet(long seed, DenseLayer.Activation last, int... widths) {
    Random r = new Random(seed);
    List<DenseLayer> ls = new ArrayList<>();
    for (int i = 0; i + 1 < widths.length; i++) {
      int in = widths[i];
      int out = widths[i + 1];
      float[] w = new float[in * out];
      float[] b = new float[out];
      float scale = (float) (1 / Math.sqrt(in));
      for (int k = 0; k < w.length; k++) w[k] = (r.nextFloat() * 2 - 1) * scale;
      for (int k = 0; k < b.length; k++) b[k] = (r.nextFloat() * 2 - 1) * 0.1f;
      ls.add(new DenseLayer(in, out, w, b, i + 2 == widths.length ? last : DenseLayer.Activation.RELU));
    }
    return new Net(ls);
  }

  /** Separable-ish synthetic logistic data: label = [w.x + b + noise > 0]. */
  static List<LabeledVector> logisticData(int rows, int d, long seed) {
    Random r = new Random(seed);
    double[] w = new double[d];
    for (int j = 0; j < d; j++) w[j] = r.nextGaussian();
    List<LabeledVector> out = new ArrayList<>();
    for (int i = 0; i < rows; i++) {
      float[] x = new float[d];
      double z = 0.3;
      for (int j = 0; j < d; j++) {
        x[j] = (float) r.nextGaussian();
        z += w[j] * x[j];
      }
      out.add(new LabeledVector(x, z + 0.5 * r.nextGaussian() > 0 ? 1f : 0f));
    }
    return out;
  }

  /** Mean log-loss gradient of {@code rows} at {@code p} ([w, b]), in double, and the mean loss in [d+1]. */
  static double[] lrGradient(float[] p, List<LabeledVector> rows) {
    int d = p.length - 1;
    double[] g = new double[d + 2];
    for (LabeledVector r : rows) {
      double z = p[d];
      for (int j = 0; j < d; j++) z += p[j] * r.features()[j];
      double prob = 1 / (1 + Math.exp(-z));
      double err = prob - r.label();
      for (int j = 0; j < d; j++) g[j] += err * r.features()[j];
      g[d] += err;
      g[d + 1] += -(r.label() * Math.log(prob) + (1 - r.label()) * Math.log(1 - prob));
    }
    for (int j = 0; j < g.length; j++) g[j] /= rows.size();
    return g;
  }

  /**
   * Full-batch gradient descent as the trainer does it: every partition's mean gradient, averaged
   * over partitions, SGD step. Returns params; losses (mean over partitions of the mean loss) into {@code losses}.
   */
  static float[] fullBatchGd(List<List<LabeledVector>> parts, float[] init, int epochs, double lr, double[] losses) {
    float[] p = init.clone();
    for (int e = 0; e < epochs; e++) {
      double[] avg = new double[p.length + 1];
      long rows = 0;
      double lossSum = 0;
      for (List<LabeledVector> part : parts) {
        double[] g = lrGradient(p, part);
        for (int j = 0; j < p.length; j++) avg[j] += g[j] / parts.size();
        lossSum += g[p.length] * part.size();
        rows += part.size();
      }
      losses[e] = lossSum / rows;
      for (int j = 0; j < p.length; j++) p[j] -= (float) (lr * avg[j]);
    }
    return p;
  }

  static double accuracy(float[] p, List<LabeledVector> rows) {
    int ok = 0;
    for (LabeledVector r : rows) {
      if ((predict(p, r.features()) > 0.5) == (r.label() > 0.5)) ok++;
    }
    return ok / (double) rows.size();
  }
}
