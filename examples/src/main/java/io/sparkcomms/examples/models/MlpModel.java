package io.sparkcomms.examples.models;

import io.sparkcomms.spark.dataset.DenseLayer;
import io.sparkcomms.spark.dataset.DenseNetwork;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Random;

/**
 * A multi-layer perceptron of dense layers {@code y = act(W x + b)}: the example model that
 * {@link io.sparkcomms.spark.dataset.TensorParallelInference} splits across ranks, with seeded random
 * weights ({@link #random}) and its single-rank reference ({@link #forward}).
 */
public final class MlpModel implements DenseNetwork {
  private final List<DenseLayer> layers;
  /** The layers' weights and biases, copied out once for {@link #forward}. */
  private final float[][] weights;
  private final float[][] biases;

  /** @throws IllegalArgumentException without layers, or when a layer's inputs differ from the previous layer's outputs */
  public MlpModel(List<DenseLayer> layers) {
    if (layers.isEmpty()) throw new IllegalArgumentException("a model needs at least one layer");
    for (int i = 1; i < layers.size(); i++) {
      if (layers.get(i).inputs() != layers.get(i - 1).outputs()) {
        throw new IllegalArgumentException("layer " + i + " takes " + layers.get(i).inputs() + " inputs, layer " + (i - 1)
            + " gives " + layers.get(i - 1).outputs());
      }
    }
    this.layers = Collections.unmodifiableList(new ArrayList<>(layers));
    this.weights = new float[layers.size()][];
    this.biases = new float[layers.size()][];
    for (int i = 0; i < layers.size(); i++) {
      weights[i] = layers.get(i).weights();
      biases[i] = layers.get(i).bias();
    }
  }

  /**
   * A model with random weights (uniform, scaled by 1/sqrt(fan-in)) of the given layer widths, ReLU
   * between layers and {@code last} at the end. Same seed, same model.
   */
  public static MlpModel random(long seed, DenseLayer.Activation last, int... widths) {
    if (widths.length < 2) throw new IllegalArgumentException("need at least input and output widths");
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
    return new MlpModel(ls);
  }

  @Override public List<DenseLayer> layers() { return layers; }

  public int inputs() { return layers.get(0).inputs(); }

  public int outputs() { return layers.get(layers.size() - 1).outputs(); }

  /** Number of weights and biases. */
  public long parameterCount() {
    long n = 0;
    for (DenseLayer l : layers) n += (long) l.inputs() * l.outputs() + l.outputs();
    return n;
  }

  /** Single-rank inference of one input (float32 arithmetic, the reference for the split one). */
  public float[] forward(float[] x) {
    if (x.length != inputs()) throw new IllegalArgumentException("input has " + x.length + " features, the model " + inputs());
    float[] a = x;
    for (int li = 0; li < layers.size(); li++) {
      DenseLayer l = layers.get(li);
      float[] w = weights[li];
      float[] bias = biases[li];
      int in = l.inputs();
      float[] y = new float[l.outputs()];
      for (int o = 0; o < y.length; o++) {
        float s = 0;
        int base = o * in;
        for (int i = 0; i < in; i++) s += w[base + i] * a[i];
        y[o] = l.activation().apply(s + bias[o]);
      }
      a = y;
    }
    return a;
  }
}
