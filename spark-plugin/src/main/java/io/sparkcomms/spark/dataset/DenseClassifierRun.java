package io.sparkcomms.spark.dataset;

import io.sparkcomms.collectives.Communicator;
import io.sparkcomms.collectives.math.Activation;
import io.sparkcomms.collectives.math.DenseMath;
import io.sparkcomms.collectives.math.Matrix;
import io.sparkcomms.collectives.math.Transfers;
import java.util.Random;

/**
 * One rank's data-parallel training of {@link DenseClassifier} on its rows, the same code on
 * either math: the device-resident job on a GPU, its CPU run on the host. Each epoch the rank's rows
 * go up once, shuffled (seeded by epoch and rank) and wrapped to whole batches; the steps then run on
 * views of them, so a step's only host transfer is its loss (checked: {@link Result#worstStep}).
 *
 * @param widths input width, hidden widths..., 1
 */
public record DenseClassifierRun(int[] widths, Activation hidden, int batch, int epochs, float learningRate, float momentum,
    long seed) implements java.io.Serializable {
  /** Losses of every step in order, the final parameters, the most any step transferred, and the time in steps. */
  public record Result(float[] stepLosses, float[] params, Transfers worstStep, long stepNanos, int steps) {
    /** Whether every step made exactly one transfer: its loss (4 bytes) down. */
    public boolean oneScalarPerStep() {
      return worstStep.uploads() == 0 && worstStep.downloads() == 1 && worstStep.downloadBytes() == 4;
    }
  }

  /**
   * Trains on {@code rows} rows of {@code x} ({@code [rows][widths[0]]} row-major) with 0/1 labels
   * {@code y}; {@code comm} is the data-parallel group (null: one rank, no reduction). Every rank of
   * {@code comm} must pass the same number of steps per epoch ({@code ceil(rows / batch)}, so equal
   * partitions, or pass {@code stepsPerEpoch} agreed beforehand).
   */
  public Result run(Communicator comm, DenseMath math, float[] x, float[] y, int rows, int stepsPerEpoch, int rank) {
    int in = widths[0];
    if (x.length != (long) rows * in || y.length != rows) throw new IllegalArgumentException("data shape: " + x.length + ", " + y.length);
    if (rows < 1) throw new IllegalArgumentException("a rank needs at least one row");
    float[] init = DenseClassifier.randomParameters(widths, seed);
    DenseClassifier model = new DenseClassifier(math, widths, hidden, init, batch);
    int steps = stepsPerEpoch;
    int epochRows = Math.toIntExact((long) steps * batch);
    Math.toIntExact((long) epochRows * in);                     // an epoch's rows fit one float[]
    Matrix ex = math.zeros(epochRows, in), ey = math.zeros(epochRows, 1);
    float[] hx = new float[epochRows * in], hy = new float[epochRows];
    float[] losses = new float[epochs * steps];
    Transfers worst = Transfers.NONE;
    long nanos = 0;
    int[] order = new int[rows];
    for (int epoch = 0; epoch < epochs; epoch++) {
      for (int i = 0; i < rows; i++) order[i] = i;
      Random r = new Random(seed * 1_000_003L + epoch * 7919L + rank);
      for (int i = rows - 1; i > 0; i--) {
        int j = r.nextInt(i + 1), t = order[i];
        order[i] = order[j];
        order[j] = t;
      }
      for (int k = 0; k < epochRows; k++) {
        int src = order[k % rows];
        System.arraycopy(x, src * in, hx, k * in, in);
        hy[k] = y[src];
      }
      math.upload(hx, ex);
      math.upload(hy, ey);
      for (int s = 0; s < steps; s++) {
        Matrix bx = ex.view((long) s * batch * in, batch, in), by = ey.view((long) s * batch, batch, 1);
        Transfers before = math.transfers();
        long t0 = System.nanoTime();
        losses[epoch * steps + s] = model.step(comm, bx, by, learningRate, momentum);
        nanos += System.nanoTime() - t0;
        Transfers d = math.transfers().since(before);
        if (d.uploads() + d.downloads() > worst.uploads() + worst.downloads() || d.downloadBytes() > worst.downloadBytes()) worst = d;
      }
    }
    return new Result(losses, model.parameters(), worst, nanos, epochs * steps);
  }

  /**
   * Mean time of one step without the collective ({@code comm} null), on a batch of zeros after
   * {@code warmup} untimed steps: the compute-and-transfer part of a step, to set beside a step's
   * full time (the rest is the gradients' allReduce).
   */
  public long computeNanosPerStep(DenseMath math, int warmup, int steps) {
    DenseClassifier t = new DenseClassifier(math, widths, hidden, DenseClassifier.randomParameters(widths, seed), batch);
    Matrix x = math.zeros(batch, widths[0]), y = math.zeros(batch, 1);
    for (int i = 0; i < warmup; i++) t.step(null, x, y, learningRate, momentum);
    long t0 = System.nanoTime();
    for (int i = 0; i < steps; i++) t.step(null, x, y, learningRate, momentum);
    return (System.nanoTime() - t0) / Math.max(1, steps);
  }

  /**
   * Seeded synthetic binary data: features uniform in [-1, 1], label 1 when a fixed random
   * quadratic form is positive (a boundary a linear model cannot draw). Row i is the same for every
   * caller, so partitions of one data set can be taken by rank ({@code i % ranks == rank}).
   */
  public static float[][] syntheticRows(int rows, int features, long seed) {
    Random r = new Random(seed);
    float[] a = new float[features];
    for (int j = 0; j < features; j++) a[j] = r.nextFloat() * 2 - 1;
    float[][] out = new float[rows][];
    for (int i = 0; i < rows; i++) {
      float[] v = new float[features + 1];
      double q = 0;
      for (int j = 0; j < features; j++) {
        v[j] = r.nextFloat() * 2 - 1;
        q += a[j] * v[j] * (j % 2 == 0 ? 1 : v[j]);
      }
      v[features] = q > 0.1 ? 1 : 0;
      out[i] = v;
    }
    return out;
  }
}
