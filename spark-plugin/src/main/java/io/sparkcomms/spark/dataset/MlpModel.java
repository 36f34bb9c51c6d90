package io.sparkcomms.spark.dataset;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Random;

/**
 * A multi-layer perceptron of dense layers {@code y = act(W x + b)}, {@code W} row-major
 * {@code [out][in]}: the model {@link TensorParallelInference} splits across ranks, and its
 * single-rank reference ({@link #forward}).
 */
public final class MlpModel implements Serializable {
  private static final long serialVersionUID = 1L;

  /** Element-wise activations (element-wise, so they apply to a slice of a layer's outputs). */
  public enum Activation {
    IDENTITY, RELU, TANH, SIGMOID;

    float apply(float x) {
      switch (this) {
        case RELU: return x > 0 ? x : 0;
        case TANH: return (float) Math.tanh(x);
        case SIGMOID: return (float) (1 / (1 + Math.exp(-x)));
        default: return x;
      }
    }
  }

  /** One dense layer. */
  public static final class Layer implements Serializable {
    private static final long serialVersionUID = 1L;
    final int in;
    final int out;
    final float[] weights;
    final float[] bias;
    final Activation activation;

    /** {@code weights.length == out * in} (row o = output o), {@code bias.length == out}. */
    public Layer(int in, int out, float[] weights, float[] bias, Activation activation) {
      if (in < 1 || out < 1) throw new IllegalArgumentException("layer sizes must be positive: " + in + "x" + out);
      if (weights.length != (long) in * out) {
        throw new IllegalArgumentException("weights have " + weights.length + " elements, expected out*in = " + out + "*" + in);
      }
      if (bias.length != out) throw new IllegalArgumentException("bias has " + bias.length + " elements, expected " + out);
      this.in = in;
      this.out = out;
      this.weights = weights;
      this.bias = bias;
      this.activation = activation;
    }

    public int inputs() { return in; }

    public int outputs() { return out; }

    public Activation activation() { return activation; }
  }

  private final List<Layer> layers;

  public MlpModel(List<Layer> layers) {
    if (layers.isEmpty()) throw new IllegalArgumentException("a model needs at least one layer");
    for (int i = 1; i < layers.size(); i++) {
      if (layers.get(i).in != layers.get(i - 1).out) {
        throw new IllegalArgumentException("layer " + i + " takes " + layers.get(i).in + " inputs, layer " + (i - 1)
            + " gives " + layers.get(i - 1).out);
      }
    }
    this.layers = Collections.unmodifiableList(new ArrayList<>(layers));
  }

  /**
   * A model with random weights (uniform, scaled by 1/sqrt(fan-in)) of the given layer widths, ReLU
   * between layers and {@code last} at the end. Same seed, same model.
   */
  public static MlpModel random(long seed, Activation last, int... widths) {
    if (widths.length < 2) throw new IllegalArgumentException("need at least input and output widths");
    Random r = new Random(seed);
    List<Layer> ls = new ArrayList<>();
    for (int i = 0; i + 1 < widths.length; i++) {
      int in = widths[i];
      int out = widths[i + 1];
      float[] w = new float[in * out];
      float[] b = new float[out];
      float scale = (float) (1 / Math.sqrt(in));
      for (int k = 0; k < w.length; k++) w[k] = (r.nextFloat() * 2 - 1) * scale;
      for (int k = 0; k < b.length; k++) b[k] = (r.nextFloat() * 2 - 1) * 0.1f;
      ls.add(new Layer(in, out, w, b, i + 2 == widths.length ? last : Activation.RELU));
    }
    return new MlpModel(ls);
  }

  public List<Layer> layers() { return layers; }

  public int inputs() { return layers.get(0).in; }

  public int outputs() { return layers.get(layers.size() - 1).out; }

  /** Number of weights and biases. */
  public long parameterCount() {
    long n = 0;
    for (Layer l : layers) n += (long) l.in * l.out + l.out;
    return n;
  }

  /** Single-rank inference of one input (float32 arithmetic, the reference for the split one). */
  public float[] forward(float[] x) {
    if (x.length != inputs()) throw new IllegalArgumentException("input has " + x.length + " features, the model " + inputs());
    float[] a = x;
    for (Layer l : layers) {
      float[] y = new float[l.out];
      for (int o = 0; o < l.out; o++) {
        float s = 0;
        int base = o * l.in;
        for (int i = 0; i < l.in; i++) s += l.weights[base + i] * a[i];
        y[o] = l.activation.apply(s + l.bias[o]);
      }
      a = y;
    }
    return a;
  }
}
