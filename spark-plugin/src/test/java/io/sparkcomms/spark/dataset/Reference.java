package io.sparkcomms.spark.dataset;

import java.util.ArrayList;
import java.util.List;
import java.util.Random;

/** Plain-Java computations the helpers are checked against, and test data. */
final class Reference {
  private Reference() {}

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
      if ((LogisticRegressionGradient.predict(p, r.features()) > 0.5) == (r.label() > 0.5)) ok++;
    }
    return ok / (double) rows.size();
  }
}
