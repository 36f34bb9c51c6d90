package io.sparkcomms.spark.dataset;

import io.sparkcomms.collectives.Communicator;
import io.sparkcomms.collectives.HostTensor;
import io.sparkcomms.collectives.ReduceOp;
import io.sparkcomms.collectives.gpu.GpuCommunicator;
import io.sparkcomms.collectives.math.Activation;
import io.sparkcomms.collectives.math.DenseMath;
import java.io.Serializable;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import org.apache.spark.api.java.JavaRDD;

/**
 * Data-parallel training of a binary MLP classifier ({@link DenseClassifier}) whose tensors stay
 * where the stage's communicator is: the GPU sibling of {@link DataParallelTrainer}. One barrier
 * stage, one rank per partition; each task trains on its rows with {@link DenseClassifierRun} on
 * {@link DenseMath#forCommunicator} of its communicator, so under the GPU backend the weights,
 * activations and gradients live in GPU memory (GEMMs in the vendor BLAS, the gradients allReduced AVG
 * on the device, one host transfer per step: the loss) and under the host backend the same code runs
 * on the CPU.
 *
 * <pre>{@code
 * DenseTrainingResult r = new DenseClassifierTrainer(30, 32, 32)        // 30 inputs, two hidden layers of 32
 *     .epochs(40).batchSize(32).learningRate(0.05).momentum(0.9)
 *     .fit(LabeledVector.fromDataset(df, "features", "label"));          // labels 0/1
 * }</pre>
 *
 * <p>Every rank runs {@code ceil(largest partition / batchSize)} steps an epoch (a smaller partition
 * wraps around); each epoch a rank's rows go up once, shuffled by (seed, epoch, rank). A row whose
 * width differs from the model's input, or an empty partition, fails every rank before training.
 */
public final class DenseClassifierTrainer implements Serializable {
  private static final long serialVersionUID = 1L;
  private final int[] widths;
  private Activation hidden = Activation.RELU;
  private int epochs = 10;
  private int batchSize = 32;
  private double learningRate = 0.05;
  private double momentum = 0.9;
  private long seed = 7;
  private BarrierOptions barrier = BarrierOptions.defaults();

  /** A classifier of {@code inputs} features through hidden layers of the given widths to one logit. */
  public DenseClassifierTrainer(int inputs, int... hiddenWidths) {
    if (inputs < 1) throw new IllegalArgumentException("inputs must be >= 1, got " + inputs);
    widths = new int[hiddenWidths.length + 2];
    widths[0] = inputs;
    for (int i = 0; i < hiddenWidths.length; i++) {
      if (hiddenWidths[i] < 1) throw new IllegalArgumentException("hidden widths must be >= 1: " + java.util.Arrays.toString(hiddenWidths));
      widths[i + 1] = hiddenWidths[i];
    }
    widths[widths.length - 1] = 1;
  }

  /** The activation of the hidden layers (ReLU by default). */
  public DenseClassifierTrainer hidden(Activation a) { this.hidden = java.util.Objects.requireNonNull(a); return this; }

  public DenseClassifierTrainer epochs(int n) { this.epochs = atLeast("epochs", n, 1); return this; }

  /** Rows per rank per step. */
  public DenseClassifierTrainer batchSize(int n) { this.batchSize = atLeast("batchSize", n, 1); return this; }

  public DenseClassifierTrainer learningRate(double lr) { this.learningRate = lr; return this; }

  /** Heavy-ball momentum in [0, 1); 0 = plain SGD. */
  public DenseClassifierTrainer momentum(double mu) {
    if (mu < 0 || mu >= 1) throw new IllegalArgumentException("momentum must be in [0, 1), got " + mu);
    this.momentum = mu;
    return this;
  }

  /** Seeds the initial weights and the shuffles. */
  public DenseClassifierTrainer seed(long s) { this.seed = s; return this; }

  /** Ranks, retries and communicator options of the barrier stage. */
  public DenseClassifierTrainer barrierOptions(BarrierOptions o) { this.barrier = o; return this; }

  /** Layer widths: inputs, hidden..., 1. */
  public int[] widths() { return widths.clone(); }

  /** The per-rank run these settings make. */
  public DenseClassifierRun run() {
    return new DenseClassifierRun(widths, hidden, batchSize, epochs, (float) learningRate, (float) momentum, seed);
  }

  /** Trains on {@code data} (labels 0/1); rank 0's result. */
  public DenseTrainingResult fit(JavaRDD<LabeledVector> data) {
    DenseClassifierRun job = run();
    return BarrierDatasets.collectFromRank0(data, (comm, rows) -> List.of(trainPartition(comm, rows, job)).iterator(), barrier).get(0);
  }

  private static int atLeast(String name, int v, int min) {
    if (v < min) throw new IllegalArgumentException(name + " must be >= " + min + ", got " + v);
    return v;
  }

  /**
   * One rank's part of {@link #fit}, for code that runs its own barrier stage (or ranks without
   * Spark): the ranks of {@code comm} agree on the steps per epoch and on their rows being usable
   * (a bad row or an empty partition fails every rank before training, with
   * {@link IllegalArgumentException}: on its rank naming the row, on the others naming the rank),
   * then train on their rows ({@code job}: {@link #run()}). Collective over {@code comm}.
   */
  public static DenseTrainingResult trainPartition(Communicator comm, Iterator<LabeledVector> it, DenseClassifierRun job) {
    List<LabeledVector> rows = new ArrayList<>();
    it.forEachRemaining(rows::add);
    int d = job.widths()[0];
    String problem = rows.isEmpty() ? "partition " + comm.rank() + " is empty; use fewer ranks or repartition" : null;
    for (int i = 0; i < rows.size() && problem == null; i++) {
      float[] f = rows.get(i).features();
      if (f == null || f.length != d) problem = "row " + i + " of partition " + comm.rank() + " has " + (f == null ? "no" : f.length) + " features, the model takes " + d;
    }
    long[] agree = {rows.size(), problem == null ? 0 : comm.rank() + 1};
    comm.allReduce(HostTensor.of(agree), ReduceOp.MAX);
    if (problem != null) throw new IllegalArgumentException("DenseClassifierTrainer: " + problem);
    if (agree[1] != 0) {
      throw new IllegalArgumentException("DenseClassifierTrainer: rank " + (agree[1] - 1) + " cannot train on its partition (its error says why)");
    }
    int steps = (int) ((agree[0] + job.batch() - 1) / job.batch());
    float[] x = new float[Math.toIntExact((long) rows.size() * d)], y = new float[rows.size()];
    for (int i = 0; i < rows.size(); i++) {
      System.arraycopy(rows.get(i).features(), 0, x, i * d, d);
      y[i] = rows.get(i).label();
    }
    GpuCommunicator gpu = comm.base() instanceof GpuCommunicator g ? g : null;
    long stagedBefore = gpu == null ? 0 : gpu.hostStagedCalls();     // the agreement above is staged
    try (DenseMath math = DenseMath.forCommunicator(comm)) {
      DenseClassifierRun.Result r = job.run(comm, math, x, y, rows.size(), steps, comm.rank());
      long staged = gpu == null ? 0 : gpu.hostStagedCalls() - stagedBefore;
      double compute = job.computeNanosPerStep(math, 5, 20) / 1e3;
      return (new DenseTrainingResult(r.params(), r.stepLosses(), steps, comm.backendName(), math.description(),
          r.worstStep().toString(), r.oneScalarPerStep(), staged, r.stepNanos() / 1e3 / r.steps(), compute));
    }
  }
}
