package io.sparkcomms.spark.dataset;

import io.sparkcomms.collectives.Communicator;
import io.sparkcomms.collectives.HostTensor;
import io.sparkcomms.collectives.ReduceOp;
import java.io.Serializable;
import java.util.AbstractList;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Random;
import java.util.RandomAccess;
import org.apache.hadoop.conf.Configuration;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.sql.Dataset;

/**
 * Data-parallel training over a Dataset's partitions: one barrier stage, every partition one rank;
 * each step every rank computes the gradient of a batch of its own rows ({@link GradientFunction}),
 * the ranks allReduce the gradients with AVG (through the configured algorithm: FP8 low precision on
 * or off, see {@link #comm(CommSettings)}), and every rank applies the same SGD update (with optional
 * momentum), so the parameters stay identical everywhere.
 *
 * <pre>{@code
 * // LogisticRegressionGradient: the example model (io.sparkcomms.examples.models)
 * TrainingResult r = new DataParallelTrainer<>(new LogisticRegressionGradient())
 *     .initialParams(new float[31]).epochs(20).learningRate(0.5).momentum(0.9).batchSize(32)
 *     .checkpointDir("hdfs:///models/lr").checkpointEvery(5)
 *     .fit(LabeledVector.fromDataset(df, "features", "label"));
 * }</pre>
 *
 * <p>Batches: with {@code batchSize} b, an epoch has {@code ceil(maxRows / b)} steps, maxRows the
 * largest partition; each rank shuffles its rows every epoch (seeded by seed, epoch and rank) and
 * wraps around when it runs out, so all ranks make the same number of steps. {@code batchSize 0}:
 * one full-partition step per epoch. AVG weighs ranks equally: balance the partitions. Empty
 * partitions are an error.
 *
 * <p>Checkpoints: with a checkpoint directory (any Hadoop file system URI), rank 0 saves parameters,
 * momentum and loss history every {@code checkpointEvery} epochs and after the last, through the
 * Hadoop FileSystem API ({@link Checkpoints}). A run (and a retried stage attempt) starts from the
 * newest checkpoint there: rank 0 reads it and broadcasts it to the others. Training with the same
 * seed is deterministic, so stopping and resuming gives the same parameters as one run.
 *
 * <p>Retries: the stage is retriable by default ({@link BarrierOptions#retriable}); a failed attempt
 * restarts from the newest checkpoint.
 *
 * @param <T> row type
 */
public final class DataParallelTrainer<T> implements Serializable {
  private static final long serialVersionUID = 1L;

  private final GradientFunction<T> gradient;
  private float[] initialParams;
  private int epochs = 10;
  private int batchSize = 0;
  private double learningRate = 0.1;
  private double momentum = 0;
  private long seed = 1;
  private String checkpointDir;
  private int checkpointEvery = 1;
  private int keepCheckpoints = 2;
  private boolean resume = true;
  private BarrierOptions barrier = BarrierOptions.defaults().retriable(true);

  public DataParallelTrainer(GradientFunction<T> gradient) {
    if (gradient == null) throw new IllegalArgumentException("gradient function is null");
    this.gradient = gradient;
  }

  /** Starting parameters (required); their length is the parameter count. */
  public DataParallelTrainer<T> initialParams(float[] p) { this.initialParams = p.clone(); return this; }

  /** Total epochs, those restored from a checkpoint included. */
  public DataParallelTrainer<T> epochs(int n) { this.epochs = requireAtLeast("epochs", n, 0); return this; }

  /** Rows per rank per step; 0 = the whole partition (full-batch gradient descent). */
  public DataParallelTrainer<T> batchSize(int n) { this.batchSize = requireAtLeast("batchSize", n, 0); return this; }

  public DataParallelTrainer<T> learningRate(double lr) { this.learningRate = lr; return this; }

  /** Heavy-ball momentum {@code v = mu v + g; p -= lr v}; 0 = plain SGD. */
  public DataParallelTrainer<T> momentum(double mu) {
    if (mu < 0 || mu >= 1) throw new IllegalArgumentException("momentum must be in [0, 1), got " + mu);
    this.momentum = mu;
    return this;
  }

  public DataParallelTrainer<T> seed(long s) { this.seed = s; return this; }

  /** Directory URI for checkpoints (file://, hdfs://, s3a://, ...); null = none. */
  public DataParallelTrainer<T> checkpointDir(String dir) { this.checkpointDir = dir; return this; }

  public DataParallelTrainer<T> checkpointEvery(int epochs) { this.checkpointEvery = requireAtLeast("checkpointEvery", epochs, 1); return this; }

  /** Checkpoints kept (the newest ones). */
  public DataParallelTrainer<T> keepCheckpoints(int n) { this.keepCheckpoints = requireAtLeast("keepCheckpoints", n, 1); return this; }

  /** Whether to start from the newest checkpoint in the directory (default true). */
  public DataParallelTrainer<T> resume(boolean on) { this.resume = on; return this; }

  /** Ranks, retries and communicator options of the barrier stage (default: retriable). */
  public DataParallelTrainer<T> barrierOptions(BarrierOptions o) { this.barrier = o; return this; }

  /** Communicator options, e.g. {@code CommSettings.fromSparkConf().lowPrecision(true, 0)}. */
  public DataParallelTrainer<T> comm(CommSettings settings) { this.barrier = barrier.comm(settings); return this; }

  /** Trains on the rows of {@code data} (one rank per partition, see {@link BarrierOptions#ranks}). */
  public TrainingResult fit(Dataset<T> data) { return fit(data.javaRDD()); }

  /** Trains on the rows of {@code data}. */
  public TrainingResult fit(JavaRDD<T> data) {
    if (initialParams == null) throw new IllegalStateException("initialParams(...) is required");
    Configuration hadoop = data.context().hadoopConfiguration();
    Job<T> job = new Job<>(this, checkpointDir == null ? null : new SerializableHadoopConf(hadoop));
    List<TrainingResult> out = BarrierDatasets.collectFromRank0(data, job::run, barrier);
    return out.get(0);
  }

  private static int requireAtLeast(String name, int v, int min) {
    if (v < min) throw new IllegalArgumentException(name + " must be >= " + min + ", got " + v);
    return v;
  }

  /** What the barrier tasks run: a copy of the settings plus the Hadoop configuration. */
  private static final class Job<T> implements Serializable {
    private static final long serialVersionUID = 1L;
    private final DataParallelTrainer<T> s;
    private final SerializableHadoopConf hadoop;

    Job(DataParallelTrainer<T> settings, SerializableHadoopConf hadoop) {
      this.s = settings;
      this.hadoop = hadoop;
    }

    Iterator<TrainingResult> run(Communicator comm, Iterator<T> rowIt) {
      long t0 = System.nanoTime();
      List<T> rows = new ArrayList<>();
      rowIt.forEachRemaining(rows::add);
      int rank = comm.rank();
      long[] sizes = {rows.size(), -rows.size()};
      comm.allReduce(HostTensor.of(sizes), ReduceOp.MAX);
      long maxRows = sizes[0];
      long minRows = -sizes[1];
      if (minRows == 0) {
        throw new IllegalStateException("DataParallelTrainer: a partition of the training data is empty (partition sizes "
            + minRows + ".." + maxRows + " over " + comm.size() + " ranks); repartition the data");
      }
      int n = s.initialParams.length;
      float[] params = s.initialParams.clone();
      float[] velocity = s.momentum > 0 ? new float[n] : null;
      List<Double> losses = new ArrayList<>();
      int start = 0;
      if (s.checkpointDir != null && s.resume) {
        Optional<Checkpoints.State> ck = rank == 0 ? Checkpoints.latest(s.checkpointDir, hadoop.get()) : Optional.empty();
        long[] hdr = {0, 0};
        if (ck.isPresent()) hdr = new long[] {ck.get().epochsDone(), ck.get().params().length};
        comm.broadcast(HostTensor.of(hdr), 0);
        if (hdr[0] > 0) {
          if (hdr[1] != n) {
            throw new IllegalStateException("checkpoint in " + s.checkpointDir + " has " + hdr[1] + " parameters, the model "
                + n + "; use another directory or resume(false)");
          }
          if (rank == 0) {
            System.arraycopy(ck.get().params(), 0, params, 0, n);
            if (velocity != null && ck.get().velocity() != null) System.arraycopy(ck.get().velocity(), 0, velocity, 0, n);
          }
          double[] hist = rank == 0 ? ck.get().losses() : new double[(int) hdr[0]];
          comm.broadcast(HostTensor.of(params), 0);
          if (velocity != null) comm.broadcast(HostTensor.of(velocity), 0);
          comm.broadcast(HostTensor.of(hist), 0);
          for (double l : hist) losses.add(l);
          start = (int) hdr[0];
        }
      }
      int steps = s.batchSize == 0 ? 1 : (int) ((maxRows + s.batchSize - 1) / s.batchSize);
      int b = s.batchSize == 0 ? rows.size() : Math.min(s.batchSize, rows.size());
      int[] order = new int[rows.size()];
      for (int i = 0; i < order.length; i++) order[i] = i;
      float[] grad = new float[n];
      HostTensor gradT = HostTensor.of(grad);
      for (int epoch = start; epoch < s.epochs; epoch++) {
        if (s.batchSize > 0) {                                  // each epoch's order depends only on (seed, epoch, rank)
          for (int i = 0; i < order.length; i++) order[i] = i;
          shuffle(order, new Random(s.seed * 1_000_003L + epoch * 7919L + rank));
        }
        double lossSum = 0;
        long seen = 0;
        for (int step = 0; step < steps; step++) {
          List<T> batch = new Batch<>(rows, order, (int) ((long) step * b % rows.size()), b);
          java.util.Arrays.fill(grad, 0f);
          double l = s.gradient.compute(params, batch, grad);
          lossSum += l * batch.size();
          seen += batch.size();
          comm.allReduce(gradT, ReduceOp.AVG);
          update(params, velocity, grad);
        }
        double[] epochLoss = {lossSum, seen};
        comm.allReduce(HostTensor.of(epochLoss), ReduceOp.SUM);
        losses.add(epochLoss[0] / epochLoss[1]);
        boolean last = epoch == s.epochs - 1;
        if (rank == 0 && s.checkpointDir != null && ((epoch + 1) % s.checkpointEvery == 0 || last)) {
          Checkpoints.save(s.checkpointDir, hadoop.get(), new Checkpoints.State(epoch + 1, params.clone(),
              velocity == null ? null : velocity.clone(), losses.stream().mapToDouble(Double::doubleValue).toArray()),
              s.keepCheckpoints);
        }
      }
      Map<String, Long> calls = new LinkedHashMap<>();
      comm.stats().callsByProtocol().forEach((a, c) -> calls.put(a.name(), c));
      return List.of(new TrainingResult(params, losses.stream().mapToDouble(Double::doubleValue).toArray(), start,
          comm.size(), comm.backendName(), calls, System.nanoTime() - t0)).iterator();
    }

    private void update(float[] params, float[] velocity, float[] grad) {
      float lr = (float) s.learningRate;
      if (velocity == null) {
        for (int i = 0; i < params.length; i++) params[i] -= lr * grad[i];
      } else {
        float mu = (float) s.momentum;
        for (int i = 0; i < params.length; i++) {
          velocity[i] = mu * velocity[i] + grad[i];
          params[i] -= lr * velocity[i];
        }
      }
    }

    private static void shuffle(int[] a, Random r) {
      for (int i = a.length - 1; i > 0; i--) {
        int j = r.nextInt(i + 1);
        int t = a[i];
        a[i] = a[j];
        a[j] = t;
      }
    }
  }

  /** {@code len} rows of {@code rows} in {@code order} from position {@code from}, wrapping around. */
  private static final class Batch<T> extends AbstractList<T> implements RandomAccess {
    private final List<T> rows;
    private final int[] order;
    private final int from;
    private final int len;

    Batch(List<T> rows, int[] order, int from, int len) {
      this.rows = rows;
      this.order = order;
      this.from = from;
      this.len = len;
    }

    @Override public T get(int i) {
      if (i < 0 || i >= len) throw new IndexOutOfBoundsException(i);
      return rows.get(order[(from + i) % order.length]);
    }

    @Override public int size() { return len; }
  }
}
