package io.sparkcomms.collectives.math;

/** Element-wise activations (numbers = the C ABI's {@code SC_ACT_*}: the ordinal). */
public enum Activation {
  IDENTITY, RELU, TANH, SIGMOID;

  /** The activation of one pre-activation value. */
  public float apply(float x) {
    switch (this) {
      case RELU: return x > 0 ? x : 0;
      case TANH: return (float) Math.tanh(x);
      case SIGMOID: return (float) (1 / (1 + Math.exp(-x)));
      default: return x;
    }
  }

  /** The derivative at the input whose activation is {@code y} (relu: y > 0; tanh: 1 - y^2; sigmoid: y (1 - y)). */
  public float derivativeAtOutput(float y) {
    switch (this) {
      case RELU: return y > 0 ? 1 : 0;
      case TANH: return 1 - y * y;
      case SIGMOID: return y * (1 - y);
      default: return 1;
    }
  }
}
