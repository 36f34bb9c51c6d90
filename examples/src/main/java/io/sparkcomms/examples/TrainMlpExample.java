package io.sparkcomms.examples;

import io.sparkcomms.collectives.math.Activation;
import io.sparkcomms.spark.dataset.BarrierOptions;
import io.sparkcomms.spark.dataset.DenseClassifier;
import io.sparkcomms.spark.dataset.DenseClassifierTrainer;
import io.sparkcomms.spark.dataset.DenseTrainingResult;
import io.sparkcomms.spark.dataset.LabeledVector;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;

/**
 * Example (d): data-parallel training of an MLP classifier (breast cancer data, 30-32-32-1, ReLU)
 * whose tensors stay where its communicator is ({@link DenseClassifierTrainer}): on executors with
 * the GPU backend the weights, activations and gradients live in GPU memory (GEMMs in the vendor
 * BLAS, the gradients allReduced on the device, one host transfer per step: the loss); on the host
 * backend the same code runs on the CPU. Prints the loss per epoch, the accuracy on a held-out 20%,
 * the step time beside the time of a step without the allReduce, and the worst step's host transfers.
 *
 * <pre>bin/sparkcomms-example train-mlp [--epochs 40] [--batch 32] [--lr 0.05] [--momentum 0.9] [--hidden 32] [--ranks N]</pre>
 */
public final class TrainMlpExample {
  static final String USAGE = "usage: bin/sparkcomms-example train-mlp [--master URL (default local-cluster[2,1,1024])] [--epochs 40] [--batch 32]"
      + " [--lr 0.05] [--momentum 0.9] [--hidden 32] [--ranks N (default: every task slot)]";

  public static void main(String[] args) {
    ExampleArgs a = new ExampleArgs(USAGE, args, "epochs", "batch", "lr", "momentum", "hidden", "ranks")
        .requirePositive("epochs", "batch", "hidden", "ranks");
    SparkSession spark = ExampleArgs.session("sparkcomms-train-mlp");
    int status;
    try {
      int hidden = a.getInt("hidden", 32);
      DenseClassifierTrainer t = new DenseClassifierTrainer(30, hidden, hidden).epochs(a.getInt("epochs", 40))
          .batchSize(a.getInt("batch", 32)).learningRate(a.getDouble("lr", 0.05)).momentum(a.getDouble("momentum", 0.9));
      status = run(spark, t, a.getInt("ranks", ExampleArgs.slots(spark)));
    } finally {
      spark.stop();
    }
    System.exit(status);
  }

  /** Trains, prints the report; 0 when the model beats 90% test accuracy and every step moved only its loss. */
  public static int run(SparkSession spark, DenseClassifierTrainer trainer, int ranks) {
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
    List<LabeledVector> train = new ArrayList<>(), test = new ArrayList<>();
    for (Row r : all) {
      double[] x = features(r);
      float[] v = new float[d];
      for (int j = 0; j < d; j++) v[j] = (float) ((x[j] - mean[j]) / Math.sqrt(Math.max(1e-12, sq[j] - mean[j] * mean[j])));
      (r.getInt(0) % 5 == 0 ? test : train).add(new LabeledVector(v, (float) r.getDouble(2)));
    }
    JavaRDD<LabeledVector> rows = JavaSparkContext.fromSparkContext(spark.sparkContext()).parallelize(train, ranks);
    long t0 = System.nanoTime();
    DenseTrainingResult rep = trainer.barrierOptions(BarrierOptions.defaults().ranks(ranks)).fit(rows);
    double seconds = (System.nanoTime() - t0) / 1e9;
    System.out.printf("MLP %s, %d ranks, backend %s, math: %s%n", Arrays.toString(trainer.widths()), ranks, rep.backend(), rep.math());
    System.out.println("epoch  mean loss (rank 0's steps)");
    double[] loss = rep.lossPerEpoch();
    for (int e = 0; e < loss.length; e++) {
      if (e < 3 || e % 5 == 4 || e == loss.length - 1) System.out.printf("%5d  %.4f%n", e + 1, loss[e]);
    }
    float[] x = new float[test.size() * d];
    for (int i = 0; i < test.size(); i++) System.arraycopy(test.get(i).features(), 0, x, i * d, d);
    float[] p = DenseClassifier.predict(trainer.widths(), Activation.RELU, rep.params(), x, test.size());
    int right = 0;
    for (int i = 0; i < test.size(); i++) if ((p[i] > 0.5) == (test.get(i).label() > 0.5)) right++;
    double acc = (double) right / test.size();
    System.out.printf("test accuracy %.4f (%d rows held out); job %.1f s%n", acc, test.size(), seconds);
    System.out.printf("step %.1f us; the same step without the allReduce %.1f us; worst step's host transfers: %s%s%n",
        rep.stepMicros(), rep.computeOnlyMicros(), rep.worstStepTransfers(),
        rep.backend().equals("gpu") ? "; collectives staged through the host: " + rep.stagedCalls() : "");
    boolean ok = acc > 0.9 && rep.lossOnlyPerStep() && rep.stagedCalls() == 0;
    System.out.println(ok ? "OK" : "FAILED (accuracy <= 0.9, or a step moved more than its loss)");
    return ok ? 0 : 1;
  }

  private static double[] features(Row r) {
    List<Object> f = r.getList(1);
    double[] x = new double[f.size()];
    for (int j = 0; j < x.length; j++) x[j] = ((Number) f.get(j)).doubleValue();
    return x;
  }
}
