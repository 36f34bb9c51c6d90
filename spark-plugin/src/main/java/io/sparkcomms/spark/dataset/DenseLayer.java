package io.sparkcomms.spark.dataset;

import java.io.Serializable;
import java.util.Objects;

/**
 * One dense layer {@code y = activation(W x + b)}, {@code W} row-major {@code [out][in]} (row o holds
 * the weights of output o): the unit {@link TensorParallelInference} splits across ranks. Immutable:
 * the arrays are copied in and out.
 */
public final class DenseLayer implements Serializable {
  private static final long serialVersionUID = 1L;

  /**
   * The activations a split layer supports: element-wise, so each applies to a slice of a layer's
   * outputs as well as to all of them.
   */
  public enum Activation {
    IDENTITY, RELU, TANH, SIGMOID;

    private static final io.sparkcomms.collectives.math.Activation[] MATH = io.sparkcomms.collectives.math.Activation.values();

    /** The same activation of the dense math ({@link io.sparkcomms.collectives.math.Activation}, same order). */
    public io.sparkcomms.collectives.math.Activation math() { return MATH[ordinal()]; }

    /** The activation of one pre-activation value (float32 result). */
    public float apply(float x) { return math().apply(x); }
  }

  final int in;
  final int out;
  final float[] weights;
  final float[] bias;
  final Activation activation;

  /** {@code weights.length == out * in} (row o = output o), {@code bias.length == out}. */
  public DenseLayer(int in, int out, float[] weights, float[] bias, Activation activation) {
    if (in < 1 || out < 1) throw new IllegalArgumentException("layer sizes must be positive: " + in + "x" + out);
    if (weights.length != (long) in * out) {
      throw new IllegalArgumentException("weights have " + weights.length + " elements, expected out*in = " + out + "*" + in);
    }
    if (bias.length != out) throw new IllegalArgumentException("bias has " + bias.length + " elements, expected " + out);
    this.in = in;
    this.out = out;
    this.weights = weights.clone();
    this.bias = bias.clone();
    this.activation = Objects.requireNonNull(activation, "activation");
  }

  public int inputs() { return in; }

  public int outputs() { return out; }

  public Activation activation() { return activation; }

  /** A copy of the weights, row-major {@code [out][in]}. */
  public float[] weights() { return weights.clone(); }

  /** A copy of the bias. */
  public float[] bias() { return bias.clone(); }
}
