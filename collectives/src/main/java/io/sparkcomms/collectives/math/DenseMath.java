package io.sparkcomms.collectives.math;

import io.sparkcomms.collectives.Communicator;
import io.sparkcomms.collectives.gpu.GpuCommunicator;

/**
 * Dense float32 math in one place's memory: the JVM's ({@link HostMath}) or one GPU's
 * ({@link DeviceMath}), with the same semantics, so a model written against this interface runs on
 * either and its results agree within float rounding. Matrices are row-major. Operations on a device
 * are asynchronous on the math's stream (for {@link #forCommunicator} the communicator's, so a
 * collective on a {@link Matrix#tensor()} is ordered after the math that wrote it); only
 * {@link #download} and {@link #synchronize} wait.
 *
 * <p>Every size is checked before anything runs: a mismatch is an {@link IllegalArgumentException}
 * naming the shapes, as is a matrix of another math, and an output that overlaps an input of the
 * same operation ({@link #gemm}'s {@code c}, {@link #copy}'s {@code dst}). One thread at a time.
 */
public interface DenseMath extends AutoCloseable {
  /**
   * The math that fits {@code comm}: {@link DeviceMath} on the communicator's GPU and stream for a
   * {@link GpuCommunicator} (or a {@link Communicator#withOptions} view of one), {@link HostMath}
   * otherwise. Close it before the communicator (closing waits for the communicator's stream).
   */
  static DenseMath forCommunicator(Communicator comm) {
    return comm.base() instanceof GpuCommunicator g ? DeviceMath.on(g) : new HostMath();
  }

  /** "host", or the GPU's runtime and BLAS library. */
  String description();

  boolean isDevice();

  /** A new {@code rows x cols} matrix of zeros. */
  Matrix zeros(int rows, int cols);

  /** A new matrix holding {@code data} (row-major, {@code rows * cols} elements): one counted upload. */
  Matrix upload(float[] data, int rows, int cols);

  /** Copies {@code data} into the existing {@code m}: one counted upload. */
  void upload(float[] data, Matrix m);

  /** The elements of {@code m} (waits for the work that writes it): one counted download. */
  float[] download(Matrix m);

  /** {@code dst = src} (same element count; within this memory, not counted). */
  void copy(Matrix src, Matrix dst);

  /** Sets every element of {@code m} to 0. */
  void zero(Matrix m);

  /**
   * {@code c = alpha op(a) op(b) + beta c}, op(x) = x or its transpose; with {@code beta == 0}, c is
   * only written (its old contents, NaN included, do not matter), as in BLAS.
   */
  void gemm(float alpha, Matrix a, boolean transA, Matrix b, boolean transB, float beta, Matrix c);

  /** {@code y += alpha x}. */
  void axpy(float alpha, Matrix x, Matrix y);

  /** {@code x *= alpha}. */
  void scale(float alpha, Matrix x);

  /** {@code y[r][c] = act(y[r][c] + bias[c])}; {@code bias} (1 x cols) may be null. */
  void biasActivation(Matrix y, Matrix bias, Activation act);

  /** {@code grad *= act'(x)}, through {@code out = act(x)} (same shape). */
  void activationBackward(Matrix grad, Matrix out, Activation act);

  /** {@code out[c] = alpha * sum over r of x[r][c]} ({@code out}: 1 x cols). */
  void columnSums(Matrix x, float alpha, Matrix out);

  /**
   * Binary cross-entropy of {@code logits} against 0/1 {@code labels} (same shape, n elements):
   * {@code grad = (sigmoid(logits) - labels) / n}, {@code loss[0]} (1 x 1) = the mean loss.
   */
  void sigmoidCrossEntropy(Matrix logits, Matrix labels, Matrix grad, Matrix loss);

  /** A timeline of {@code points} points in this math's queue of work (close it when done). */
  Timeline timeline(int points);

  /** Waits for all queued work. */
  void synchronize();

  /** Uploads and downloads made so far. */
  Transfers transfers();

  /** Frees every matrix this math allocated (after its queued work). */
  @Override void close();
}
