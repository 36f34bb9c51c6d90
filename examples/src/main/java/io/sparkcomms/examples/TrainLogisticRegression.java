package io.sparkcomms.examples;

import io.sparkcomms.examples.models.LogisticRegressionGradient;
import io.sparkcomms.spark.dataset.BarrierOptions;
import io.sparkcomms.spark.dataset.CommSettings;
import io.sparkcomms.spark.dataset.DataParallelTrainer;
import io.sparkcomms.spark.dataset.LabeledVector;
import io.sparkcomms.spark.dataset.TrainingResult;
import io.sparkcomms.spark.dataset.VectorColumns;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintWriter;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Random;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;

/**
 * Example (a): data-parallel logistic regression on the Breast Cancer Wisconsin (Diagnostic) data
 * (569 rows, 30 features; examples/DATA.md), shipped in this jar. Features are standardized with
 * {@link VectorColumns} (mean and mean of squares through allReduce), then
 * {@link DataParallelTrainer} trains twice, allReduce in FP32 and in FP8 low precision, from the
 * same start; it prints the loss of every epoch side by side and the accuracy of both models on a
 * held-out 20%.
 *
 * <pre>bin/sparkcomms-example train [--epochs 30] [--batch 32] [--lr 0.1] [--momentum 0.9] [--ranks N]
 *                          [--checkpoint-dir URI] [--loss-csv FILE]</pre>
 */
public final class TrainLogisticRegression {
  static final String USAGE = "usage: bin/sparkcomms-example train [--master URL (default local-cluster[2,1,1024])] [--epochs 30] [--batch 32] [--lr 0.1]"
      + " [--momentum 0.9] [--ranks N (default: every task slot)] [--checkpoint-dir URI (file://, hdfs://, s3a://; reruns resume)] [--loss-csv FILE]";

  /** One training run's outcome. */
  public record Run(String name, TrainingResult result, double trainAccuracy, double testAccuracy) {}

  public static void main(String[] args) {
    ExampleArgs a = new ExampleArgs(USAGE, args, "epochs", "batch", "lr", "momentum", "ranks", "checkpoint-dir", "loss-csv")
        .requirePositive("epochs", "batch", "ranks");
    SparkSession spark = ExampleArgs.session("sparkcomms-train");
    try {
      int ranks = a.getInt("ranks", ExampleArgs.slots(spark));
      List<Run> runs = train(spark, a.getInt("epochs", 30), a.getInt("batch", 32), a.getDouble("lr", 0.1),
          a.getDouble("momentum", 0.9), ranks, a.get("checkpoint-dir", null));
      print(runs);
      if (a.get("loss-csv", null) != null) writeLossCsv(runs, Path.of(a.get("loss-csv", null)));
    } finally {
      spark.stop();
    }
  }

  /** The data set as a DataFrame: {@code features array<double>} (raw), {@code label double}, {@code id int}. */
  public static Dataset<Row> load(SparkSession spark) {
    List<Row> rows = new ArrayList<>();
    try (BufferedReader r = new BufferedReader(new InputStreamReader(
        TrainLogisticRegression.class.getResourceAsStream("breast_cancer_wisconsin.csv"), StandardCharsets.UTF_8))) {
      r.readLine();                                              // "569,30,malignant,benign"
      String line;
      int id = 0;
      while ((line = r.readLine()) != null) {
        String[] f = line.split(",");
        double[] x = new double[f.length - 1];
        for (int j = 0; j < x.length; j++) x[j] = Double.parseDouble(f[j]);
        rows.add(RowFactory.create(id++, x, Double.parseDouble(f[f.length - 1])));
      }
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    StructType schema = new StructType().add("id", DataTypes.IntegerType)
        .add("features", DataTypes.createArrayType(DataTypes.DoubleType, false))
        .add("label", DataTypes.DoubleType);
    return spark.createDataFrame(rows, schema);
  }

  /** Trains with LP off and on; {@code checkpointDir} null: a fresh temporary directory per run. */
  public static List<Run> train(SparkSession spark, int epochs, int batch, double lr, double momentum, int ranks,
      String checkpointDir) {
    Dataset<Row> raw = load(spark).repartition(ranks).cache();
    // Standardize: mean and mean of squares of the feature column through allReduce.
    BarrierOptions barrier = BarrierOptions.defaults().ranks(ranks);
    double[] mean = VectorColumns.summary(raw, "features", barrier).mean();
    Dataset<Row> squares = raw.selectExpr("transform(features, x -> x * x) AS sq");
    double[] meanSq = VectorColumns.summary(squares, "sq", barrier).mean();
    double[] std = new double[mean.length];
    for (int j = 0; j < std.length; j++) std[j] = Math.sqrt(Math.max(meanSq[j] - mean[j] * mean[j], 1e-12));
    // Collected in id order: the repartitioned rows' order depends on how many executor cores had
    // registered when the job started (the local collection's input partitioning), and the split below
    // must not.
    JavaRDD<LabeledVector> all = LabeledVector.fromDataset(raw.orderBy("id"), "features", "label").map(v -> {
      float[] x = v.features();
      float[] z = new float[x.length];
      for (int j = 0; j < x.length; j++) z[j] = (float) ((x[j] - mean[j]) / std[j]);
      return new LabeledVector(z, v.label());
    });
    // Deterministic 80/20 split.
    List<LabeledVector> rows = new ArrayList<>(all.collect());
    Collections.shuffle(rows, new Random(2024));
    int cut = rows.size() * 4 / 5;
    List<LabeledVector> trainRows = rows.subList(0, cut);
    List<LabeledVector> testRows = rows.subList(cut, rows.size());
    JavaRDD<LabeledVector> trainRdd = new org.apache.spark.api.java.JavaSparkContext(spark.sparkContext())
        .parallelize(new ArrayList<>(trainRows), ranks).cache();
    List<Run> runs = new ArrayList<>();
    for (boolean lp : new boolean[] {false, true}) {
      String name = lp ? "fp8-lp" : "fp32";
      String dir = checkpointDir != null ? checkpointDir.replaceAll("/+$", "") + "/" + name : tempDir(name);
      TrainingResult r = new DataParallelTrainer<>(new LogisticRegressionGradient(1e-4))
          .initialParams(new float[LogisticRegressionGradient.parameterCount(mean.length)])
          .epochs(epochs).batchSize(batch).learningRate(lr).momentum(momentum).seed(7)
          .checkpointDir(dir).checkpointEvery(5)
          .barrierOptions(BarrierOptions.defaults().ranks(ranks).retriable(true))
          // LP on: FP8 from 0 bytes (the 31 gradients are far below the 16M default threshold)
          .comm(CommSettings.fromSparkConf().lowPrecision(lp, 0))
          .fit(trainRdd);
      runs.add(new Run(name, r, accuracy(r.params(), trainRows), accuracy(r.params(), testRows)));
    }
    trainRdd.unpersist();
    raw.unpersist();
    return runs;
  }

  static double accuracy(float[] params, List<LabeledVector> rows) {
    int ok = 0;
    for (LabeledVector v : rows) if ((LogisticRegressionGradient.predict(params, v.features()) > 0.5) == (v.label() > 0.5)) ok++;
    return ok / (double) rows.size();
  }

  static void print(List<Run> runs) {
    Run a = runs.get(0);
    Run b = runs.get(1);
    System.out.printf("data-parallel logistic regression, breast cancer wisconsin (455 train / 114 test rows), %d ranks, %s backend%n",
        a.result().ranks(), a.result().backend());
    if (a.result().resumedFromEpoch() > 0 || b.result().resumedFromEpoch() > 0) {
      System.out.printf("resumed from checkpoints: fp32 at epoch %d, fp8-lp at epoch %d%n",
          a.result().resumedFromEpoch(), b.result().resumedFromEpoch());
    }
    System.out.println("epoch   loss(fp32)   loss(fp8-lp)");
    double[] la = a.result().lossPerEpoch();
    double[] lb = b.result().lossPerEpoch();
    for (int e = 0; e < la.length; e++) System.out.printf("%5d   %10.6f   %12.6f%n", e + 1, la[e], lb[e]);
    for (Run r : runs) {
      System.out.printf("%-7s train accuracy %.4f  test accuracy %.4f  allReduce calls %s  %.2f s%n", r.name(),
          r.trainAccuracy(), r.testAccuracy(), r.result().callsByProtocol(), r.result().trainNanos() / 1e9);
    }
  }

  static void writeLossCsv(List<Run> runs, Path file) {
    try (PrintWriter w = new PrintWriter(Files.newBufferedWriter(file))) {
      w.println("epoch,loss_fp32,loss_fp8_lp");
      double[] la = runs.get(0).result().lossPerEpoch();
      double[] lb = runs.get(1).result().lossPerEpoch();
      for (int e = 0; e < la.length; e++) w.println((e + 1) + "," + la[e] + "," + lb[e]);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  private static String tempDir(String name) {
    try {
      return Files.createTempDirectory("sparkcomms-train-" + name).toUri().toString();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }
}
