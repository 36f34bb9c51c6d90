package io.sparkcomms.spark.dataset;

import io.sparkcomms.collectives.Communicator;
import io.sparkcomms.collectives.HostTensor;
import io.sparkcomms.collectives.ReduceOp;
import io.sparkcomms.collectives.Tensor;
import io.sparkcomms.collectives.Work;
import io.sparkcomms.collectives.math.Activation;
import io.sparkcomms.collectives.math.DenseMath;
import io.sparkcomms.collectives.math.Matrix;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;

/**
 * Data-parallel training of a binary MLP classifier (dense layers, one logit, sigmoid cross-entropy)
 * whose parameters, activations and gradients live in one {@link DenseMath}'s memory: on a GPU they
 * never leave it. One {@link #step}: forward (GEMM + bias and activation per layer), the loss and its
 * gradient, backward (GEMMs, column sums, activation derivatives), an allReduce AVG of the gradients
 * on {@code comm} (one async call per layer, the last layer's first, each issued as soon as the
 * backward pass has written it: the host backend runs it on its own thread while earlier layers are
 * computed; on the GPU it is queued on the math's stream, ordered after the kernels ahead of it), then
 * SGD with heavy-ball momentum on the device. The loss is the one value that comes back to the host.
 *
 * <p>Parameter layout, one flat buffer: per layer the weights {@code [out][in]} row-major, then the
 * bias {@code [out]}; the gradient and the momentum buffers have the same layout, so each layer's
 * gradient is one contiguous tensor for its allReduce.
 */
public final class DenseClassifier implements AutoCloseable {
  private final DenseMath math;
  private final int[] widths;
  private final Activation hidden;
  private final int batch;
  private final Matrix params;
  private final Matrix grads;
  private final Matrix velocity;
  private final Matrix[] w, b, dw, db;   // views of params / grads per layer
  private final Matrix[] act;            // act[0] = the input batch (a view), act[l] = layer l's output
  private final Matrix[] delta;          // delta[l]: gradient of the loss at layer l's pre-activation
  private final Matrix loss;
  private final Matrix lossGrad;

  /**
   * @param widths input width, hidden widths..., 1 (one logit)
   * @param initial the parameters in the layout above ({@link #parameterCount}); see {@link #randomParameters}
   * @param batch rows per step
   */
  public DenseClassifier(DenseMath math, int[] widths, Activation hidden, float[] initial, int batch) {
    if (widths.length < 2 || widths[widths.length - 1] != 1) {
      throw new IllegalArgumentException("widths must be input, hidden..., 1 (one logit), got " + java.util.Arrays.toString(widths));
    }
    if (batch < 1) throw new IllegalArgumentException("batch must be >= 1, got " + batch);
    int n = parameterCount(widths);
    if (initial.length != n) throw new IllegalArgumentException("initial parameters: " + initial.length + ", the model has " + n);
    this.math = math;
    this.widths = widths.clone();
    this.hidden = hidden;
    this.batch = batch;
    int layers = widths.length - 1;
    params = math.upload(initial, 1, n);
    grads = math.zeros(1, n);
    velocity = math.zeros(1, n);
    w = new Matrix[layers];
    b = new Matrix[layers];
    dw = new Matrix[layers];
    db = new Matrix[layers];
    act = new Matrix[layers + 1];
    delta = new Matrix[layers];
    long at = 0;
    for (int l = 0; l < layers; l++) {
      int in = widths[l], out = widths[l + 1];
      w[l] = params.view(at, out, in);
      dw[l] = grads.view(at, out, in);
      at += (long) out * in;
      b[l] = params.view(at, 1, out);
      db[l] = grads.view(at, 1, out);
      at += out;
      act[l + 1] = math.zeros(batch, out);
      delta[l] = math.zeros(batch, out);
    }
    loss = math.zeros(1, 1);
    lossGrad = delta[layers - 1];
  }

  public static int parameterCount(int[] widths) {
    long n = 0;
    for (int l = 0; l + 1 < widths.length; l++) n += (long) widths[l] * widths[l + 1] + widths[l + 1];
    if (n > Integer.MAX_VALUE) throw new IllegalArgumentException("too many parameters: " + n);
    return (int) n;
  }

  /** Seeded uniform weights scaled by 1/sqrt(fan-in), zero biases. */
  public static float[] randomParameters(int[] widths, long seed) {
    float[] p = new float[parameterCount(widths)];
    Random r = new Random(seed);
    int at = 0;
    for (int l = 0; l + 1 < widths.length; l++) {
      float s = (float) (1 / Math.sqrt(widths[l]));
      for (int k = 0; k < widths[l] * widths[l + 1]; k++) p[at++] = (r.nextFloat() * 2 - 1) * s;
      at += widths[l + 1];
    }
    return p;
  }

  public DenseMath math() { return math; }

  public int batchSize() { return batch; }

  /** The gradient buffer (all layers), e.g. to check it. */
  public Matrix gradients() { return grads; }

  /**
   * One step on {@code x} ({@code batch x widths[0]}) and 0/1 labels {@code y} ({@code batch x 1}), in
   * this math's memory: returns this rank's mean loss of the batch (before the update). Collective
   * over {@code comm} (every rank calls it the same number of times); {@code comm} null: no reduction.
   */
  public float step(Communicator comm, Matrix x, Matrix y, float learningRate, float momentum) {
    checkBatch(x, y);
    forward(x, y);
    List<Work> pending = new ArrayList<>();
    backward(l -> {
      if (comm != null) {
        Tensor g = layerGradient(l).tensor();
        pending.add(comm.allReduceAsync(g, g, ReduceOp.AVG));
      }
    });
    for (Work p : pending) p.waitFor();
    update(learningRate, momentum);
    return math.download(loss)[0];
  }

  /** Where {@link #timedStep} reduces the gradients. */
  public enum GradientPath {
    /** In this math's memory: the device buffers themselves on a GPU. */
    IN_PLACE,
    /** Copied to a host array, allReduced from there (staged by a GPU communicator), copied back. */
    HOST_STAGED
  }

  /** One step's loss and where its time went (milliseconds). */
  public record StepTimes(float loss, double computeMs, double collectiveMs, double transferMs) {}

  /**
   * {@link #step} in phases run one after another, each timed: forward and backward, the gradients'
   * allReduce (one call per layer, each waited for), the update (compute), and the host transfers
   * (the loss; with {@link GradientPath#HOST_STAGED} also the gradients down and up). Device phases
   * are timed by events of {@code timeline} (4 points), host copies by the clock. Same result as
   * {@link #step} up to float rounding of the reduction order.
   */
  public StepTimes timedStep(Communicator comm, Matrix x, Matrix y, float learningRate, float momentum, GradientPath path,
      io.sparkcomms.collectives.math.Timeline timeline) {
    checkBatch(x, y);
    timeline.mark(0);
    forward(x, y);
    backward(l -> {});
    timeline.mark(1);
    double transfer = 0, collective = 0;
    if (path == GradientPath.IN_PLACE) {
      for (int l = widths.length - 2; l >= 0; l--) {
        Tensor g = layerGradient(l).tensor();
        comm.allReduce(g, g, ReduceOp.AVG);
      }
      timeline.mark(2);
    } else {
      long t0 = System.nanoTime();
      float[] host = math.download(grads);
      long t1 = System.nanoTime();
      int at = 0;
      for (int l = 0; l + 1 < widths.length; l++) {
        int count = widths[l] * widths[l + 1] + widths[l + 1];
        float[] part = java.util.Arrays.copyOfRange(host, at, at + count);
        comm.allReduce(HostTensor.of(part), ReduceOp.AVG);
        System.arraycopy(part, 0, host, at, count);
        at += count;
      }
      long t2 = System.nanoTime();
      math.upload(host, grads);
      long t3 = System.nanoTime();
      transfer += (t1 - t0 + t3 - t2) / 1e6;
      collective = (t2 - t1) / 1e6;
      timeline.mark(2);
    }
    update(learningRate, momentum);
    timeline.mark(3);
    long t4 = System.nanoTime();
    float l = math.download(loss)[0];
    transfer += (System.nanoTime() - t4) / 1e6;
    double compute = timeline.millis(0, 1) + timeline.millis(2, 3);
    if (path == GradientPath.IN_PLACE) collective = timeline.millis(1, 2);
    return new StepTimes(l, compute, collective, transfer);
  }

  private void checkBatch(Matrix x, Matrix y) {
    if (x.rows() != batch || x.cols() != widths[0] || y.rows() != batch || y.cols() != 1) {
      throw new IllegalArgumentException("batch must be " + batch + " x " + widths[0] + " and labels " + batch + " x 1, got "
          + x.rows() + " x " + x.cols() + " and " + y.rows() + " x " + y.cols());
    }
  }

  /** Activations of every layer and the loss's gradient at the logits. */
  private void forward(Matrix x, Matrix y) {
    int layers = widths.length - 1;
    act[0] = x;
    for (int l = 0; l < layers; l++) {
      math.gemm(1f, act[l], false, w[l], true, 0f, act[l + 1]);               // [batch][out] = a W^T
      math.biasActivation(act[l + 1], b[l], l + 1 == layers ? Activation.IDENTITY : hidden);
    }
    math.sigmoidCrossEntropy(act[layers], y, lossGrad, loss);
  }

  /**
   * Gradients, last layer first; {@code done} is called as soon as a layer's gradient is written
   * (later layers' computation reads neither it nor writes it: it only reads the weights).
   */
  private void backward(java.util.function.IntConsumer done) {
    for (int l = widths.length - 2; l >= 0; l--) {
      math.gemm(1f, delta[l], true, act[l], false, 0f, dw[l]);                // [out][in] = delta^T a
      math.columnSums(delta[l], 1f, db[l]);
      if (l > 0) {
        math.gemm(1f, delta[l], false, w[l], false, 0f, delta[l - 1]);        // [batch][in] = delta W
        math.activationBackward(delta[l - 1], act[l], hidden);
      }
      done.accept(l);
    }
  }

  private void update(float learningRate, float momentum) {
    if (momentum > 0) {
      math.scale(momentum, velocity);
      math.axpy(1f, grads, velocity);
      math.axpy(-learningRate, velocity, params);
    } else {
      math.axpy(-learningRate, grads, params);
    }
  }

  /** Layer {@code l}'s weights and bias gradient: one contiguous view. */
  private Matrix layerGradient(int l) {
    return grads.view(offsetOf(l), 1, widths[l] * widths[l + 1] + widths[l + 1]);
  }

  private long offsetOf(int layer) {
    long at = 0;
    for (int l = 0; l < layer; l++) at += (long) widths[l] * widths[l + 1] + widths[l + 1];
    return at;
  }

  /** The parameters, copied to the host (one download). */
  public float[] parameters() { return math.download(params); }

  /** P(label = 1) of each row of {@code x} (rows x widths[0], host), by the current parameters on the host. */
  public static float[] predict(int[] widths, Activation hidden, float[] params, float[] x, int rows) {
    float[] a = x;
    int at = 0;
    for (int l = 0; l + 1 < widths.length; l++) {
      int in = widths[l], out = widths[l + 1];
      float[] y = new float[rows * out];
      for (int r = 0; r < rows; r++) {
        for (int o = 0; o < out; o++) {
          float s = 0;
          for (int i = 0; i < in; i++) s += a[r * in + i] * params[at + o * in + i];
          float z = s + params[at + out * in + o];
          y[r * out + o] = l + 2 == widths.length ? (float) (1 / (1 + Math.exp(-z))) : hidden.apply(z);
        }
      }
      at += out * in + out;
      a = y;
    }
    return a;
  }

  /** Frees nothing itself: the matrices are the math's, freed when it is closed. */
  @Override public void close() { math.synchronize(); }
}
