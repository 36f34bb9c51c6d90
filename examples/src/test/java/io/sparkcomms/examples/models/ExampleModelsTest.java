package io.sparkcomms.examples.models;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.sparkcomms.spark.dataset.DenseLayer;
import io.sparkcomms.spark.dataset.LabeledVector;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Test;

/** The example models against hand computations and finite differences. */
class ExampleModelsTest {
  static List<LabeledVector> rows(int n, int d, long seed) {
    Random r = new Random(seed);
    List<LabeledVector> out = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      float[] x = new float[d];
      for (int j = 0; j < d; j++) x[j] = (float) r.nextGaussian();
      out.add(new LabeledVector(x, r.nextBoolean() ? 1f : 0f));
    }
    return out;
  }

  @Test void logisticLossAtZeroIsLog2AndTheGradientIsTheMeanError() {
    List<LabeledVector> batch = List.of(new LabeledVector(new float[] {2, -1}, 1), new LabeledVector(new float[] {1, 3}, 0));
    float[] g = new float[3];
    double loss = new LogisticRegressionGradient().compute(new float[3], batch, g);
    assertEquals(Math.log(2), loss, 1e-12);
    // p = 0.5 everywhere: g = mean((p - y) x), bias: mean(p - y)
    assertArrayEquals(new float[] {(-0.5f * 2 + 0.5f * 1) / 2, (-0.5f * -1 + 0.5f * 3) / 2, 0}, g, 1e-7f);
    assertEquals(0.5, LogisticRegressionGradient.predict(new float[3], new float[] {4, 5}), 0);
    assertEquals(3, LogisticRegressionGradient.parameterCount(2));
  }

  @Test void logisticGradientMatchesFiniteDifferencesWithL2() {
    double l2 = 0.3;
    LogisticRegressionGradient f = new LogisticRegressionGradient(l2);
    List<LabeledVector> batch = rows(40, 4, 7);
    float[] p = {0.4f, -0.7f, 0.2f, 1.1f, -0.3f};
    float[] g = new float[p.length];
    f.compute(p, batch, g);
    for (int j = 0; j < p.length; j++) {
      float h = 1e-2f;
      float[] up = p.clone();
      float[] down = p.clone();
      up[j] += h;
      down[j] -= h;
      double numeric = (f.compute(up, batch, new float[p.length]) - f.compute(down, batch, new float[p.length])) / (up[j] - down[j]);
      assertEquals(numeric, g[j], 1e-3, "parameter " + j);
    }
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> f.compute(new float[3], batch, new float[3]));
    assertTrue(e.getMessage().contains("row has 4 features, the model 2"), e.getMessage());
  }

  @Test void mlpForwardIsTheLayersInOrder() {
    DenseLayer first = new DenseLayer(2, 2, new float[] {1, 2, -3, 1}, new float[] {0.5f, 0}, DenseLayer.Activation.RELU);
    DenseLayer second = new DenseLayer(2, 1, new float[] {2, -1}, new float[] {1}, DenseLayer.Activation.IDENTITY);
    MlpModel m = new MlpModel(List.of(first, second));
    // x = (1, 1): first = relu(1 + 2 + 0.5, -3 + 1) = (3.5, 0); second = 2 * 3.5 - 0 + 1 = 8
    assertArrayEquals(new float[] {8}, m.forward(new float[] {1, 1}), 0f);
    assertEquals(2 * 2 + 2 + 2 + 1, m.parameterCount());
    assertEquals(2, m.inputs());
    assertEquals(1, m.outputs());
    assertThrows(IllegalArgumentException.class, () -> m.forward(new float[] {1}));
    IllegalArgumentException chain = assertThrows(IllegalArgumentException.class, () -> new MlpModel(List.of(second, second)));
    assertTrue(chain.getMessage().contains("layer 1 takes 2 inputs, layer 0 gives 1"), chain.getMessage());
  }

  @Test void randomModelsAreSeeded() {
    MlpModel a = MlpModel.random(5, DenseLayer.Activation.TANH, 6, 8, 3);
    MlpModel b = MlpModel.random(5, DenseLayer.Activation.TANH, 6, 8, 3);
    MlpModel c = MlpModel.random(6, DenseLayer.Activation.TANH, 6, 8, 3);
    float[] x = {1, -2, 0.5f, 3, 0, -1};
    assertArrayEquals(a.forward(x), b.forward(x), 0f);
    assertTrue(!java.util.Arrays.equals(a.forward(x), c.forward(x)));
    assertEquals(DenseLayer.Activation.RELU, a.layers().get(0).activation());
    assertEquals(DenseLayer.Activation.TANH, a.layers().get(1).activation());
    assertEquals(6L * 8 + 8 + 8 * 3 + 3, a.parameterCount());
  }
}
