package io.sparkcomms.examples.models;

import io.sparkcomms.spark.dataset.GradientFunction;
import io.sparkcomms.spark.dataset.LabeledVector;
import java.util.List;

/**
 * Binary logistic regression over {@link LabeledVector} rows (labels 0/1), the example model that
 * {@link io.sparkcomms.spark.dataset.DataParallelTrainer} trains: parameters are
 * {@code [w_0 .. w_{d-1}, bias]}, loss is the mean log loss plus {@code l2/2 * |w|^2}.
 */
public final class LogisticRegressionGradient implements GradientFunction<LabeledVector> {
  private static final long serialVersionUID = 1L;
  private final double l2;

  public LogisticRegressionGradient(double l2) { this.l2 = l2; }

  public LogisticRegressionGradient() { this(0); }

  /** Number of parameters for {@code features} inputs. */
  public static int parameterCount(int features) { return features + 1; }

  /** P(label = 1 | x). */
  public static double predict(float[] params, float[] x) {
    double z = params[x.length];
    for (int j = 0; j < x.length; j++) z += params[j] * x[j];
    return 1 / (1 + Math.exp(-z));
  }

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
      // log(1 + e^z) - y z, computed stably
      loss += (z > 0 ? z + Math.log1p(Math.exp(-z)) : Math.log1p(Math.exp(z))) - y * z;
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
