package io.sparkcomms.examples;

import io.sparkcomms.collectives.Communicator;
import io.sparkcomms.collectives.HostTensor;
import io.sparkcomms.collectives.ReduceOp;
import io.sparkcomms.collectives.gpu.GpuCommunicator;
import io.sparkcomms.collectives.math.Activation;
import io.sparkcomms.collectives.math.DenseMath;
import io.sparkcomms.examples.models.DataParallelMlpRun;
import io.sparkcomms.examples.models.MlpClassifierTraining;
import io.sparkcomms.spark.dataset.BarrierDatasets;
import io.sparkcomms.spark.dataset.BarrierOptions;
import java.io.Serializable;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;

/**
 * Example (d): data-parallel training of an MLP classifier (breast cancer data, 30-32-32-1, ReLU)
 * whose tensors stay where its communicator is. Each barrier task trains on its partition with
 * {@link DataParallelMlpRun}: the math is {@link DenseMath#forCommunicator} of the task's
 * communicator, so on executors with the GPU backend the weights, activations and gradients live in
 * GPU memory (GEMMs in the vendor BLAS, the gradients allReduced on the device, one host transfer per
 * step: the loss), and on the host backend the same code runs on the CPU. Prints the loss of every
 * epoch, the accuracy on a held-out 20%, the step time beside the time of a step without the
 * allReduce, and the host transfers of the worst step.
 *
 * <pre>bin/sparkcomms-example train-mlp [--epochs 40] [--batch 32] [--lr 0.05] [--momentum 0.9] [--hidden 32] [--ranks N]</pre>
 */
public final class TrainMlpExample {
  static final String USAGE = "usage: bin/sparkcomms-example train-mlp [--master URL (default local-cluster[2,1,1024])] [--epochs 40] [--batch 32]"
      + " [--lr 0.05] [--momentum 0.9] [--hidden 32] [--ranks N (default: every task slot)]";

  /** What rank 0 reports. */
  public record Report(String backend, String math, float[] stepLosses, int stepsPerEpoch, float[] params, String worstStep,
      boolean oneScalarPerStep, double stepMicros, double computeOnlyMicros, long stagedCalls) implements Serializable {}

  public static void main(String[] args) {
    ExampleArgs a = new ExampleArgs(USAGE, args, "epochs", "batch", "lr", "momentum", "hidden", "ranks")
        .requirePositive("epochs", "batch", "hidden", "ranks");
    SparkSession spark = ExampleArgs.session("sparkcomms-train-mlp");
    int status;
    try {
      int hidden = a.getInt("hidden", 32);
      DataParallelMlpRun job = new DataParallelMlpRun(new int[] {30, hidden, hidden, 1}, Activation.RELU, a.getInt("batch", 32),
          a.getInt("epochs", 40), (float) a.getDouble("lr", 0.05), (float) a.getDouble("momentum", 0.9), 7);
      status = run(spark, job, a.getInt("ranks", ExampleArgs.slots(spark)));
    } finally {
      spark.stop();
    }
    System.exit(status);
  }

  /** Trains, prints the report; 0 when the model beats 90% test accuracy and every step moved only its loss. */
  public static int run(SparkSession spark, DataParallelMlpRun job, int ranks) {
    List<Row> all = TrainLogisticRegression.load(spark).collectAsList();
    int d = 30;
    double[] mean = new double[d], sq = new double[d];
    for (Row r : all) {
      double[] x = features(r);
      for (int j = 0; j < d; j++) {
        mean[j] += x[j] / all.size();
        sq[j] += x[j] * x[j] / all.size();
      }
    }
    List<float[]> train = new ArrayList<>(), test = new ArrayList<>();
    for (Row r : all) {
      double[] x = features(r);
      float[] v = new float[d + 1];
      for (int j = 0; j < d; j++) v[j] = (float) ((x[j] - mean[j]) / Math.sqrt(Math.max(1e-12, sq[j] - mean[j] * mean[j])));
      v[d] = (float) r.getDouble(2);
      (r.getInt(0) % 5 == 0 ? test : train).add(v);
    }
    JavaRDD<float[]> rows = JavaSparkContext.fromSparkContext(spark.sparkContext()).parallelize(train, ranks);
    long t0 = System.nanoTime();
    Report rep = BarrierDatasets.collectFromRank0(rows, (comm, it) -> task(comm, it, job), BarrierOptions.defaults().ranks(ranks)).get(0);
    double seconds = (System.nanoTime() - t0) / 1e9;
    int steps = rep.stepsPerEpoch();
    System.out.printf("MLP %s, %d ranks, backend %s, math: %s%n", java.util.Arrays.toString(job.widths()), ranks, rep.backend(), rep.math());
    System.out.println("epoch  mean loss (rank 0's steps)");
    for (int e = 0; e < job.epochs(); e++) {
      double s = 0;
      for (int k = 0; k < steps; k++) s += rep.stepLosses()[e * steps + k];
      if (e < 3 || e % 5 == 4 || e == job.epochs() - 1) System.out.printf("%5d  %.4f%n", e + 1, s / steps);
    }
    float[] x = new float[test.size() * d];
    for (int i = 0; i < test.size(); i++) System.arraycopy(test.get(i), 0, x, i * d, d);
    float[] p = MlpClassifierTraining.predict(job.widths(), job.hidden(), rep.params(), x, test.size());
    int right = 0;
    for (int i = 0; i < test.size(); i++) if ((p[i] > 0.5) == (test.get(i)[d] > 0.5)) right++;
    double acc = (double) right / test.size();
    System.out.printf("test accuracy %.4f (%d rows held out); job %.1f s%n", acc, test.size(), seconds);
    System.out.printf("step %.1f us; the same step without the allReduce %.1f us; worst step's host transfers: %s%s%n",
        rep.stepMicros(), rep.computeOnlyMicros(), rep.worstStep(),
        rep.backend().equals("gpu") ? "; collectives staged through the host: " + rep.stagedCalls() : "");
    boolean ok = acc > 0.9 && rep.oneScalarPerStep() && rep.stagedCalls() == 0;
    System.out.println(ok ? "OK" : "FAILED (accuracy <= 0.9, or a step moved more than its loss)");
    return ok ? 0 : 1;
  }

  private static double[] features(Row r) {
    List<Object> f = r.getList(1);
    double[] x = new double[f.size()];
    for (int j = 0; j < x.length; j++) x[j] = ((Number) f.get(j)).doubleValue();
    return x;
  }

  /** One rank: agree on the steps per epoch (the largest partition's), train, report. */
  static Iterator<Report> task(Communicator comm, Iterator<float[]> it, DataParallelMlpRun job) {
    List<float[]> rows = new ArrayList<>();
    it.forEachRemaining(rows::add);
    int d = job.widths()[0];
    long[] n = {rows.size(), -rows.size()};
    comm.allReduce(HostTensor.of(n), ReduceOp.MAX);
    if (-n[1] == 0) throw new IllegalStateException("a partition of the training data is empty; use fewer ranks");
    int steps = (int) ((n[0] + job.batch() - 1) / job.batch());
    float[] x = new float[rows.size() * d], y = new float[rows.size()];
    for (int i = 0; i < rows.size(); i++) {
      System.arraycopy(rows.get(i), 0, x, i * d, d);
      y[i] = rows.get(i)[d];
    }
    try (DenseMath math = DenseMath.forCommunicator(comm)) {
      DataParallelMlpRun.Result r = job.run(comm, math, x, y, rows.size(), steps, comm.rank());
      long staged = comm instanceof GpuCommunicator g ? g.hostStagedCalls() : 0;
      double compute = job.computeNanosPerStep(math, 5, 20) / 1e3;
      return List.of(new Report(comm.backendName(), math.description(), r.stepLosses(), steps, r.params(), r.worstStep().toString(),
          r.oneScalarPerStep(), r.stepNanos() / 1e3 / r.steps(), compute, staged)).iterator();
    }
  }
}
